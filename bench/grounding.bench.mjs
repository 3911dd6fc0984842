#!/usr/bin/env node
// The offline grounding check alone, on the bench's own conversation (the sources the server takes from it:
// the system message's policy and the user's message; the ~200-token answer; the user's question), with the
// source index cached as the server caches it: what the check costs on this core, apart from the request;
// also with a new user question each time, as in real traffic, and with no cache at all.
//
//   taskset -c 1 node bench/grounding.bench.mjs
//
// Build first (npx turbo run build --filter=@svc/grounding).
import { Bench } from 'tinybench';
import { checkGrounding, SourceIndexCache } from '@svc/grounding';
import { ANSWER, QUESTION, messages } from './lib/fixtures.mjs';

// What the server's groundingSources() takes from this conversation: the text of every message.
const sources = messages.map((m) => m.content);
const sourceIndexCache = new SourceIndexCache();
// Real traffic repeats the system prompt but not the user's message: 10,000 different questions, asked in turn,
// with the same system message (what the server sees when every request is a new question).
const questions = Array.from({ length: 10_000 }, (_, i) => `${QUESTION} My order number is ${100_000 + i}.`);
const variedCache = new SourceIndexCache();
let asked = 0;
let result;
const bench = new Bench({ time: 2000 });
bench
  .add('checkGrounding, source index cached (as in the server)', () => {
    result = checkGrounding({ sources, answer: ANSWER, question: QUESTION }, { sourceIndexCache });
  })
  .add('checkGrounding, a new question each time (system prompt repeated)', () => {
    const question = questions[asked++ % questions.length];
    result = checkGrounding({ sources: [sources[0], question], answer: ANSWER, question }, { sourceIndexCache: variedCache });
  })
  .add('checkGrounding, source index built each time', () => {
    result = checkGrounding({ sources, answer: ANSWER, question: QUESTION });
  });
await bench.run();
console.table(bench.table());
process.stdout.write(`result: score ${result.score}, grounded ${result.grounded}, ${result.flaggedSpans.length} flagged spans\n`);
