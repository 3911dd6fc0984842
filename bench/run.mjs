#!/usr/bin/env node
// Load benchmark of svc against a zero-latency fake upstream and Portkey's gateway (issue 10).
//
//   npm run bench                        # full run, 15 s per target and mode, writes bench/results/latest.json
//   npm run bench -- --duration 60       # the issue's 60 s runs (4 slices of 15 s per target and mode)
//   npm run bench -- --quick             # ~5 s smoke run, writes bench/results/quick.json
//   npm run bench -- --profile           # svc everything-on, non-streamed, under node --cpu-prof; prints top self time
//                    [--profile-streamed] [--profile-plain]   # … streamed / as a plain proxy
//   npm run bench -- --latency-only      # only the fixed-rate latency measurement (→ bench/results/quick.json)
//   npm run bench -- --micro             # also run verify.bench.mjs / webhooks.bench.mjs when present
//
// Cores: the load generator (this process), the fake upstream and the webhook receiver run on core 0; the
// targets run on core 1 (for the direct baseline the target is a fake upstream of its own there).
//
// Interleaved: for each mode (json, streamed) the targets (direct, svc everything on, svc plain proxy, node-relay,
// Portkey) are started together on core 1 and each is warmed up; then every round measures each target for
// duration / rounds seconds, one at a time (only the one under load uses the core), in an order rotated from
// round to round, each slice after 3 s of unmeasured load (without it the first round ran 20–45 % below the
// later ones for every target). A target's figures pool its slices (requests over the time measured,
// percentiles of all latencies, peak RSS at the end), and each ratio is also given per round. On a host whose speed drifts (seen:
// the fake upstream alone 43,011 req/s json in one run and 32,673 in the next) measurements minutes apart
// carry the drift into a ratio; slices seconds apart do not. --rounds 1 measures each target once, whole.
//   npm run bench -- --rounds N          # slices per target and mode (default 4; 1 with --quick)
//   npm run bench -- --skip-relay        # without the node-relay target
//
// A fifth target, node-relay (bench/lib/node-relay.mjs), is the floor under any Node gateway: a bare
// node:http → undici relay with nothing else, which parses and re-serialises what it relays (the JSON answer;
// each SSE frame). It has no target of its own; its ratio to Portkey shows how far a Node gateway can lead
// on this core before doing any work of its own (it is not svc's plain proxy, which also authenticates,
// validates, rate-limits, logs and counts).
import { existsSync, mkdirSync, writeFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { bodies } from './lib/fixtures.mjs';
import { latencySummary, load, probe } from './lib/load.mjs';
import {
  coreBusy,
  coreTimes,
  cpuSecondsOf,
  hasTaskset,
  killAllSync,
  median,
  memoryOf,
  pinSelf,
  round,
  stop,
  stopAll,
} from './lib/procs.mjs';
import { startFakeUpstream, startNodeRelay, startWebhookReceiver } from './lib/helpers.mjs';
import { installPortkey, startPortkey, PORTKEY_VERSION } from './lib/portkey.mjs';
import { REPO, startSvc, exitUnlessSvcBuilt, webhookBacklog, BENCH_RPM } from './lib/svc.mjs';
import { cpuJiffies, machineInfo, stealPct, table } from './lib/report.mjs';
import { summarizeProfile } from './lib/profile-summary.mjs';

const { values: opts } = parseArgs({
  options: {
    duration: { type: 'string' },
    quick: { type: 'boolean', default: false },
    connections: { type: 'string', default: '50' },
    rate: { type: 'string', default: '200' },
    warmup: { type: 'string' },
    'skip-portkey': { type: 'boolean', default: false },
    'skip-relay': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'profile-streamed': { type: 'boolean', default: false },
    'profile-plain': { type: 'boolean', default: false },
    micro: { type: 'boolean', default: false },
    out: { type: 'string' },
    'svc-node-args': { type: 'string' },
    'latency-only': { type: 'boolean', default: false },
    rounds: { type: 'string' },
  },
});

const durationS = Number(opts.duration ?? (opts.quick ? 5 : 15));
const warmupS = Number(opts.warmup ?? (opts.quick ? 1 : 10));
const rounds = Number(opts.rounds ?? (opts.quick ? 1 : 4));
const connections = Number(opts.connections);
/** Extra node flags for the svc processes (e.g. `--svc-node-args=--max-semi-space-size=8`), for experiments. */
const svcNodeArgs = opts['svc-node-args'] ? opts['svc-node-args'].split(/\s+/).filter(Boolean) : [];
const fixedRate = Number(opts.rate);
const LOADGEN_CORE = 0;
const TARGET_CORE = 1;
const HERE = new URL('.', import.meta.url).pathname;
const RESULTS = join(HERE, 'results');
const FULL_KEY = 'svc-full';
const log = (line) => process.stderr.write(`${line}\n`);

if (!Number.isFinite(durationS) || durationS < 1 || !Number.isFinite(connections) || connections < 1 || !(Number.isInteger(rounds) && rounds >= 1 && durationS / rounds >= 1)) {
  log('usage: node run.mjs [--duration S] [--rounds N] [--quick] [--connections N] [--rate RPS] [--skip-portkey] [--profile] [--micro]');
  process.exit(2);
}
exitUnlessSvcBuilt();

// Everything this process started dies with it, whatever happens.
process.on('exit', killAllSync);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    log(`${sig}: stopping children`);
    killAllSync();
    process.exit(130);
  });
}

