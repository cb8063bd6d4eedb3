// Folding ranges of a .charter file (src/folding.js), with node's test runner.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { foldingRanges } = require('../src/folding');

test('blocks, lists, """ strings and /* */ comments fold; one-line ones do not', () => {
  const text = [
    'spec s version "1"', // 0
    '"""', // 1
    'doc', // 2
    '"""', // 3
    '/* a', // 4
    '   b */', // 5
    'contract A { x: string }', // 6
    'role r {', // 7
    '  rules: [', // 8
    '    core,', // 9
    '  ]', // 10
    '}', // 11
  ].join('\n');
  assert.deepStrictEqual(foldingRanges(text), [
    { start: 1, end: 3 },
    { start: 4, end: 5, kind: 'comment' },
    { start: 8, end: 9 },
    { start: 7, end: 10 },
  ]);
});

test('braces inside strings and comments do not fold', () => {
  const text = ['role r {', '  prompt: "{{ x } {"', '  // {', '  model: m', '}'].join('\n');
  assert.deepStrictEqual(foldingRanges(text), [{ start: 0, end: 3 }]);
});

test('every item of a seed spec folds', () => {
  const file = path.join(__dirname, '../../../specs/seeds/closed_loop.charter');
  const text = fs.readFileSync(file, 'utf8');
  const lines = text.split('\n');
  const starts = new Set(foldingRanges(text).map((r) => r.start));
  lines.forEach((line, n) => {
    if (/^(role|flow|gate|repair|models)\b.*\{\s*(\/\/.*)?$/.test(line)) {
      assert.ok(starts.has(n), `line ${n + 1} (${line.trim()}) does not fold`);
    }
  });
});
