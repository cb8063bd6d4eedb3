// The Charter extension: starts `charter lsp` over stdio for .charter files, prompt
// templates (.md.j2) and role files (roles/**/*.md), and folds .charter files on braces,
// lists and """ blocks. Highlighting, language configuration and the YAML schemas are
// contributed by package.json alone.
'use strict';

const path = require('path');
const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');
const { foldingRanges } = require('./folding');

/** @type {LanguageClient | undefined} */
let client;

/** The server command from the settings: `charter.server.path` and `charter.server.args`. */
function serverCommand() {
  const config = vscode.workspace.getConfiguration('charter');
  let command = config.get('server.path', 'charter') || 'charter';
  const args = config.get('server.args', ['lsp']);
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  // A relative path (not a bare name looked up on PATH) is relative to the workspace.
  if (folder && command.includes(path.sep) && !path.isAbsolute(command)) {
    command = path.join(folder.uri.fsPath, command);
  }
  return { command, args };
}

function startClient(context) {
  const { command, args } = serverCommand();
  const executable = { command, args, transport: TransportKind.stdio };
  const serverOptions = { run: executable, debug: executable };
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'charter' },
      { scheme: 'file', language: 'charter-template' },
      { scheme: 'untitled', language: 'charter' },
      // Role files (`import role "roles/x.md"`): YAML front matter and a prompt template.
      { scheme: 'file', language: 'markdown', pattern: '**/roles/**/*.md' },
    ],
    synchronize: {
      fileEvents: vscode.workspace.createFileSystemWatcher('**/*.{charter,md.j2,md}'),
    },
  };
  client = new LanguageClient('charter', 'Charter', serverOptions, clientOptions);
  client.start().catch((error) => {
    vscode.window.showErrorMessage(
      `Charter: could not start the language server \`${command} ${args.join(' ')}\` ` +
        `(${error.message}). Install charter, or set "charter.server.path" to its binary.`,
    );
  });
  context.subscriptions.push({ dispose: () => client && client.stop() });
}

async function restartClient(context) {
  if (client) {
    const old = client;
    client = undefined;
    await old.stop().catch(() => {});
  }
  startClient(context);
}

/** @param {vscode.ExtensionContext} context */
function activate(context) {
  context.subscriptions.push(
    vscode.languages.registerFoldingRangeProvider('charter', {
      provideFoldingRanges(document) {
        return foldingRanges(document.getText()).map(
          ({ start, end, kind }) =>
            new vscode.FoldingRange(start, end, kind && vscode.FoldingRangeKind.Comment),
        );
      },
    }),
    vscode.commands.registerCommand('charter.restartServer', () => restartClient(context)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('charter.server')) restartClient(context);
    }),
  );
  startClient(context);
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