const perCaseBudgetS = warmupS + durationS + 60 + 8 * rounds;
const watchdog = setTimeout(
  () => {
    log('bench watchdog: took too long, stopping everything');
    killAllSync();
    process.exit(3);
  },
  (opts.profile ? 3 : 12) * perCaseBudgetS * 1000 + 300_000,
);
watchdog.unref();

pinSelf(LOADGEN_CORE);

/** Checks one response has the shape a client expects before load is put on a target. */
function checkProbe(name, stream, { status, text }) {
  if (status !== 200) throw new Error(`${name}: probe answered ${status}: ${text.slice(0, 300)}`);
  if (stream) {
    if (!text.includes('data: [DONE]')) throw new Error(`${name}: streamed probe has no [DONE]: ${text.slice(-300)}`);
    return { frames: text.split('\n\n').filter(Boolean).length };
  }
  const body = JSON.parse(text);
  if (!body.choices?.[0]?.message?.content) throw new Error(`${name}: probe has no answer: ${text.slice(0, 300)}`);
  return { svc: body.svc ?? null };
}

/**
 * Runs one measurement of one target alone (the fixed-rate latency, the profile): probe, warm-up, then
 * `durationS` of load (or fixed `rate`) while the target's CPU time and the cores' busy time are read.
 */
async function measure({ name, url, headers, body, stream, pid, rate }) {
  const probed = checkProbe(name, stream, await probe({ url, headers, body }));
  if (warmupS > 0) await load({ url, headers, body, connections: rate ? 1 : connections, durationS: warmupS, overallRate: rate });
  const cpu0 = cpuSecondsOf(pid);
  const cores0 = coreTimes();
  const jiffies0 = cpuJiffies();
  const started = Date.now();
  const result = await load({ url, headers, body, connections: rate ? 1 : connections, durationS, overallRate: rate });
  const elapsedS = (Date.now() - started) / 1000;
  const cpu1 = cpuSecondsOf(pid);
  return {
    ...result,
    targetCpuPct: cpu0 !== null && cpu1 !== null ? round((100 * (cpu1 - cpu0)) / elapsedS, 0) : null,
    coreBusyPct: coreBusy(cores0, coreTimes()),
    cpuStealPct: stealPct(jiffies0, cpuJiffies()),
    memory: memoryOf(pid),
    probe: probed,
    loadavg: os.loadavg().map((l) => round(l, 2)),
  };
}

const chatPath = '/v1/chat/completions';

