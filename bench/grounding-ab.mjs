#!/usr/bin/env node
// Two builds of @svc/grounding on the same input, alternated in one process: the streams bench's answer against
// its sources, the source index cached as the server caches it. What a change to the check costs per request.
//
//   taskset -c 1 node bench/grounding-ab.mjs /tmp/base/packages/grounding/dist/index.js [rounds]
//
// Build first (npx turbo run build --filter=@svc/grounding), in both checkouts.
import { ANSWER, QUESTION, SOURCE } from './lib/fixtures.mjs';
import { groundingBuilds } from './lib/grounding-builds.mjs';

const { builds, args } = await groundingBuilds('node bench/grounding-ab.mjs BASE_DIST_INDEX_JS [rounds]');
const [roundsArg = '3'] = args;
const input = { sources: [SOURCE, QUESTION], answer: ANSWER };
const N = 10_000;
for (let round = 1; round <= Number(roundsArg); round++) {
  for (const [name, g] of builds) {
    const options = { sourceIndexCache: new g.SourceIndexCache() };
    for (let i = 0; i < 2_000; i++) g.checkGrounding(input, options);
    const started = performance.now();
    for (let i = 0; i < N; i++) g.checkGrounding(input, options);
    console.log(`round ${round} ${name}: ${(((performance.now() - started) / N) * 1000).toFixed(1)} µs per check`);
  }
}
