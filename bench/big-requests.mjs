#!/usr/bin/env node
// Large legitimate requests beside paced streams (issue 32): a RAG client sends 200–800 KB of retrieved documents
// (in a system message, or as tool results), 50–200 messages of history, answers of 4–16 KB, grounding on, half of
// them streamed, at --big-rate per second, while --streams other clients each keep one paced stream open (10
// tokens/s). What a large request costs the others: the background streams' inter-token gaps (p50/p99/max) and
// svc's event-loop delay (monitorEventLoopDelay, preloaded by lib/loop-delay.mjs), with and without the large
// requests. svc on core 1 (taskset), the clients and the fake upstream on core 0.
//
//   node bench/big-requests.mjs                       # 200 streams, 3 large requests/s, 15 s measured
//   node bench/big-requests.mjs --runs 3 [BIN_B]      # alternate this build (A) and BIN_B, 3 runs each
//   node bench/big-requests.mjs --profile /tmp/prof   # svc under --cpu-prof; then
//                                                     #   node bench/lib/profile-summary.mjs /tmp/prof/*.cpuprofile 30
//   options: --streams N  --big-rate R  --duration S  --no-quiet (skip the run without large requests)
//            --webhook (the key has a signed audit webhook to a local receiver: each request's prompt is audited)
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent } from 'undici';
import { requestBody } from './lib/fixtures.mjs';
import { startPacedUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { median, pinSelf, stopAll } from './lib/procs.mjs';
import { SVC_BIN, exitUnlessSvcBuilt, startSvc } from './lib/svc.mjs';

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    streams: { type: 'string', default: '200' },
    'big-rate': { type: 'string', default: '3' },
    duration: { type: 'string', default: '15' },
    runs: { type: 'string', default: '1' },
    profile: { type: 'string' },
    'no-quiet': { type: 'boolean', default: false },
    webhook: { type: 'boolean', default: false },
  },
});
const N = Number(opts.streams);
const BIG_RATE = Number(opts['big-rate']);
const DURATION_S = Number(opts.duration);
const TOKENS = 50;
const RATE = 10;
const log = (msg) => process.stderr.write(`${msg}\n`);
exitUnlessSvcBuilt();
pinSelf(0);

// Deterministic prose: documents of distinct sentences (a grounding check on repeated text would be cheap).
let seed = 12345;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const WORDS = 'tower bridge river station museum harbour council budget figure report annual revenue growth policy customer refund warehouse delivery member shipping library archive treaty province engine voltage sensor protocol'.split(' ');
const sentence = () => {
  const n = 8 + Math.floor(rand() * 14);
  const w = Array.from({ length: n }, () => (rand() < 0.15 ? String(Math.floor(rand() * 100000)) : WORDS[Math.floor(rand() * WORDS.length)]));
  return `${w[0][0].toUpperCase()}${w[0].slice(1)} ${w.slice(1).join(' ')}.`;
};
const document = (bytes) => {
  const out = [];
  let size = 0;
  while (size < bytes) {
    const s = sentence();
    out.push(s);
    size += s.length + 1;
  }
  return out;
};

/** K large requests (bodies stream and not) and the answers the upstream gives them. */
function bigRequests(k) {
  const answers = [];
  const requests = [];
  for (let i = 0; i < k; i++) {
    const docBytes = 200_000 + Math.floor(rand() * 600_000);
    const sentences = document(docBytes);
    const answer = [];
    for (let size = 0, target = 4000 + rand() * 12000; size < target; ) {
      const s = sentences[Math.floor(rand() * sentences.length)];
      answer.push(s);
      size += s.length + 1;
    }
    answers.push(answer.join(' '));
    const history = 50 + Math.floor(rand() * 150);
    const messages = [];
    const asTools = i % 2 === 1;
    if (!asTools) messages.push({ role: 'system', content: `Answer from these documents only.\n\n${sentences.join(' ')}` });
    else messages.push({ role: 'system', content: 'Answer from the retrieved documents only.' });
    for (let m = 0; m < history; m++) messages.push({ role: m % 2 ? 'assistant' : 'user', content: Array.from({ length: 3 }, sentence).join(' ') });
    if (asTools) {
      const parts = 4;
      const per = Math.ceil(sentences.length / parts);
      const calls = Array.from({ length: parts }, (_, p) => ({ id: `call_${i}_${p}`, type: 'function', function: { name: 'search', arguments: JSON.stringify({ query: `part ${p}` }) } }));
      messages.push({ role: 'user', content: 'Look it up.' });
      messages.push({ role: 'assistant', content: null, tool_calls: calls });
      for (let p = 0; p < parts; p++) messages.push({ role: 'tool', tool_call_id: calls[p].id, content: sentences.slice(p * per, (p + 1) * per).join(' ') });
    }
    messages.push({ role: 'user', content: `Summarise what the documents say. bench-big-${i}` });
    const stream = i % 4 < 2;
    requests.push({ body: JSON.stringify({ model: 'svc01', messages, max_tokens: 8192, ...(stream ? { stream: true } : {}) }), stream });
  }
  return { answers, requests };
}