async function runAll() {
  const machine = { ...machineInfo(REPO), tasksetAvailable: hasTaskset, loadavgStart: os.loadavg().map((l) => round(l, 2)) };
  const jiffiesStart = cpuJiffies();
  if (!hasTaskset) log('NOTE: taskset not found — processes are NOT pinned to cores; numbers are less comparable.');
  const settings = { durationS, rounds, sliceS: durationS / rounds, svcNodeArgs, warmupS, connections, fixedRateRps: fixedRate, loadGenerator: 'autocannon 8 (programmatic, latencies at full precision)', pinning: hasTaskset ? `load generator, fake upstream, webhook receiver: core ${LOADGEN_CORE}; targets: core ${TARGET_CORE}, one under load at a time` : 'none (taskset missing)' };
  log(`bench: ${durationS}s per target and mode in ${rounds} interleaved slice(s) of ${durationS / rounds}s (+${warmupS}s warm-up), ${connections} connections, ${machine.cpuModel} × ${machine.cores}, node ${machine.node}, load ${machine.loadavgStart.join(' ')}`);

  const results = { machine, settings, cases: [], fixedRate: null, ratios: [], unavailable: [] };
  const record = (c) => {
    results.cases.push(c);
    log(`  ${c.target.padEnd(10)} ${c.mode.padEnd(10)} ${c.error ? `FAILED: ${c.error}` : `${c.rps} req/s  p50 ${c.p50} ms  p99 ${c.p99} ms  cpu ${c.targetCpuPct}%  peak RSS ${c.memory?.peakRssMb} MB`}`);
  };

  // Portkey installs while nothing is being measured.
  let portkeyEntry = null;
  if (!opts['skip-portkey']) {
    log(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into a temp dir…`);
    try {
      portkeyEntry = await installPortkey();
    } catch (err) {
      const reason = `npm install failed: ${String(err.stderr || err.message).split('\n').filter(Boolean).slice(-3).join(' ')}`;
      log(`  Portkey unavailable: ${reason}`);
      results.unavailable.push({ target: 'portkey', reason });
    }
  } else {
    results.unavailable.push({ target: 'portkey', reason: 'skipped (--skip-portkey)' });
  }

  const onlyLatency = opts['latency-only'];
  // Gateways share one fake upstream and one webhook receiver on the load generator's core.
  const upstream = await startFakeUpstream(LOADGEN_CORE);
  const receiver = await startWebhookReceiver(LOADGEN_CORE);
  try {
    for (const stream of onlyLatency ? [] : [false, true]) {
      const mode = stream ? 'streamed' : 'json';
      const targets = await startTargets(stream, upstream, receiver, portkeyEntry, (c) => record({ ...c, mode }));
      try {
        for (const c of await measureInterleaved(targets, stream, receiver)) record({ ...c, mode });
      } finally {
        for (const t of targets) await stop(t.proc, 10_000);
      }
    }

    // Latency at a fixed rate: svc everything on (the target's measure) and svc as a plain proxy vs direct to
    // the same upstream, one connection.
    log(`latency at ${fixedRate} req/s (one connection)…`);
    const fixed = { rateRps: fixedRate, connections: 1, note: 'same upstream (core 0) for all; svc on core 1' };
    try {
      const d = await measure({ name: 'direct@rate', url: `${upstream.url}${chatPath}`, body: bodies.direct(false), stream: false, pid: upstream.proc.pid, rate: fixedRate });
      fixed.direct = pick(d);
      for (const variant of [
        { field: 'svcFull', name: 'svc-full@rate', webhook: true, body: bodies.svcFull },
        { field: 'svcPlain', name: 'svc-plain@rate', webhook: false, body: bodies.svcPlain },
      ]) {
        const svc = await startSvc({ core: TARGET_CORE, upstreamUrl: upstream.base, webhookUrl: variant.webhook ? receiver.hook : undefined, nodeArgs: svcNodeArgs });
        try {
          const s = await measure({ name: variant.name, url: `${svc.url}${chatPath}`, headers: { authorization: `Bearer ${svc.key}` }, body: variant.body(false), stream: false, pid: svc.proc.pid, rate: fixedRate });
          fixed[variant.field] = pick(s);
        } finally {
          await stop(svc.proc, 10_000);
        }
      }
      fixed.addedP50Ms = round(fixed.svcFull.p50 - fixed.direct.p50, 3);
      fixed.addedP99Ms = round(fixed.svcFull.p99 - fixed.direct.p99, 3);
      fixed.plainAddedP50Ms = round(fixed.svcPlain.p50 - fixed.direct.p50, 3);
      fixed.plainAddedP99Ms = round(fixed.svcPlain.p99 - fixed.direct.p99, 3);
      log(`  added latency at ${fixedRate} req/s: everything on p50 ${fixed.addedP50Ms} ms, p99 ${fixed.addedP99Ms} ms; plain proxy p50 ${fixed.plainAddedP50Ms} ms, p99 ${fixed.plainAddedP99Ms} ms`);
    } catch (err) {
      fixed.error = err.message;
      log(`  FAILED: ${err.message}`);
    }
    results.fixedRate = fixed;
  } finally {
    await stop(upstream.proc);
    await stop(receiver.proc);
  }

  // Added latency vs direct of the same mode (at max rate, so mostly queueing in the slower target).
  for (const c of results.cases) {
    const d = results.cases.find((x) => x.target === 'direct' && x.mode === c.mode && !x.error);
    if (c.error || !d || c.target === 'direct') continue;
    c.addedP50Ms = round(c.p50 - d.p50, 3);
    c.addedP99Ms = round(c.p99 - d.p99, 3);
  }
  results.ratios = ratios(results);
  machine.loadavgEnd = os.loadavg().map((l) => round(l, 2));
  machine.cpuStealPct = stealPct(jiffiesStart, cpuJiffies());
  const maxLoad = Math.max(...machine.loadavgStart, ...machine.loadavgEnd, ...results.cases.map((c) => c.loadavg?.[0] ?? 0));
  machine.sharedMachine =
    maxLoad > 1
      ? `yes: load average reached ${maxLoad.toFixed(2)} on ${machine.cores} cores — other work ran beside the bench, expect noise`
      : 'no heavy load seen';
  return results;
}

/**
 * Starts one mode's targets on the target core, all at once: a fake upstream of its own (direct), svc
 * everything on (webhook to `receiver`), svc as a plain proxy, Portkey (when installed). A target that fails
 * to start is reported through `fail` and left out.
 */
async function startTargets(stream, upstream, receiver, portkeyEntry, fail) {
  const targets = [];
  const svcTarget = (name, webhook, body) => async () => {
    const svc = await startSvc({ core: TARGET_CORE, upstreamUrl: upstream.base, webhookUrl: webhook ? receiver.hook : undefined, nodeArgs: svcNodeArgs });
    return { proc: svc.proc, url: `${svc.url}${chatPath}`, headers: { authorization: `Bearer ${svc.key}` }, body: body(stream), svc: webhook ? svc : undefined };
  };
  const starters = [
    [
      'direct',
      async () => {
        const up = await startFakeUpstream(TARGET_CORE);
        return { proc: up.proc, url: `${up.url}${chatPath}`, headers: {}, body: bodies.direct(stream) };
      },
    ],
    [FULL_KEY, svcTarget(FULL_KEY, true, bodies.svcFull)],
    ['svc-plain', svcTarget('svc-plain', false, bodies.svcPlain)],
  ];
  if (!opts['skip-relay']) {
    starters.push([
      'node-relay',
      async () => {
        const relay = await startNodeRelay({ core: TARGET_CORE, mode: 'frames', upstreamPort: new URL(upstream.url).port });
        return { proc: relay.proc, url: `${relay.url}${chatPath}`, headers: {}, body: bodies.direct(stream) };
      },
    ]);
  }
  if (portkeyEntry) {
    starters.push([
      'portkey',
      async () => {
        const pk = await startPortkey({ core: TARGET_CORE, entry: portkeyEntry, upstreamUrl: upstream.base });
        return { proc: pk.proc, url: `${pk.url}${chatPath}`, headers: pk.headers, body: bodies.direct(stream) };
      },
    ]);
  }
  for (const [name, start] of starters) {
    try {
      targets.push({ name, ...(await start()) });
    } catch (err) {
      fail({ target: name, error: err.message });
    }
  }
  return targets;
}

/**
 * Probes and warms up every target, then measures them in `rounds` rotated slices (see the top of this
 * file) and returns one case per target: its slices pooled, with the req/s of each round (`roundRps`).
 */
async function measureInterleaved(targets, stream, receiver) {
  const sliceS = durationS / rounds;
  const sliceWarmupS = Math.min(3, warmupS);
  const live = [];
  const cases = [];
  for (const t of targets) {
    try {
      t.probed = checkProbe(t.name, stream, await probe(t));
      if (warmupS > 0) await load({ url: t.url, headers: t.headers, body: t.body, connections, durationS: warmupS });
      t.acc = { latencies: [], requests: 0, elapsedS: 0, cpuS: 0, non2xx: 0, errors: 0, timeouts: 0, mb: 0, coreBusy: [], steal: [], samples: [], roundRps: [] };
      if (t.svc) t.receivedBefore = await receiver.received();
      live.push(t);
    } catch (err) {
      cases.push({ target: t.name, error: err.message });
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < live.length; i++) {
      const t = live[(i + r) % live.length];
      const { acc } = t;
      // A few seconds of load first: a target idle while the others were measured, and one just warmed up
      // in the first round, measured 20–45 % below its later slices (the fake upstream too).
      if (sliceWarmupS > 0) await load({ url: t.url, headers: t.headers, body: t.body, connections, durationS: sliceWarmupS });
      const cpu0 = cpuSecondsOf(t.proc.pid);
      const cores0 = coreTimes();
      const jiffies0 = cpuJiffies();
      const sampler = t.svc
        ? setInterval(() => {
            try {
              acc.samples.push({ t: Date.now(), ...webhookBacklog(t.svc.dbPath) });
            } catch {
              // a sample may fail while the database is busy; the next one will do
            }
          }, 1000)
        : null;
      const started = Date.now();
      const m = await load({ url: t.url, headers: t.headers, body: t.body, connections, durationS: sliceS, keepLatencies: true });
      const elapsedS = (Date.now() - started) / 1000;
      if (sampler) clearInterval(sampler);
      acc.cpuS += cpuSecondsOf(t.proc.pid) - cpu0;
      acc.coreBusy.push(coreBusy(cores0, coreTimes()));
      acc.steal.push(stealPct(jiffies0, cpuJiffies()));
      for (const l of m.latencies) acc.latencies.push(l);
      acc.requests += m.requests;
      acc.elapsedS += elapsedS;
      acc.non2xx += m.non2xx;
      acc.errors += m.errors;
      acc.timeouts += m.timeouts;
      acc.mb += m.throughputMBps * elapsedS;
      acc.roundRps.push(round(m.requests / elapsedS, 0));
      if (t.svc && r === rounds - 1) t.backlogAtEnd = webhookBacklog(t.svc.dbPath);
      log(`    round ${r + 1}/${rounds} ${t.name}: ${round(m.requests / elapsedS, 0)} req/s`);
    }
  }
  for (const t of live) {
    const { acc } = t;
    const mean = (xs) => (xs.length ? round(xs.reduce((a, b) => a + b, 0) / xs.length, 0) : null);
    const c = {
      target: t.name,
      requests: acc.requests,
      rps: round(acc.requests / acc.elapsedS, 0),
      ...latencySummary(acc.latencies.sort((a, b) => a - b)),
      non2xx: acc.non2xx,
      errors: acc.errors,
      timeouts: acc.timeouts,
      throughputMBps: round(acc.mb / acc.elapsedS, 2),
      targetCpuPct: round((100 * acc.cpuS) / acc.elapsedS, 0),
      coreBusyPct: acc.coreBusy[0]?.map((_, core) => mean(acc.coreBusy.map((b) => b[core]).filter((v) => v !== null))) ?? [],
      cpuStealPct: mean(acc.steal.filter((v) => v !== null)),
      memory: memoryOf(t.proc.pid),
      probe: t.probed,
      loadavg: os.loadavg().map((l) => round(l, 2)),
      roundRps: acc.roundRps,
    };
    if (t.svc) c.webhooks = await webhookStats(t.svc, receiver, t.receivedBefore, acc.samples, t.backlogAtEnd);
    cases.push(c);
  }
  return cases;
}

function pick(m) {
  return { rps: m.rps, p50: m.p50, p90: m.p90, p99: m.p99, max: m.max, non2xx: m.non2xx, errors: m.errors };
}

/**
 * Backlog at the end of the target's last slice (`atEnd`), deliveries received, and how long the worker took
 * to drain what was left. `samples`: the backlog read every second of the target's slices.
 */
async function webhookStats(svc, receiver, receivedBefore, samples, atEnd) {
  const started = Date.now();
  let now = atEnd;
  while (now.pending > 0 && Date.now() - started < 30_000) {
    await new Promise((r) => setTimeout(r, 250));
    now = webhookBacklog(svc.dbPath);
  }
  const pendingSeries = samples.map((s) => s.pending);
  const half = pendingSeries.slice(0, Math.ceil(pendingSeries.length / 2));
  return {
    backlogAtEnd: atEnd.pending,
    backlogSamplesPerSecond: pendingSeries,
    backlogMaxFirstHalf: half.length ? Math.max(...half) : null,
    deliveredAtEnd: atEnd.delivered,
    failedAtEnd: atEnd.failed,
    drainMs: now.pending === 0 ? Date.now() - started : null,
    pendingAfterDrainWait: now.pending,
    receivedByReceiver: (await receiver.received()) - receivedBefore,
  };
}

function ratios(results) {
  const get = (target, mode) => results.cases.find((c) => c.target === target && c.mode === mode && !c.error);
  const ratio = (a, b) => (a && b ? round(a.rps / b.rps, 2) : null);
  /** The ratio of each round's slices: median and range (only with more than one round). */
  const perRound = (a, b) => {
    if (!a?.roundRps || !b?.roundRps || a.roundRps.length < 2 || a.roundRps.length !== b.roundRps.length) return undefined;
    const each = a.roundRps.map((x, i) => x / b.roundRps[i]);
    return { median: round(median(each), 2), min: round(Math.min(...each), 2), max: round(Math.max(...each), 2), each: each.map((x) => round(x, 2)) };
  };
  const pk = (mode) => get('portkey', mode);
  const full = (mode) => get(FULL_KEY, mode);
  const out = [
    { measure: 'svc everything-on vs Portkey, non-streamed req/s', target: '≥ 3×', value: ratio(full('json'), pk('json')), rounds: perRound(full('json'), pk('json')), min: 3 },
    { measure: 'svc everything-on vs Portkey, streamed req/s', target: '≥ 5×', value: ratio(full('streamed'), pk('streamed')), rounds: perRound(full('streamed'), pk('streamed')), min: 5 },
    { measure: 'svc plain proxy vs Portkey, non-streamed req/s', target: '≥ 5×', value: ratio(get('svc-plain', 'json'), pk('json')), rounds: perRound(get('svc-plain', 'json'), pk('json')), min: 5 },
    { measure: 'svc plain proxy vs Portkey, streamed req/s', target: '(no target)', value: ratio(get('svc-plain', 'streamed'), pk('streamed')), rounds: perRound(get('svc-plain', 'streamed'), pk('streamed')) },
    { measure: 'bare Node relay vs Portkey, non-streamed req/s', target: '(the floor)', value: ratio(get('node-relay', 'json'), pk('json')), rounds: perRound(get('node-relay', 'json'), pk('json')) },
    { measure: 'bare Node relay vs Portkey, streamed req/s', target: '(the floor)', value: ratio(get('node-relay', 'streamed'), pk('streamed')), rounds: perRound(get('node-relay', 'streamed'), pk('streamed')) },
  ];
  const f = results.fixedRate;
  out.push({ measure: `added latency vs direct at ${f?.rateRps} req/s, everything on, p50 (ms)`, target: '≤ 1 ms', value: f?.addedP50Ms ?? null, max: 1 });
  out.push({ measure: `added latency vs direct at ${f?.rateRps} req/s, everything on, p99 (ms)`, target: '≤ 5 ms', value: f?.addedP99Ms ?? null, max: 5 });
  out.push({ measure: `added latency vs direct at ${f?.rateRps} req/s, plain proxy, p50 (ms)`, target: '(for comparison)', value: f?.plainAddedP50Ms ?? null });
  out.push({ measure: `added latency vs direct at ${f?.rateRps} req/s, plain proxy, p99 (ms)`, target: '(for comparison)', value: f?.plainAddedP99Ms ?? null });
  const svcPeaks = results.cases.filter((c) => c.target.startsWith('svc') && c.memory).map((c) => c.memory.peakRssMb);
  out.push({ measure: `svc peak RSS after ${durationS} s of load (MB, worst case)`, target: '≤ 150 MB', value: svcPeaks.length ? Math.max(...svcPeaks) : null, max: 150 });
  const pkPeaks = results.cases.filter((c) => c.target === 'portkey' && c.memory).map((c) => c.memory.peakRssMb);
  out.push({ measure: 'Portkey peak RSS (MB, for comparison)', target: '(~210 MB)', value: pkPeaks.length ? Math.max(...pkPeaks) : null });
  for (const mode of ['json', 'streamed']) {
    const c = full(mode);
    if (!c?.webhooks) continue;
    // "Does not grow": what is left at the end is less than one second of requests, and the worker drained it.
    const ok = c.webhooks.backlogAtEnd <= Math.max(50, c.rps) && c.webhooks.pendingAfterDrainWait === 0;
    out.push({ measure: `webhook backlog at the end of the max-rate run (${mode})`, target: 'does not grow', value: c.webhooks.backlogAtEnd, pass: ok });
  }
  for (const r of out) {
    if (r.pass !== undefined || r.value === null) continue;
    if (r.min !== undefined) r.pass = r.value >= r.min;
    else if (r.max !== undefined) r.pass = r.value <= r.max;
    delete r.min;
    delete r.max;
  }
  for (const r of out) {
    delete r.min;
    delete r.max;
  }
  return out;
}

function printResults(results) {
  const rows = results.cases.map((c) =>
    c.error
      ? [c.target, c.mode, 'failed', null, null, null, null, null, null, c.error.slice(0, 40)]
      : [
          c.target,
          c.mode,
          String(c.rps),
          c.p50,
          c.p99,
          c.addedP50Ms ?? null,
          c.addedP99Ms ?? null,
          c.memory?.peakRssMb ?? null,
          c.targetCpuPct === null ? null : `${c.targetCpuPct}%`,
          [c.non2xx || c.errors ? `${c.non2xx} non-2xx, ${c.errors} err` : '', c.webhooks ? `backlog ${c.webhooks.backlogAtEnd}` : ''].filter(Boolean).join('; ') || '',
        ],
  );
  const out = [];
  out.push(table(['target', 'mode', 'req/s', 'p50 ms', 'p99 ms', '+p50 ms', '+p99 ms', 'peak RSS MB', 'target CPU', 'notes'], rows));
  const f = results.fixedRate;
  if (f && !f.error) {
    out.push('');
    out.push(`Latency at ${f.rateRps} req/s (1 connection), non-streamed:`);
    out.push(
      table(
        ['target', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
        [
          ['direct', f.direct.p50, f.direct.p90, f.direct.p99, f.direct.max],
          ['svc everything-on', f.svcFull.p50, f.svcFull.p90, f.svcFull.p99, f.svcFull.max],
          ['added (everything on)', f.addedP50Ms, round(f.svcFull.p90 - f.direct.p90, 3), f.addedP99Ms, null],
          ['svc plain proxy', f.svcPlain.p50, f.svcPlain.p90, f.svcPlain.p99, f.svcPlain.max],
          ['added (plain proxy)', f.plainAddedP50Ms, round(f.svcPlain.p90 - f.direct.p90, 3), f.plainAddedP99Ms, null],
        ],
      ),
    );
  }
  out.push('');
  out.push('Targets (issue 10):');
  out.push(
    table(
      ['measure', 'target', 'this run', 'rounds: median (range)', 'met'],
      results.ratios.map((r) => [
        r.measure,
        r.target,
        r.value === null ? '—' : String(r.value),
        r.rounds ? `${r.rounds.median} (${r.rounds.min}–${r.rounds.max})` : '',
        r.pass === undefined ? '' : r.pass ? 'yes' : 'NO',
      ]),
    ),
  );
  for (const u of results.unavailable) out.push(`unavailable: ${u.target} — ${u.reason}`);
  const m = results.machine;
  out.push('');
  out.push(`machine: ${m.cpuModel}, ${m.cores} cores, ${m.memoryGb} GB, ${m.platform}, node ${m.node}, ${m.date}, commit ${m.gitCommit}${m.gitDirtyServer ? ' (server tree had uncommitted changes)' : ''}`);
  out.push(`load average: start ${m.loadavgStart.join(' ')}, end ${m.loadavgEnd.join(' ')}; shared machine: ${m.sharedMachine}`);
  out.push(`CPU steal (time the hypervisor gave to other guests) over the run: ${m.cpuStealPct ?? 'n/a'} %; per measurement: ${results.cases.map((c) => `${c.target}/${c.mode} ${c.cpuStealPct ?? '—'}`).join(', ')}`);
  out.push(`settings: ${results.settings.durationS} s per target and mode in ${results.settings.rounds} interleaved slice(s) of ${results.settings.sliceS} s, after ${results.settings.warmupS} s warm-up, ${results.settings.connections} connections; ${results.settings.pinning}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

/** `--profile`: svc everything-on, non-streamed, under node --cpu-prof; prints the top self-time functions. */
async function runProfile() {
  const profDir = join(os.tmpdir(), `svc-bench-prof-${Date.now()}`);
  mkdirSync(profDir, { recursive: true });
  const upstream = await startFakeUpstream(LOADGEN_CORE);
  const receiver = await startWebhookReceiver(LOADGEN_CORE);
  try {
    const svc = await startSvc({
      core: TARGET_CORE,
      upstreamUrl: upstream.base,
      webhookUrl: opts['profile-plain'] ? undefined : receiver.hook,
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profDir}`, '--cpu-prof-interval=250'],
    });
    try {
      const stream = opts['profile-streamed'];
      const body = (opts['profile-plain'] ? bodies.svcPlain : bodies.svcFull)(stream);
      const m = await measure({ name: 'svc(prof)', url: `${svc.url}${chatPath}`, headers: { authorization: `Bearer ${svc.key}` }, body, stream, pid: svc.proc.pid });
      log(`under the profiler: ${m.rps} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, cpu ${m.targetCpuPct}%`);
    } finally {
      await stop(svc.proc, 15_000); // the profile is written on a clean exit
    }
  } finally {
    await stop(upstream.proc);
    await stop(receiver.proc);
  }
  const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no .cpuprofile written in ${profDir}`);
  const path = join(profDir, file);
  process.stdout.write(`${summarizeProfile(path, { top: 40 })}\nprofile: ${path}\n`);
}

function runMicro() {
  for (const file of ['verify.bench.mjs', 'webhooks.bench.mjs']) {
    if (!existsSync(join(HERE, file))) {
      log(`(${file} not present, skipped)`);
      continue;
    }
    log(`--- ${file}`);
    spawnSync(process.execPath, [join(HERE, file)], { stdio: 'inherit', timeout: 300_000 });
  }
}

try {
  if (opts.profile) {
    await runProfile();
  } else {
    const results = await runAll();
    printResults(results);
    mkdirSync(RESULTS, { recursive: true });
    const partial = opts.quick || opts['latency-only'];
    const out = opts.out ?? join(RESULTS, partial ? 'quick.json' : 'latest.json');
    writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
    log(`results written to ${out}`);
    if (opts.micro) runMicro();
  }
} catch (err) {
  log(`bench failed: ${err.stack ?? err}`);
  process.exitCode = 1;
} finally {
  await stopAll();
}
