// Folding ranges for a .charter file: every `{ ... }`, `[ ... ]` and `""" ... """` that
// spans lines, and every `/* ... */` comment, skipping braces inside strings and comments.
// Pure (no `vscode` import) so that it can be tested with plain node.
'use strict';

/**
 * @param {string} text
 * @returns {{start: number, end: number, kind?: 'comment'}[]} zero-based line ranges
 */
function foldingRanges(text) {
  const ranges = [];
  const open = [];
  let line = 0;
  let i = 0;
  const add = (start, end, kind) => {
    if (end > start) ranges.push(kind ? { start, end, kind } : { start, end });
  };
  while (i < text.length) {
    const c = text[i];
    if (c === '\n') {
      line += 1;
      i += 1;
    } else if (text.startsWith('//', i)) {
      while (i < text.length && text[i] !== '\n') i += 1;
    } else if (text.startsWith('/*', i) || text.startsWith('"""', i)) {
      const [close, kind] = c === '/' ? ['*/', 'comment'] : ['"""', undefined];
      const start = line;
      i += close.length;
      while (i < text.length && !text.startsWith(close, i)) {
        if (text[i] === '\n') line += 1;
        i += 1;
      }
      i += close.length;
      add(start, line, kind);
    } else if (c === '"') {
      i += 1;
      while (i < text.length && text[i] !== '"' && text[i] !== '\n') i += text[i] === '\\' ? 2 : 1;
      if (text[i] === '"') i += 1;
    } else if (c === '{' || c === '[') {
      open.push(line);
      i += 1;
    } else if (c === '}' || c === ']') {
      const start = open.pop();
      // The closing line stays visible, as VS Code does for brace-based folding.
      if (start !== undefined) add(start, line - 1);
      i += 1;
    } else {
      i += 1;
    }
  }
  return ranges;
}

module.exports = { foldingRanges };
