//! `charter lsp`: a language server over stdio (JSON-RPC with Content-Length framing).
//!
//! A thin adapter: one loop owns the open documents and, after every change, compiles each
//! spec they touch with `charter-ide` (the spec itself, or the specs that import an open
//! role file or template), publishes `charter check`'s diagnostics per file and answers
//! requests from those analyses. Positions are converted here (UTF-16 columns).

mod convert;
mod requests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context as _;
use charter_ide::{Analysis, Documents, LineIndex};
use clap::Args;
use lsp_server::{Connection, Message, Notification};
use lsp_types::notification::{self, Notification as _};
use lsp_types::{
    CompletionOptions, HoverProviderCapability, OneOf, PublishDiagnosticsParams, RenameOptions,
    SemanticTokensFullOptions, SemanticTokensLegend, SemanticTokensOptions, ServerCapabilities,
    TextDocumentSyncCapability, TextDocumentSyncKind,
};

use crate::loader::{FsLoader, SPEC_EXTENSION, project_root_above, read_text};
use crate::terminal::{Context, Outcome};

/// Run the language server on stdin and stdout, for an editor to start.
///
/// It reports `charter check`'s diagnostics as you type (in the spec and in the role files
/// and prompt templates it imports), and answers hover, go to definition, find references,
/// rename, completion, document symbols and semantic tokens. Open a `.charter` file, or a
/// role file or template of one: the server finds the spec that imports it.
///
/// Exit status: 0 after the editor's `shutdown` and `exit`; 1 on `exit` without
/// `shutdown`; 2 when the protocol breaks (stdin is not JSON-RPC).
#[derive(Debug, Args)]
#[command(after_help = EDITORS)]
pub struct LspArgs {}

const EDITORS: &str = "\
Editors (the server speaks plain LSP over stdio; `charter` must be on PATH):
  Neovim 0.8+, in init.lua:
    vim.filetype.add({ extension = { charter = 'charter' } })
    vim.api.nvim_create_autocmd('FileType', { pattern = 'charter', callback = function()
      vim.lsp.start({ name = 'charter', cmd = { 'charter', 'lsp' } }) end })
  Neovim 0.7: the same filetype line, then
    local id = vim.lsp.start_client({ name = 'charter', cmd = { 'charter', 'lsp' } })
    vim.api.nvim_create_autocmd('FileType', { pattern = 'charter',
      callback = function() vim.lsp.buf_attach_client(0, id) end })
  VS Code: the extension in editors/vscode/ starts `charter lsp`; a generic LSP client
    extension works too, given the command `charter lsp` for `*.charter` files
  Helix, languages.toml:
    [language-server.charter]
    command = \"charter\"
    args = [\"lsp\"]";

pub fn run(_args: &LspArgs, _context: Context) -> anyhow::Result<Outcome> {
    let (connection, io_threads) = Connection::stdio();
    let capabilities = serde_json::to_value(capabilities()).context("the server's capabilities")?;
    if let Err(error) = connection.initialize(capabilities) {
        anyhow::bail!(
            "the language server expected an `initialize` request on stdin, framed with \
             Content-Length headers as an editor sends it ({error}); `charter lsp` is started \
             by an editor: see `charter lsp --help`"
        );
    }
    let mut server = Server {
        connection: &connection,
        documents: Documents::new(),
        analyses: BTreeMap::new(),
        published: BTreeSet::new(),
    };
    let outcome = server.serve()?;
    drop(connection);
    io_threads
        .join()
        .context("reading from or writing to the editor")?;
    Ok(outcome)
}

fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::FULL)),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![".".to_string(), "{".to_string()]),
            ..CompletionOptions::default()
        }),
        document_symbol_provider: Some(OneOf::Left(true)),
        document_formatting_provider: Some(OneOf::Left(true)),
        semantic_tokens_provider: Some(
            SemanticTokensOptions {
                legend: SemanticTokensLegend {
                    token_types: convert::token_legend(),
                    token_modifiers: Vec::new(),
                },
                full: Some(SemanticTokensFullOptions::Bool(true)),
                range: None,
                work_done_progress_options: Default::default(),
            }
            .into(),
        ),
        ..ServerCapabilities::default()
    }
}

/// The loop's state: the open documents and the analyses of the specs they touch.
struct Server<'c> {
    connection: &'c Connection,
    documents: Documents,
    /// By spec path.
    analyses: BTreeMap<String, Analysis>,
    /// The files last published with diagnostics, to clear when they have none.
    published: BTreeSet<String>,
}

