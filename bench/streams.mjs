#!/usr/bin/env node
// Many concurrent streams at a model's pace (issue 32): N clients each keep one streamed chat completion open
// (a new one as soon as the last ended) against a paced upstream, through each target in turn.
//
//   npm run bench:streams                                   # 1,000 streams, 10 tokens/s, 50 tokens, 25 s measured
//   npm run bench:streams -- --streams 300 --duration 10    # smaller
//   npm run bench:streams -- --upstream h2 --targets svc-full,svc-plain   # svc's upstream over TLS + HTTP/2
//   npm run bench:streams -- --rate 1 --tokens 50 --streams 10000 --targets svc-full,svc-plain --upstream h2
//        (over HTTP/1.1 svc holds two descriptors per stream: past ~9,000 streams it needs more than 20,000)
//   options: --rate R (tokens/s)  --tokens T (answer length)  --jitter J (each gap within ±J of 1/R, 0..1)
//            --targets direct,svc-full,svc-plain,node-relay,portkey   --skip-portkey   --settle S
//                     (also svc-webhook: the audit webhook without the grounding check; svc-grounding: the reverse;
//                     node-relay-features: the relay with the grounding check and a signed webhook, the floor of svc-full)
//            --svc-node-args="--cpu-prof --cpu-prof-dir=/tmp/prof"   node flags for the svc processes
//            --upstream http|h1|h2   how svc reaches the paced upstream: plain HTTP/1.1 (default), or HTTPS whose
//                     ALPN offers only http/1.1 (h1) or h2 too (h2), on a self-signed certificate svc trusts
//                     through NODE_EXTRA_CA_CERTS; svc runs with SVC_UPSTREAM_HTTP2=auto; direct,
//                     node-relay and portkey stay on plain HTTP
//            --out FILE   the results file, relative to bench/results (default streams-latest.json)
//
// Targets, one at a time on core 1 (taskset), the load generator (this process), the paced upstream and the
// webhook receiver on core 0: direct (a paced upstream of its own on core 1), svc-full (key with a signed
// webhook, dehallucinate on a system-message source), svc-plain (no webhook, dehallucinate off),
// node-relay (bench/lib/node-relay.mjs, frames parsed and re-serialised, no pool cap), portkey (installed
// on demand like `npm run bench`). svc runs with SVC_MAX_IN_FLIGHT = 2 × streams (never refusing here).
//
// Per target: --warm-up streams at once (20 by default), then RSS idle; then the N clients start spread over one
// stream's length; after that length plus --settle seconds, --duration seconds are measured:
//   completions/s and their ratio to the ideal N / ((T − 1) / R) and to direct;
//   time to first token (request sent → first content frame) and inter-token gaps seen by the clients,
//   p50/p99, and what the target adds to direct's;
//   CPU µs per relayed frame: the target's user+system CPU (/proc) over the upstream's frames written
//   (T content frames, finish, usage, [DONE] per stream), both in the window;
//   RSS per open stream: the median over 1 s samples of (RSS − RSS idle) / streams open at the upstream.
// Writes bench/results/streams-latest.json with the machine's facts (the commit among them).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { bodies } from './lib/fixtures.mjs';
import { cpuSecondsOf, hasTaskset, killAllSync, median, memoryOf, pinSelf, round, stop, stopAll } from './lib/procs.mjs';
import { benchCertificate, startNodeRelay, startPacedUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { installPortkey, startPortkey, PORTKEY_VERSION } from './lib/portkey.mjs';
import { REPO, exitUnlessSvcBuilt, startSvc } from './lib/svc.mjs';
import { machineInfo, table } from './lib/report.mjs';

const { values: opts } = parseArgs({
  options: {
    streams: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '10' },
    tokens: { type: 'string', default: '50' },
    jitter: { type: 'string', default: '0.2' },
    duration: { type: 'string', default: '25' },
    settle: { type: 'string', default: '3' },
    targets: { type: 'string', default: 'direct,svc-full,svc-plain,node-relay,portkey' },
    'skip-portkey': { type: 'boolean', default: false },
    'svc-node-args': { type: 'string', default: '' },
    upstream: { type: 'string', default: 'http' },
    out: { type: 'string', default: 'streams-latest.json' },
    // Streams run at once before RSS idle is read. 20 leave most of what a busy process grows by once (compiled
    // code, a young generation sized for the load, caches) to be counted per stream; --warm-up 1000 does not.
    'warm-up': { type: 'string', default: '20' },
  },
});
const N = Number(opts.streams);
const RATE = Number(opts.rate);
const TOKENS = Number(opts.tokens);
const JITTER = Number(opts.jitter);
const DURATION_S = Number(opts.duration);
const SETTLE_S = Number(opts.settle);
const UPSTREAM = opts.upstream;
const WARM_UP = Number(opts['warm-up']);
if (!Number.isInteger(WARM_UP) || WARM_UP < 0) throw new Error('--warm-up must be a whole number of streams');
if (!['http', 'h1', 'h2'].includes(UPSTREAM)) throw new Error('--upstream must be http, h1 or h2');
const TARGETS = opts.targets.split(',').filter((t) => !(t === 'portkey' && opts['skip-portkey']));
const STREAM_S = (TOKENS - 1) / RATE;
const IDEAL_PER_S = N / STREAM_S;
const LOAD_CORE = 0;
const TARGET_CORE = 1;
const CHAT = '/v1/chat/completions';
const JSON_HEADERS = { 'content-type': 'application/json' };
const log = (msg) => process.stderr.write(`${msg}\n`);

