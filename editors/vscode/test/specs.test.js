// Every spec and prompt template of the repository tokenizes with every region closed:
// at the end of each file the grammars are back at the top level, so no string, comment,
// block or Jinja tag runs past where it ends.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const textmate = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const here = __dirname;
const grammars = {
  'source.charter': 'charter.tmLanguage.json',
  'source.jinja.charter': 'jinja.tmLanguage.json',
  'text.jinja.markdown.charter': 'charter-template.tmLanguage.json',
};

function registry() {
  const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm')).buffer;
  const onigLib = oniguruma.loadWASM(wasm).then(() => ({
    createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
    createOnigString: (text) => new oniguruma.OnigString(text),
  }));
  return new textmate.Registry({
    onigLib,
    loadGrammar: async (scope) => {
      const file = grammars[scope];
      if (!file) return null;
      const text = fs.readFileSync(path.join(here, '../syntaxes', file), 'utf8');
      return textmate.parseRawGrammar(text, file);
    },
  });
}

function files(dir, suffix) {
  return fs.readdirSync(dir, { recursive: true })
    .filter((name) => name.endsWith(suffix))
    .map((name) => path.join(dir, name));
}

/** The scopes open at the end of `text`, and lines where an `invalid` scope appears. */
function tokenize(grammar, text) {
  let stack = textmate.INITIAL;
  let open = [];
  for (const line of text.split('\n')) {
    const { tokens, ruleStack } = grammar.tokenizeLine(line, stack);
    stack = ruleStack;
    const last = tokens[tokens.length - 1];
    open = last ? last.scopes : open;
  }
  // The scopes of a fresh empty line after the file: only the root when all is closed.
  return grammar.tokenizeLine('', stack).tokens[0].scopes;
}

const specsDir = path.join(here, '../../../specs');

for (const [scope, suffix] of [['source.charter', '.charter'], ['text.jinja.markdown.charter', '.md.j2']]) {
  test(`every ${suffix} file under specs/ closes every region`, async () => {
    const grammar = await registry().loadGrammar(scope);
    const found = files(specsDir, suffix).filter((file) => !file.includes(`${path.sep}invalid${path.sep}`));
    assert.ok(found.length > 5, `only ${found.length} ${suffix} files found under ${specsDir}`);
    for (const file of found) {
      const scopes = tokenize(grammar, fs.readFileSync(file, 'utf8'));
      assert.deepStrictEqual(scopes, [scope], `${path.relative(specsDir, file)} ends inside ${scopes.join(' ')}`);
    }
  });
}

test('an unclosed {{ in a one-line string ends with the string', async () => {
  const grammar = await registry().loadGrammar('source.charter');
  const scopes = tokenize(grammar, 'role r { prompt: "Hi {{ name" }\nflow {}\n');
  assert.deepStrictEqual(scopes, ['source.charter']);
});

test('an unclosed """ block is still open at the end', async () => {
  const grammar = await registry().loadGrammar('source.charter');
  const scopes = tokenize(grammar, 'spec s version "1"\n"""never closed\n');
  assert.ok(scopes.includes('string.quoted.triple.charter'), scopes.join(' '));
});
