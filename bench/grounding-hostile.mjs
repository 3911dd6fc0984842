#!/usr/bin/env node
// One grounding check of hostile inputs at the size the budget is stated for (100 KB of sources, a 4 KB answer,
// ≤ 20 ms) and at the check's own bounds (128 KB of sources, 16 KB of answer): long tokens, punctuation runs,
// invisible characters, digit runs, repeated and run-on sentences. Prints the fastest and median of 5 checks per
// input, CPU of this process, slowest first; inputs over 20 ms are marked.
//
//   npx turbo run build --filter=@svc/grounding && taskset -c 1 node bench/grounding-hostile.mjs [BASE_DIST_INDEX_JS]
//
// With a base build's dist/index.js, both builds are timed side by side.
import { performance } from 'node:perf_hooks';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const builds = [['new', await import('@svc/grounding')]];
if (process.argv[2]) builds.unshift(['base', await import(pathToFileURL(resolve(process.argv[2])).href)]);

const KB = 1000;
const rep = (s, n) => s.repeat(Math.ceil(n / s.length)).slice(0, n);
const random = (n, alphabet) => {
  let s = '';
  let x = 12345;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += alphabet[x % alphabet.length];
  }
  return s;
};
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const prose = 'The tower was finished in 1889 and is 330 metres tall. ';
const pets = rep('The cat sat on the mat. The dog lay on the rug. ', 100 * KB);
const js = 'function a(b,c){return b.map(function(d){return d*c+1;}).filter(Boolean)};var x={a:1,b:[2,3]};';
const same = (unit) => [rep(unit, 100 * KB), rep(unit, 4 * KB)];

const inputs = {
  'ordinary prose, 100 KB / 4 KB': [rep(prose, 100 * KB), rep(prose, 4 * KB)],
  '100 KB one token': ['x'.repeat(100 * KB), rep('The tower is tall. ', 4 * KB)],
  'base64 blobs': [random(100 * KB, B64), random(4 * KB, B64)],
  'minified JS': same(js),
  'long URLs': [rep(`https://example.com/a/b?x=1&y=2#${'seg/'.repeat(50)} `, 100 * KB), rep('See https://example.com/a/b?x=1 for it. ', 4 * KB)],
  '"...."': same('.'),
  '"!?!?"': same('!?'),
  '"- - -"': same('- '),
  '"| | |"': same('| '),
  'nested brackets': ['('.repeat(50 * KB) + ')'.repeat(50 * KB), '['.repeat(2 * KB) + ']'.repeat(2 * KB)],
  'newlines': ['\n'.repeat(100 * KB), `${'\n'.repeat(4 * KB)}x`],
  'tabs': ['\t'.repeat(100 * KB), `${'\t'.repeat(4 * KB)}x`],
  'NBSP between letters': same('a\u00a0'),
  'zero-width spaces': same('a\u200b'),
  'RTL marks': same('\u200fword\u202e '),
  'combining marks': ['a' + '\u0301'.repeat(100 * KB), 'a' + '\u0301'.repeat(4 * KB)],
  'lone surrogates': [rep('\ud800x', 100 * KB), rep('\udc00y', 4 * KB)],
  'one digit run': same('9'),
  'spaced digits': same('1 2 3 4 5 6 7 8 9 0 '),
  'grouped numbers': same('1,234,567,890.12 '),
  'numbered list marks': same('1. '),
  'one-letter sentences': same('a. '),
  'CJK': same('東京は日本の首都です。'),
  '10,000 sources': [Array.from({ length: 10_000 }, (_, i) => `Source ${i}.`), rep('Source 5. ', 4 * KB)],
  'distinct sentences': [Array.from({ length: 5000 }, (_, i) => `Item ${i} is w${i}.`).join(' '), Array.from({ length: 250 }, (_, i) => `Item ${i * 3} is w${i}.`).join(' ')],
  'repeated sentences against repeated sentences': [pets, rep('The cat sat on the mat. ', 4 * KB)],
  '4 KB run-on sentence of repeated words': [pets, rep('the cat sat on the mat and the dog lay on the rug and ', 4 * KB)],
  '4 KB run-on sentence, clauses by commas': [pets, rep('the cat sat on the mat, the dog lay on the rug, ', 4 * KB)],
  '16 KB run-on sentence of repeated words': [pets, rep('the cat sat on the mat and the dog lay on the rug and ', 16 * KB)],
  '16 KB of distinct sentences sharing words': [pets, Array.from({ length: 1000 }, (_, i) => `The cat ${i} sat on the mat.`).join(' ')],
  // Fenced code is read for its API names (code-blocks.ts): many names, calls, declarations, unclosed fences.
  '16 KB of code in a fence': [rep(prose, 100 * KB), `\`\`\`python\n${rep('client = Acme(api_key=k, timeout=30)\nclient.jobs.create(name=n, retries=3).wait()\n', 16 * KB)}\n\`\`\``],
  '16 KB code line of declarations and arrows': [rep(prose, 100 * KB), `\`\`\`js\n${rep('const a b c d (x, y)) => ', 16 * KB)}\n\`\`\``],
  '16 KB of unclosed fences': [rep(prose, 100 * KB), rep('```js\nfoo.bar(1)\n', 16 * KB)],
  '16 KB of unclosed comments in a fence': [rep(prose, 100 * KB), `\`\`\`js\n${rep('/* a// #', 16 * KB)}`],
  '16 KB of escaped quotes in a fence': [rep(prose, 100 * KB), `\`\`\`js\n${rep('"\\`\\', 16 * KB)}`],
  '16 KB shell session': [rep(prose, 100 * KB), `\`\`\`bash\n${rep('acme run --flag 1 && npm install pkg | grep x; ', 16 * KB)}\n\`\`\``],
};

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
for (const [name, [sources, answer]] of Object.entries(inputs)) {
  const input = { sources: Array.isArray(sources) ? sources : [sources], answer, question: 'What?' };
  const row = { name };
  for (const [build, g] of builds) {
    g.checkGrounding(input);
    const times = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      g.checkGrounding(input);
      times.push(performance.now() - started);
    }
    row[build] = { min: Math.min(...times), median: median(times) };
  }
  rows.push(row);
}
rows.sort((a, b) => b.new.median - a.new.median);
const cell = (t) => `${t.min.toFixed(1).padStart(7)} ${t.median.toFixed(1).padStart(7)}`;
console.log(`${builds.map(([b]) => `${b}: min  median ms`.padStart(24)).join('')}   input`);
for (const row of rows) console.log(`${builds.map(([b]) => `${cell(row[b])}        `).join('')}${row.new.median > 20 ? '>20' : '   '} ${row.name}`);