exitUnlessSvcBuilt();
const nofile = Number(/^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? Infinity);
// This process holds one socket per client; svc one per client plus one per upstream connection (over
// HTTP/2 a few sessions, otherwise one per stream).
const svcDescriptors = N + (UPSTREAM === 'h2' ? Math.ceil(N / 100) : N) + 200;
if (Math.max(N + 200, svcDescriptors) > nofile) {
  log(`${N} streams need about ${svcDescriptors} file descriptors in svc's process; each may open ${nofile}. Try --upstream h2, or run under: prlimit --nofile=65536:65536 npm run bench:streams -- …`);
  process.exit(2);
}
pinSelf(LOAD_CORE);

// One keep-alive agent for every client, without a cap on connections (each client holds its own).
const agent = new Agent({ connections: null, pipelining: 1, keepAliveTimeout: 4_000, connect: { timeout: 60_000 }, headersTimeout: 120_000, bodyTimeout: 120_000 });

/** What the clients saw; the `window` fields only while `measuring`. */
function newTally() {
  return { measuring: false, completions: 0, incomplete: 0, statuses: {}, errors: {}, ttftMs: [], gapMs: [] };
}

const NEEDLE_CONTENT = Buffer.from('"content":"');
const QUOTE = 0x22;
const LF = 0x0a;
const DONE = 'data: [DONE]';

/**
 * One stream: request, read every frame, record first-token time and gaps; resolves true when it came whole
 * (every content token and [DONE]). Through undici's dispatch API on raw Buffers: the clients share one core
 * with the upstream, and a Readable per response plus string decoding cost more than a target's own work.
 */
function oneStream(target, tally, active) {
  return new Promise((resolve, reject) => {
    const sentAt = performance.now();
    const inWindowAtStart = tally.measuring;
    let status = 0;
    let rest = null;
    let contentFrames = 0;
    let lastAt = 0;
    let done = false;
    let controller;
    const frame = (buf, start, end, now) => {
      if (end - start === DONE.length && buf[start + 6] === 0x5b /* [ */) {
        done = true;
        return;
      }
      const at = buf.indexOf(NEEDLE_CONTENT, start);
      if (at === -1 || at >= end || buf[at + NEEDLE_CONTENT.length] === QUOTE) return;
      if (contentFrames === 0) {
        if (inWindowAtStart && tally.measuring) tally.ttftMs.push(now - sentAt);
      } else if (tally.measuring) tally.gapMs.push(now - lastAt);
      contentFrames += 1;
      lastAt = now;
    };
    agent.dispatch(
      { origin: target.origin, path: target.path, method: 'POST', headers: target.headers, body: target.body },
      {
        onRequestStart(c) {
          controller = c;
          active?.add(c);
        },
        onResponseStart(_c, statusCode) {
          status = statusCode;
        },
        onResponseData(_c, chunk) {
          if (status !== 200) return;
          const now = performance.now();
          const buf = rest ? Buffer.concat([rest, chunk]) : chunk;
          let start = 0;
          for (let i = buf.indexOf(LF); i !== -1 && i + 1 < buf.length; i = buf.indexOf(LF, i + 1)) {
            if (buf[i + 1] !== LF) continue;
            frame(buf, start, i, now);
            start = i + 2;
            i += 1;
          }
          rest = start < buf.length ? buf.subarray(start) : null;
        },
        onResponseEnd() {
          active?.delete(controller);
          if (status !== 200) {
            tally.statuses[status] = (tally.statuses[status] ?? 0) + 1;
            resolve(false);
            return;
          }
          const whole = done && contentFrames === TOKENS;
          if (tally.measuring) {
            if (whole) tally.completions += 1;
            else tally.incomplete += 1;
          }
          resolve(whole);
        },
        onResponseError(_c, err) {
          active?.delete(controller);
          reject(err);
        },
      },
    );
  });
}