impl Server<'_> {
    fn serve(&mut self) -> anyhow::Result<Outcome> {
        while let Ok(message) = self.connection.receiver.recv() {
            match message {
                Message::Request(request) => {
                    if self.connection.handle_shutdown(&request)? {
                        return Ok(Outcome::Clean);
                    }
                    let response = requests::handle(self, request);
                    self.send(Message::Response(response));
                }
                Message::Notification(note) if note.method == notification::Exit::METHOD => {
                    // `exit` before `shutdown`: the protocol's exit code 1.
                    return Ok(Outcome::Failed);
                }
                Message::Notification(note) => self.notification(note),
                Message::Response(_) => {}
            }
        }
        Ok(Outcome::Clean)
    }

    fn send(&self, message: Message) {
        // The editor went away: the loop ends when its input closes.
        let _ = self.connection.sender.send(message);
    }

    fn notification(&mut self, note: Notification) {
        use lsp_types::{
            DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
        };
        match note.method.as_str() {
            notification::DidOpenTextDocument::METHOD => {
                if let Ok(params) = note
                    .extract::<DidOpenTextDocumentParams>(notification::DidOpenTextDocument::METHOD)
                    && let Some(path) = convert::path_of(&params.text_document.uri)
                {
                    self.documents.set(&path, params.text_document.text);
                    self.refresh();
                }
            }
            notification::DidChangeTextDocument::METHOD => {
                if let Ok(params) = note.extract::<DidChangeTextDocumentParams>(
                    notification::DidChangeTextDocument::METHOD,
                ) && let Some(path) = convert::path_of(&params.text_document.uri)
                {
                    let mut text = self.documents.get(&path).unwrap_or("").to_string();
                    for change in params.content_changes {
                        text = apply_change(&text, change);
                    }
                    self.documents.set(&path, text);
                    self.refresh();
                }
            }
            notification::DidSaveTextDocument::METHOD => self.refresh(),
            notification::DidCloseTextDocument::METHOD => {
                if let Ok(params) = note.extract::<DidCloseTextDocumentParams>(
                    notification::DidCloseTextDocument::METHOD,
                ) && let Some(path) = convert::path_of(&params.text_document.uri)
                {
                    self.documents.remove(&path);
                    self.refresh();
                }
            }
            _ => {}
        }
    }

    /// Re-checks every spec the open documents touch and publishes the diagnostics.
    fn refresh(&mut self) {
        let mut roots: BTreeSet<String> = BTreeSet::new();
        for path in self.documents.paths() {
            if path.ends_with(&format!(".{SPEC_EXTENSION}")) {
                roots.insert(path.to_string());
            } else {
                roots.extend(specs_around(path));
            }
        }
        let mut analyses = BTreeMap::new();
        for root in roots {
            let text = match self.documents.get(&root) {
                Some(text) => text.to_string(),
                None => match read_text(Path::new(&root), &root) {
                    Ok(text) => text,
                    Err(_) => continue,
                },
            };
            let analysis = Analysis::new(
                &root,
                &text,
                &self.documents,
                &FsLoader::for_spec(Path::new(&root)),
            );
            let open = self.documents.get(&root).is_some();
            let touches_open = analysis
                .files()
                .iter()
                .any(|file| self.documents.get(file).is_some());
            if open || touches_open {
                analyses.insert(root, analysis);
            }
        }
        self.analyses = analyses;
        self.publish();
    }

    fn publish(&mut self) {
        let mut by_file: BTreeMap<String, Vec<lsp_types::Diagnostic>> = BTreeMap::new();
        for analysis in self.analyses.values() {
            for file in analysis.files() {
                by_file.entry(file).or_default();
            }
            for (file, found) in analysis.diagnostics() {
                let index = LineIndex::new(analysis.text(&file).unwrap_or(""));
                let list = by_file.entry(file).or_default();
                for diagnostic in &found {
                    let converted = convert::diagnostic(analysis, &index, diagnostic);
                    if !list.contains(&converted) {
                        list.push(converted);
                    }
                }
            }
        }
        for stale in &self.published {
            by_file.entry(stale.clone()).or_default();
        }
        self.published.clear();
        for (file, diagnostics) in by_file {
            let Some(uri) = convert::uri_of(&file) else {
                continue;
            };
            if !diagnostics.is_empty() {
                self.published.insert(file);
            }
            let params = PublishDiagnosticsParams {
                uri,
                diagnostics,
                version: None,
            };
            self.send(Message::Notification(Notification::new(
                notification::PublishDiagnostics::METHOD.to_string(),
                params,
            )));
        }
    }

    /// The analysis that read the file at `path`: its own when it is a spec, else the
    /// first spec that imports it.
    fn analysis_for(&self, path: &str) -> Option<&Analysis> {
        self.analyses.get(path).or_else(|| {
            self.analyses
                .values()
                .find(|analysis| analysis.files().iter().any(|file| file == path))
        })
    }
}

/// A change to a document: the whole text, or a range replaced (for a client that sends
/// ranges even though the server asked for whole texts).
fn apply_change(text: &str, change: lsp_types::TextDocumentContentChangeEvent) -> String {
    let Some(range) = change.range else {
        return change.text;
    };
    let index = LineIndex::new(text);
    let start = convert::offset(&index, range.start);
    let end = convert::offset(&index, range.end).max(start);
    let mut changed = text.to_string();
    changed.replace_range(start..end, &change.text);
    changed
}

/// The specs that may import the file at `path`: the `.charter` files in its directory and
/// each one above it, up to the project root.
fn specs_around(path: &str) -> Vec<String> {
    let path = Path::new(path);
    let Some(directory) = path.parent() else {
        return Vec::new();
    };
    let root = project_root_above(directory);
    let mut found = Vec::new();
    for ancestor in directory.ancestors() {
        if let Ok(entries) = std::fs::read_dir(ancestor) {
            let mut specs: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|p| p.extension().is_some_and(|e| e == SPEC_EXTENSION) && p.is_file())
                .map(|p| charter_ide::normalize(&crate::loader::display_path(&p)))
                .collect();
            specs.sort();
            found.extend(specs);
        }
        if ancestor == root || !ancestor.starts_with(&root) {
            break;
        }
    }
    found
}
