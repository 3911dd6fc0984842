#!/usr/bin/env node
// Two builds of @svc/grounding on the eval's large input (100 KB of sources, a 4 KB answer, built from the dev rows
// as `largeInputMs` in packages/grounding/src/evaluate.ts builds it), alternated in one process: CPU per check,
// uncached, as `npm run eval:grounding` measures it. First checks that both builds give the same results, byte
// for byte, on every dev row (fresh and through a shared SourceIndexCache) and on the large input.
//
//   taskset -c 1 node bench/grounding-large-ab.mjs /tmp/grounding-base-dist/index.js [rounds] [checks per round]
//
// Build first (npx turbo run build --filter=@svc/grounding), and copy the base build's dist before changing it.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { groundingBuilds } from './lib/grounding-builds.mjs';

const { builds, args } = await groundingBuilds('node bench/grounding-large-ab.mjs BASE_DIST_INDEX_JS [rounds] [checks per round]');
const [roundsArg = '20', checksArg = '15'] = args;

const evalDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'shared', 'eval');
const rows = ['grounding-dev.jsonl', 'grounding-dev-more.jsonl'].flatMap((f) =>
  readFileSync(resolve(evalDir, f), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l)),
);
const toInput = (r) => (r.question ? { sources: r.context, answer: r.answer, question: r.question } : { sources: r.context, answer: r.answer });

// As largeInputMs builds it.
let sources = '';
let answer = '';
for (let i = 0; sources.length < 100_000; i++) sources += rows[i % rows.length].context.join('\n') + '\n';
for (let i = 0; answer.length < 4_000; i++) answer += rows[(i * 7) % rows.length].answer + '\n';
const large = { sources: [sources.slice(0, 100_000)], answer: answer.slice(0, 4_000) };

// Same results: every row fresh, every row through one cache (as the server keeps it), and the large input.
const results = builds.map(([, g]) => {
  const cache = new g.SourceIndexCache();
  const out = [];
  for (const r of rows) out.push(JSON.stringify(g.checkGrounding(toInput(r))));
  for (const r of rows) out.push(JSON.stringify(g.checkGrounding(toInput(r), { sourceIndexCache: cache })));
  out.push(JSON.stringify(g.checkGrounding(large)));
  return out;
});
const differing = results[0].filter((json, i) => json !== results[1][i]).length;
console.log(`results: ${results[0].length - differing} of ${results[0].length} identical (${rows.length} rows fresh, ${rows.length} cached, the large input)`);
if (differing > 0) process.exit(1);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const checks = Number(checksArg);
const cpuOf = (g) => {
  const c0 = process.cpuUsage();
  g.checkGrounding(large);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
};
for (let i = 0; i < 10; i++) for (const [, g] of builds) g.checkGrounding(large);
const perRound = new Map(builds.map(([name]) => [name, []]));
for (let round = 1; round <= Number(roundsArg); round++) {
  // The builds take turns check by check, each going first every other time, so that a host whose speed drifts
  // (another process on the core, a collection of the other build's garbage) moves both alike.
  const cpu = new Map(builds.map(([name]) => [name, []]));
  for (let i = 0; i < checks; i++) {
    for (const [name, g] of (round + i) % 2 ? builds : [...builds].reverse()) cpu.get(name).push(cpuOf(g));
  }
  for (const [name] of builds) perRound.get(name).push(median(cpu.get(name)));
  console.log(`round ${round}: ${builds.map(([name]) => `${name} ${median(cpu.get(name)).toFixed(2)}`).join(', ')} ms CPU per check (median of ${checks})`);
}
const [b, n] = builds.map(([name]) => median(perRound.get(name)));
const ratios = perRound.get('new').map((x, i) => x / perRound.get('base')[i]);
console.log(`median of round medians: base ${b.toFixed(2)} ms, new ${n.toFixed(2)} ms; median of round ratios new/base ${median(ratios).toFixed(3)}`);
