#!/usr/bin/env node
// Two builds of @svc/grounding on 100 KB of Chinese or Japanese sources and a 4 KB answer copied from them with
// some places and figures changed (the latency budget of issue #34): CPU per check, uncached, each build in a process
// of its own, the builds' processes taking turns. First checks that both builds give the same results, byte for
// byte, on the large input.
//
//   taskset -c 1 node bench/grounding-cjk-ab.mjs /tmp/grounding-base-dist/index.js [zh|ja|zh-ts|ja-ts] [rounds] [checks per round] [--warm] [--differ]
//
// --warm measures a repeated source: the check as the server runs it, with a SourceIndexCache that already holds the
// source's index (filled by one unmeasured check), each measured check with another answer (sentences copied from the
// source, every third with a figure changed). --differ goes on when the builds' results differ, after printing how
// (claims, grounded, flagged spans, score, and the claims whose verdict changed).
//
// zh and ja are sentences drawn from parts, whose runs of Han and kana repeat far more than prose's; zh-ts and ja-ts
// are people's prose, TypeScript's translated messages (bench/lib/cjk-input.mjs).
//
// Not alternated check by check in one process as bench/grounding-large-ab.mjs does: a check that cuts Chinese run
// by run leaves thousands of ICU break iterators (one per Intl.Segmenter call) for the collector, and the next
// check pays for freeing them. In one process, base 118 ms and new 87 ms alone measured 85 and 128 alternated.
//
// Build first (npx turbo run build --filter=@svc/grounding), and copy the base build's dist before changing it.
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cjkInput } from './lib/cjk-input.mjs';
import { groundingBuilds } from './lib/grounding-builds.mjs';

const child = process.argv[2] === '--child';
const { builds, args } = child
  ? { builds: [['build', await import(pathToFileURL(resolve(process.argv[3])).href)]], args: process.argv.slice(4) }
  : await groundingBuilds('node bench/grounding-cjk-ab.mjs BASE_DIST_INDEX_JS [zh|ja|zh-ts|ja-ts] [rounds] [checks per round]');
const warm = args.includes('--warm');
const differ = args.includes('--differ');
const [lang = 'zh', roundsArg = '5', checksArg = '20'] = args.filter((a) => !a.startsWith('--'));

const large = cjkInput(lang);

/** Answers for the warm checks: 4 KB of the source's sentences from the `k`th on, every third with its first figure moved. */
function otherAnswer(k) {
  const sentences = large.sources[0].split(/(?<=[。！？\n])/).filter((x) => x.trim().length > 0);
  let answer = '';
  for (let i = 0; answer.length < 4_000; i++) {
    let s = sentences[(k * 101 + i * 13) % sentences.length];
    if (i % 3 === 2) s = s.replace(/\d+/, (d) => String(Number(d) + 7));
    answer += s.trim();
  }
  return answer.slice(0, 4_000);
}
const { sources: [sources] } = large;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
if (child) {
  // One build: the median CPU time of `checks` checks after 5 unmeasured ones.
  const checks = Number(checksArg);
  const cpu = [];
  const g = builds[0][1];
  const options = warm ? { sourceIndexCache: new g.SourceIndexCache() } : {};
  if (warm) g.checkGrounding(large, options);
  for (let i = 0; i < 5 + checks; i++) {
    const input = warm ? { sources: large.sources, answer: otherAnswer(i + 1) } : large;
    const c0 = process.cpuUsage();
    g.checkGrounding(input, options);
    const c = process.cpuUsage(c0);
    if (i >= 5) cpu.push((c.user + c.system) / 1000);
  }
  console.log(median(cpu));
  process.exit(0);
}

const results = builds.map(([, g]) => JSON.stringify(g.checkGrounding(large)));
const r0 = JSON.parse(results[0]);
console.log(`${lang}: ${sources.length} source characters, ${large.answer.length} answer characters; ${r0.claims.length} claims, ${r0.claims.filter((c) => c.grounded).length} grounded, ${r0.flaggedSpans.length} flagged spans`);
console.log(`results ${results[0] === results[1] ? 'identical' : 'DIFFER'}`);
if (results[0] !== results[1]) {
  for (const [name, r] of builds.map(([n], i) => [n, JSON.parse(results[i])])) {
    console.log(`  ${name}: score ${r.score}, ${r.claims.length} claims, ${r.claims.filter((c) => c.grounded).length} grounded, flagged: ${r.flaggedSpans.length} spans`);
  }
  const [a, b] = results.map((x) => JSON.parse(x));
  for (let i = 0; i < Math.min(a.claims.length, b.claims.length); i++) {
    if (a.claims[i].grounded !== b.claims[i].grounded) console.log(`  claim ${i} grounded ${a.claims[i].grounded} → ${b.claims[i].grounded} (${a.claims[i].score} → ${b.claims[i].score}): ${a.claims[i].text}`);
  }
  if (!differ) process.exit(1);
}

const paths = { base: resolve(process.argv[2]), new: fileURLToPath(import.meta.resolve('@svc/grounding')) };
const perRound = { base: [], new: [] };
for (let round = 1; round <= Number(roundsArg); round++) {
  for (const name of round % 2 ? ['base', 'new'] : ['new', 'base']) {
    const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', paths[name], lang, roundsArg, checksArg, ...(warm ? ['--warm'] : [])], { encoding: 'utf8' });
    perRound[name].push(Number(out.trim()));
  }
  console.log(`round ${round}: base ${perRound.base.at(-1).toFixed(1)}, new ${perRound.new.at(-1).toFixed(1)} ms CPU per ${warm ? 'warm ' : ''}check (median of ${checksArg}, a process each; load ${loadavg()[0].toFixed(1)})`);
}
const ratios = perRound.new.map((x, i) => x / perRound.base[i]);
console.log(`${lang} median of round medians: base ${median(perRound.base).toFixed(1)} ms, new ${median(perRound.new).toFixed(1)} ms; median of round ratios new/base ${median(ratios).toFixed(3)}`);
