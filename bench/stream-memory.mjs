#!/usr/bin/env node
// What one open stream keeps in svc (issue 32): N streams held open at once through svc with everything on, and
// the memory they add to a server that has served streams before (so that what the process grows by once, its
// heap and compiled code, is not counted per stream).
//
//   node bench/stream-memory.mjs                         # 1,000 streams
//   node bench/stream-memory.mjs --streams 2000 --snapshot   # + the JS heap each stream keeps, by kind
//   node bench/stream-memory.mjs --streams 10000 --upstream h2   # svc's upstream over TLS + HTTP/2
//   options: --streams N  --runs R  --snapshot  --upstream http|h2  --out FILE (a bare name lands in
//   bench/results; the runs with the machine)  (SVC_BENCH_BIN: another build's bin.js)
//
// svc on core 1, the paced upstream (1 token/s, 120 tokens: every stream stays open while measured) and the
// webhook receiver on core 0. Warm-up: five rounds of 200 streams, each held 4 s then aborted. Then idle is
// read, N streams are opened; once all are open at the upstream (or their count has not grown for 5 s, at most
// 60 s) and 5 s more, five samples 1 s apart give the medians of the streams open there, RSS (/proc) and the
// heap used, heap total and external memory (svc's /metrics, prom-client's nodejs_* gauges), each as
// (open − idle) / streams open at the upstream. Heap used moves with garbage not yet collected; --snapshot
// writes a heap snapshot at idle and with the streams open (each forces a full collection) and prints the
// live JS heap per stream, in total and by kind (strings, arrays, closures, objects by constructor), instead of
// the RSS and heap figures (a snapshot leaves the process larger).
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { bodies } from './lib/fixtures.mjs';
import { benchCertificate, startPacedUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { killAllSync, median, memoryOf, pinSelf, round, stop, stopAll } from './lib/procs.mjs';
import { REPO, exitUnlessSvcBuilt, startSvc } from './lib/svc.mjs';
import { machineInfo } from './lib/report.mjs';

const { values: opts } = parseArgs({
  options: {
    streams: { type: 'string', default: '1000' },
    runs: { type: 'string', default: '1' },
    snapshot: { type: 'boolean', default: false },
    upstream: { type: 'string', default: 'http' },
    out: { type: 'string' },
  },
});
const N = Number(opts.streams);
if (!['http', 'h2'].includes(opts.upstream)) throw new Error('--upstream must be http or h2');
const log = (msg) => process.stderr.write(`${msg}\n`);
exitUnlessSvcBuilt();
pinSelf(0);
const agent = new Agent({ connections: null, pipelining: 1, headersTimeout: 600_000, bodyTimeout: 600_000 });

/** Live JS heap of a snapshot: total self size, and by kind. */
function heapOf(file) {
  const s = JSON.parse(readFileSync(file, 'utf8'));
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const [ti, ni, si] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const byKind = new Map();
  let total = 0;
  for (let i = 0; i < s.nodes.length; i += fields.length) {
    const type = types[s.nodes[i + ti]];
    const kind = type === 'object' || type === 'closure' ? `${type} ${s.strings[s.nodes[i + ni]]}` : type;
    const size = s.nodes[i + si];
    byKind.set(kind, (byKind.get(kind) ?? 0) + size);
    total += size;
  }
  return { total, byKind };
}

async function snapshot(svc) {
  const before = new Set(readdirSync(svc.dataDir));
  process.kill(svc.proc.pid, 'SIGUSR2');
  for (;;) {
    await sleep(1000);
    const file = readdirSync(svc.dataDir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    // Written once it has a size that stops changing.
    if (file) {
      const path = join(svc.dataDir, file);
      let size = 0;
      while (size === 0 || size !== statSync(path).size) {
        size = statSync(path).size;
        await sleep(2000);
      }
      return path;
    }
  }
}

async function run() {
  // Over h2, as in `bench:streams --upstream h2`: a self-signed certificate svc trusts, and SVC_UPSTREAM_HTTP2=auto.
  const certificate = opts.upstream === 'h2' ? benchCertificate() : null;
  const upstream = await startPacedUpstream(0, { rate: 1, tokens: 120, jitter: 0, ...(certificate ? { tls: 'h2', certificate } : {}) });
  const receiver = await startWebhookReceiver(0);
  const nodeArgs = opts.snapshot ? ['--heapsnapshot-signal=SIGUSR2'] : [];
  const env = { SVC_MAX_IN_FLIGHT: String(Math.max(4096, 2 * N)), ...(certificate ? { NODE_EXTRA_CA_CERTS: certificate.certFile, SVC_UPSTREAM_HTTP2: 'auto' } : {}) };
  const svc = await startSvc({ core: 1, upstreamUrl: upstream.base, webhookUrl: receiver.hook, env, nodeArgs });
  const memory = async () => {
    const text = await (await fetch(`${svc.url}/metrics`)).text();
    const mb = (name) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20;
    return { rss: memoryOf(svc.proc.pid).rssMb, heapUsed: mb('nodejs_heap_size_used_bytes'), heapTotal: mb('nodejs_heap_size_total_bytes'), external: mb('nodejs_external_memory_bytes') };
  };
  const open = (controllers) =>
    new Promise((resolve) => {
      agent.dispatch(
        { origin: svc.url, path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${svc.key}` }, body: bodies.svcFull(true) },
        { onRequestStart: (c) => controllers.push(c), onResponseStart() {}, onResponseData() {}, onResponseEnd: resolve, onResponseError: resolve },
      );
    });
  const hold = async (n, ms) => {
    const controllers = [];
    const streams = Array.from({ length: n }, () => open(controllers));
    await sleep(ms);
    return async () => {
      for (const c of controllers) c.abort(new Error('bench: done'));
      await Promise.all(streams);
    };
  };
  log('warm-up: 5 × 200 streams…');
  for (let i = 0; i < 5; i++) await (await hold(200, 4000))();
  await sleep(3000);
  const idleSnapshot = opts.snapshot ? await snapshot(svc) : null;
  const idle = await memory();
  log(`${N} streams open…`);
  const close = await hold(N, 5_000);
  // All N open at the upstream (a busy host takes a while to accept them), then a few seconds of relaying.
  // Until all are open, or the count has not grown for 5 s (a few may never open): at most 60 s, well inside a
  // stream's 120 s, so that none has ended yet when the samples are taken.
  for (let waited = 0, last = -1, still = 0; waited < 60; waited++) {
    const { open: now } = await upstream.stats();
    if (now >= N) break;
    still = now > last ? 0 : still + 1;
    if (still >= 5) break;
    last = now;
    await sleep(1000);
  }
  await sleep(5_000);
  const samples = [];
  const opens = [];
  for (let i = 0; i < 5; i++) {
    samples.push(await memory());
    opens.push((await upstream.stats()).open);
    await sleep(1000);
  }
  let openStreams = median(opens);
  const openSnapshot = opts.snapshot ? await snapshot(svc) : null;
  // Streams still opening during the snapshot: the mean of the counts before and after it.
  if (openSnapshot) openStreams = (openStreams + (await upstream.stats()).open) / 2;
  await close();
  await stop(svc.proc, 10_000);
  const per = (key) => round(((median(samples.map((s) => s[key])) - idle[key]) * 1024) / openStreams, 1);
  const result = { streams: N, upstream: opts.upstream, openAtUpstream: openStreams, idleRssMb: idle.rss };
  // A snapshot leaves the process bigger: with --snapshot, RSS and heap totals would count that too.
  if (!opts.snapshot) Object.assign(result, { rssKb: per('rss'), heapUsedKb: per('heapUsed'), heapTotalKb: per('heapTotal'), externalKb: per('external') });
  if (idleSnapshot && openSnapshot) {
    const [a, b] = [heapOf(idleSnapshot), heapOf(openSnapshot)];
    result.liveHeapKb = round((b.total - a.total) / 1024 / openStreams, 2);
    result.liveHeapByKindBytes = Object.fromEntries(
      [...b.byKind]
        .map(([kind, size]) => [kind, Math.round((size - (a.byKind.get(kind) ?? 0)) / openStreams)])
        .sort((x, y) => y[1] - x[1])
        .slice(0, 20),
    );
  }
  await stopAll();
  return result;
}

const watchdog = setTimeout(() => {
  log('watchdog: the bench ran too long; stopping everything');
  killAllSync();
  process.exit(3);
}, 600_000 * Number(opts.runs));
watchdog.unref();
try {
  const runs = [];
  for (let i = 0; i < Number(opts.runs); i++) {
    runs.push(await run());
    process.stdout.write(`${JSON.stringify(runs.at(-1), null, 2)}\n`);
  }
  if (opts.out) {
    const outFile = resolve(join(REPO, 'bench/results'), opts.out);
    mkdirSync(dirname(outFile), { recursive: true });
    writeFileSync(outFile, JSON.stringify({ machine: machineInfo(REPO), runs }, null, 2));
  }
} finally {
  await stopAll();
  await agent.close().catch(() => {});
}