/** A client: waits `startAfterMs`, then keeps one stream open until `control.stopping`. */
async function client(target, tally, control, startAfterMs) {
  await sleep(startAfterMs);
  while (!control.stopping) {
    try {
      await oneStream(target, tally, control.active);
    } catch (err) {
      if (control.stopping) return;
      const code = err?.code ?? err?.name ?? 'error';
      tally.errors[code] = (tally.errors[code] ?? 0) + 1;
      await sleep(100);
    }
  }
}

/** The main thread's time on the CPU and waiting in the run queue (/proc/PID/schedstat), or null. */
function schedOf(pid) {
  try {
    const [runNs, waitNs] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(' ').map(Number);
    return { runNs, waitNs };
  } catch {
    return null;
  }
}

const pct = (xs, p) => {
  if (xs.length === 0) return null;
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function measureTarget(name, target, upstream) {
  log(`${name}: warm-up…`);
  const warm = newTally();
  await Promise.all(Array.from({ length: WARM_UP }, () => oneStream(target, warm).catch(() => false)));
  const idle = memoryOf(target.proc.pid);
  const tally = newTally();
  const control = { stopping: false, active: new Set() };
  log(`${name}: ${N} clients over ${STREAM_S.toFixed(1)} s, settle ${SETTLE_S} s, measure ${DURATION_S} s…`);
  const clients = Array.from({ length: N }, (_, i) => client(target, tally, control, (i / N) * STREAM_S * 1000));
  await sleep((STREAM_S + SETTLE_S) * 1000);

  const upBefore = await upstream.stats();
  const cpuBefore = cpuSecondsOf(target.proc.pid);
  const schedBefore = schedOf(target.proc.pid);
  const clientCpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  tally.measuring = true;
  const rss = [];
  const perStreamKb = [];
  const openUpstream = [];
  const sampler = setInterval(async () => {
    const m = memoryOf(target.proc.pid);
    if (!m) return;
    rss.push(m.rssMb);
    // Per stream the target has open upstream at that moment: a starved target holds fewer than N.
    const { open } = await upstream.stats();
    openUpstream.push(open);
    if (idle && open > 0) perStreamKb.push(((m.rssMb - idle.rssMb) * 1024) / open);
  }, 1000);
  await sleep(DURATION_S * 1000);
  tally.measuring = false;
  clearInterval(sampler);
  const seconds = (performance.now() - startedAt) / 1000;
  const cpuAfter = cpuSecondsOf(target.proc.pid);
  const schedAfter = schedOf(target.proc.pid);
  const clientCpu = process.cpuUsage(clientCpuBefore);
  const upAfter = await upstream.stats();
  const peak = memoryOf(target.proc.pid);
  control.stopping = true;
  for (const c of control.active) c.abort(new Error('bench stopped'));
  await Promise.all(clients);

  const frames = upAfter.frames - upBefore.frames;
  const rssMb = rss.length ? round(median(rss), 1) : null;
  return {
    target: name,
    completionsPerS: round(tally.completions / seconds, 1),
    ofIdeal: round(tally.completions / seconds / IDEAL_PER_S, 3),
    incomplete: tally.incomplete,
    statuses: tally.statuses,
    errors: tally.errors,
    ttftP50Ms: round(pct(tally.ttftMs, 50), 2),
    ttftP99Ms: round(pct(tally.ttftMs, 99), 2),
    gapP50Ms: round(pct(tally.gapMs, 50), 2),
    gapP99Ms: round(pct(tally.gapMs, 99), 2),
    framesRelayed: frames,
    cpuPct: round((100 * (cpuAfter - cpuBefore)) / seconds, 1),
    // The main thread's time runnable but waiting for the core (other work on the host), in % of the window.
    runQueueWaitPct: schedBefore && schedAfter ? round((100 * (schedAfter.waitNs - schedBefore.waitNs)) / 1e9 / seconds, 1) : null,
    cpuUsPerFrame: frames > 0 ? round(((cpuAfter - cpuBefore) * 1e6) / frames, 1) : null,
    rssIdleMb: idle?.rssMb ?? null,
    rssMb,
    peakRssMb: peak?.peakRssMb ?? null,
    rssKbPerStream: perStreamKb.length ? round(median(perStreamKb), 1) : null,
    upstreamOpenMedian: openUpstream.length ? median(openUpstream) : null,
    upstreamPeakOpen: upAfter.peakOpen,
    upstreamSessions: upAfter.sessions ?? null,
    clientCpuPct: round((clientCpu.user + clientCpu.system) / 1e4 / seconds, 1),
    seconds: round(seconds, 2),
  };
}

async function startTarget(name, { upstream, plainUpstream, certificate, receiver, portkeyEntry }) {
  const svcEnv = {
    SVC_MAX_IN_FLIGHT: String(Math.max(4096, 2 * N)),
    // auto against both TLS upstreams: the handshake alone decides between HTTP/1.1 and HTTP/2.
    ...(certificate ? { NODE_EXTRA_CA_CERTS: certificate.certFile, SVC_UPSTREAM_HTTP2: 'auto' } : {}),
  };
  switch (name) {
    case 'direct': {
      const own = await startPacedUpstream(TARGET_CORE, { rate: RATE, tokens: TOKENS, jitter: JITTER });
      return { proc: own.proc, origin: own.url, path: CHAT, headers: JSON_HEADERS, body: bodies.direct(true), upstream: own };
    }
    case 'svc-full':
    case 'svc-plain':
    case 'svc-webhook':
    case 'svc-grounding': {
      const webhook = name === 'svc-full' || name === 'svc-webhook';
      const grounding = name === 'svc-full' || name === 'svc-grounding';
      const nodeArgs = opts['svc-node-args'].split(' ').filter(Boolean);
      // On a host saturated by other work, svc pinned beside another build (ab-streams.sh) took longer than 20 s to answer /healthz.
      const svc = await startSvc({ core: TARGET_CORE, upstreamUrl: upstream.base, webhookUrl: webhook ? receiver.hook : undefined, env: svcEnv, nodeArgs, startTimeoutMs: 120_000 });
      return { proc: svc.proc, origin: svc.url, path: CHAT, headers: { ...JSON_HEADERS, authorization: `Bearer ${svc.key}` }, body: grounding ? bodies.svcFull(true) : bodies.svcPlain(true) };
    }
    case 'node-relay':
    case 'node-relay-features': {
      // node-relay-features: the relay with svc's grounding check and a signed audit POST done the cheapest way
      // (bench/feature-floor.mjs's `frames+features`): the floor under everything on, at a model's pace.
      const features = name === 'node-relay-features';
      const relay = await startNodeRelay({ core: TARGET_CORE, mode: features ? 'frames+features' : 'frames', upstreamPort: new URL(plainUpstream.url).port, webhookUrl: features ? receiver.hook : undefined });
      return { proc: relay.proc, origin: relay.url, path: CHAT, headers: JSON_HEADERS, body: bodies.direct(true) };
    }
    case 'portkey': {
      const pk = await startPortkey({ core: TARGET_CORE, entry: portkeyEntry, upstreamUrl: `${plainUpstream.url}/v1` });
      return { proc: pk.proc, origin: pk.url, path: CHAT, headers: { ...JSON_HEADERS, ...pk.headers }, body: bodies.direct(true) };
    }
    default:
      throw new Error(`unknown target ${name}`);
  }
}

async function main() {
  const results = {
    // Other work on the host takes the targets' core too: the load average says how much (niceness: `nice -n -10 npm run bench:streams`).
    machine: { ...machineInfo(REPO), taskset: hasTaskset, nofile, niceness: os.getPriority(), loadAverageAtStart: os.loadavg().map((x) => round(x, 2)) },
    settings: { upstream: UPSTREAM, streams: N, warmUp: WARM_UP, rate: RATE, tokens: TOKENS, jitter: JITTER, durationS: DURATION_S, settleS: SETTLE_S, idealCompletionsPerS: round(IDEAL_PER_S, 1) },
    targets: [],
    unavailable: [],
  };
  let portkeyEntry = null;
  if (TARGETS.includes('portkey')) {
    log(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into a temp dir…`);
    try {
      portkeyEntry = await installPortkey();
    } catch (err) {
      results.unavailable.push({ target: 'portkey', reason: String(err?.message ?? err).slice(0, 300) });
    }
  }
  const certificate = UPSTREAM === 'http' ? null : benchCertificate();
  const upstream = await startPacedUpstream(LOAD_CORE, { rate: RATE, tokens: TOKENS, jitter: JITTER, ...(certificate ? { tls: UPSTREAM, certificate } : {}) });
  const receiver = await startWebhookReceiver(LOAD_CORE);
  for (const name of TARGETS) {
    if (name === 'portkey' && !portkeyEntry) continue;
    let target;
    try {
      target = await startTarget(name, { upstream, plainUpstream: upstream, certificate, receiver, portkeyEntry });
      results.targets.push(await measureTarget(name, target, target.upstream ?? upstream));
    } catch (err) {
      log(`${name}: failed: ${err?.stack ?? err}`);
      results.unavailable.push({ target: name, reason: String(err?.message ?? err).slice(0, 300) });
    } finally {
      if (target) await stop(target.proc, 15_000); // svc finishes its deliveries (and writes a --cpu-prof) on SIGTERM
      if (target?.upstream) await stop(target.upstream.proc);
    }
  }
  results.machine.loadAverageAtEnd = os.loadavg().map((x) => round(x, 2));
  const direct = results.targets.find((t) => t.target === 'direct');
  const portkey = results.targets.find((t) => t.target === 'portkey');
  const relay = results.targets.find((t) => t.target === 'node-relay');
  for (const t of results.targets) {
    t.ofDirect = direct ? round(t.completionsPerS / direct.completionsPerS, 3) : null;
    t.addedTtftP50Ms = direct ? round(t.ttftP50Ms - direct.ttftP50Ms, 2) : null;
    t.addedTtftP99Ms = direct ? round(t.ttftP99Ms - direct.ttftP99Ms, 2) : null;
    t.addedGapP99Ms = direct ? round(t.gapP99Ms - direct.gapP99Ms, 2) : null;
    t.cpuOfPortkey = portkey && t.cpuUsPerFrame !== null ? round(t.cpuUsPerFrame / portkey.cpuUsPerFrame, 2) : null;
    t.cpuOfRelay = relay && t.cpuUsPerFrame !== null ? round(t.cpuUsPerFrame / relay.cpuUsPerFrame, 2) : null;
  }

  const outFile = resolve(join(REPO, 'bench/results'), opts.out); // a bare name lands in bench/results
  mkdirSync(dirname(outFile), { recursive: true });
  writeFileSync(outFile, JSON.stringify(results, null, 2));

  log(`\nload average ${results.machine.loadAverageAtStart.join(' ')} → ${results.machine.loadAverageAtEnd.join(' ')}, niceness ${results.machine.niceness}`);
  log(`\nsvc's upstream: ${UPSTREAM === 'http' ? 'plain HTTP/1.1' : `TLS, ALPN ${UPSTREAM === 'h2' ? 'h2 + http/1.1' : 'http/1.1 only'}`}`);
  log(`\n${N} streams × ${TOKENS} tokens at ${RATE} tokens/s (jitter ±${JITTER * 100} %), ${DURATION_S} s measured; ideal ${round(IDEAL_PER_S, 1)} completions/s`);
  process.stdout.write(
    `${table(
      ['target', 'compl/s', 'of ideal', 'of direct', 'TTFT p50 / p99 ms', '+TTFT p99', 'gap p99 ms', '+gap p99', 'CPU µs/frame', 'CPU %', 'waiting for CPU %', 'RSS idle→open MB', 'open upstream', 'KB/stream', 'incomplete/errors'],
      results.targets.map((t) => [
        t.target,
        t.completionsPerS,
        t.ofIdeal,
        t.ofDirect,
        `${t.ttftP50Ms?.toFixed(1)} / ${t.ttftP99Ms?.toFixed(1)}`,
        t.addedTtftP99Ms,
        t.gapP99Ms,
        t.addedGapP99Ms,
        t.cpuUsPerFrame,
        t.cpuPct,
        t.runQueueWaitPct,
        `${t.rssIdleMb} → ${t.rssMb}`,
        t.upstreamOpenMedian,
        t.rssKbPerStream,
        `${t.incomplete} / ${Object.values(t.statuses).reduce((a, b) => a + b, 0) + Object.values(t.errors).reduce((a, b) => a + b, 0)}`,
      ]),
    )}\n`,
  );
  for (const u of results.unavailable) log(`unavailable: ${u.target}: ${u.reason}`);
}

const watchdog = setTimeout(
  () => {
    log('watchdog: the bench ran too long; stopping everything');
    killAllSync();
    process.exit(3);
  },
  (TARGETS.length * (STREAM_S * 3 + SETTLE_S + DURATION_S + 60) + 600) * 1000,
);
watchdog.unref();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAllSync();
    process.exit(130);
  });
}
try {
  await main();
} finally {
  await stopAll();
  await agent.close().catch(() => {});
}
