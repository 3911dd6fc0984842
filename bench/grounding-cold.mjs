#!/usr/bin/env node
// The grounding check with its caches made cold, as a server's other work leaves them: before each call,
// MB megabytes are written (one write per 64-byte line); only the call itself is timed. 0 is the warm case
// of bench/grounding.bench.mjs. Same conversation, source index cached as the server caches it.
//
//   for mb in 0 1 2 4 8; do taskset -c 1 node bench/grounding-cold.mjs $mb; done
//
// Build first (npx turbo run build --filter=@svc/grounding).
import { checkGrounding, SourceIndexCache } from '@svc/grounding';
import { ANSWER, QUESTION, messages } from './lib/fixtures.mjs';

const mb = Number(process.argv[2] ?? 0);
const calls = Number(process.argv[3] ?? 5000);
const sources = messages.map((m) => m.content);
const sourceIndexCache = new SourceIndexCache();
const lines = new Float64Array((mb * 1024 * 1024) / 8);
const thrash = () => {
  for (let i = 0; i < lines.length; i += 8) lines[i] += 1;
};
const check = () => checkGrounding({ sources, answer: ANSWER, question: QUESTION }, { sourceIndexCache });

for (let i = 0; i < 3000; i++) {
  check();
  thrash();
}
let ns = 0n;
let score = 0;
for (let i = 0; i < calls; i++) {
  thrash();
  const t0 = process.hrtime.bigint();
  score += check().score;
  ns += process.hrtime.bigint() - t0;
}
if (!(score > 0)) throw new Error('the check returned no score');
process.stdout.write(`${mb} MB written between calls: ${(Number(ns) / calls / 1000).toFixed(1)} µs a call (mean of ${calls})\n`);