const work = mkdtempSync(join(tmpdir(), 'svc-bench-big-'));
const { answers, requests } = bigRequests(8);
const answersFile = join(work, 'answers.json');
writeFileSync(answersFile, JSON.stringify(answers));
log(`large bodies: ${requests.map((r) => Math.round(r.body.length / 1024)).join(', ')} KB; answers ${answers.map((a) => Math.round(a.length / 1024)).join(', ')} KB`);

const agent = new Agent({ connections: null, keepAliveTimeout: 4_000, headersTimeout: 120_000, bodyTimeout: 120_000 });
const small = requestBody({ model: 'svc01', stream: true });

/** One paced stream; pushes its inter-token gaps (ms) to `gaps` while `control.measuring`. */
function oneStream(svc, gaps, control) {
  return new Promise((resolve) => {
    let last = 0;
    let frames = 0;
    agent.dispatch(
      { origin: svc.url, path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' }, body: small },
      {
        onRequestStart() {},
        onResponseStart() {},
        onResponseData(_c, chunk) {
          const now = performance.now();
          // One content frame per upstream token; several may arrive in one read (then the gap is 0, as seen).
          for (const _ of chunk.toString('latin1').matchAll(/"content":" ?w\d/g)) {
            if (frames > 0 && control.measuring) gaps.push(now - last);
            frames += 1;
            last = now;
          }
        },
        onResponseEnd: () => resolve(),
        onResponseError: () => resolve(),
      },
    );
  });
}

async function measure(bin, withBig) {
  const upstream = await startPacedUpstream(0, { rate: RATE, tokens: TOKENS, jitter: 0.2, bigAnswers: answersFile });
  const loopFile = join(work, `loop-${Date.now()}.json`);
  const nodeArgs = ['--import', new URL('./lib/loop-delay.mjs', import.meta.url).href];
  if (opts.profile) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${resolve(opts.profile)}`);
  const receiver = opts.webhook ? await startWebhookReceiver(0) : null;
  const svc = await startSvc({ core: 1, upstreamUrl: upstream.base, webhookUrl: receiver?.hook, bin, nodeArgs, logLevel: 'warn', env: { SVC_BENCH_LOOP_FILE: loopFile, SVC_MAX_IN_FLIGHT: '4096' } });
  try {
    const gaps = [];
    const control = { measuring: false, stopping: false };
    const bigTimes = [];
    const statuses = {};
    const clients = Array.from({ length: N }, async (_, i) => {
      await sleep((i / N) * 4900);
      while (!control.stopping) await oneStream(svc, gaps, control);
    });
    await sleep(7000);
    writeFileSync(`${loopFile}.reset`, '');
    await sleep(600);
    control.measuring = true;
    const started = performance.now();
    const pending = [];
    if (withBig) {
      for (let i = 0; performance.now() - started < DURATION_S * 1000; i++) {
        const r = requests[i % requests.length];
        const t0 = performance.now();
        pending.push(
          fetch(`${svc.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' }, body: r.body, dispatcher: agent })
            .then(async (res) => {
              await res.arrayBuffer();
              statuses[res.status] = (statuses[res.status] ?? 0) + 1;
              bigTimes.push(performance.now() - t0);
            })
            .catch((err) => {
              statuses[err.code ?? 'error'] = (statuses[err.code ?? 'error'] ?? 0) + 1;
            }),
        );
        await sleep(1000 / BIG_RATE);
      }
    } else await sleep(DURATION_S * 1000);
    control.measuring = false;
    const loop = JSON.parse(readFileSync(loopFile, 'utf8'));
    control.stopping = true;
    await Promise.all(pending);
    gaps.sort((a, b) => a - b);
    const at = (q) => Math.round(gaps[Math.min(gaps.length - 1, Math.floor(q * gaps.length))] * 10) / 10;
    return {
      gaps: gaps.length,
      gapP50: at(0.5),
      gapP99: at(0.99),
      gapMax: Math.round(gaps.at(-1)),
      loop,
      big: bigTimes.length,
      bigStatuses: statuses,
      bigP50Ms: bigTimes.length ? Math.round(median(bigTimes)) : null,
    };
  } finally {
    await stopAll();
  }
}

const builds = [{ name: 'A', bin: SVC_BIN }, ...(positionals[0] ? [{ name: 'B', bin: resolve(positionals[0]) }] : [])];
const results = [];
try {
  for (let run = 0; run < Number(opts.runs); run++) {
    for (const build of run % 2 === 0 ? builds : [...builds].reverse()) {
      for (const withBig of opts['no-quiet'] ? [true] : [false, true]) {
        const r = await measure(build.bin, withBig);
        results.push({ build: build.name, withBig, ...r });
        console.log(`run ${run + 1} ${build.name} ${withBig ? `large ${BIG_RATE}/s` : 'streams only'}: ${JSON.stringify(r)}`);
      }
    }
  }
} finally {
  await stopAll();
  await agent.close();
}
for (const build of builds) {
  const mine = results.filter((r) => r.build === build.name && r.withBig);
  if (mine.length > 1) console.log(`${build.name} median gap p99 ${median(mine.map((r) => r.gapP99))} ms, loop p99 ${median(mine.map((r) => r.loop.p99))} ms`);
}
