#!/usr/bin/env node
// What svc's features cost at least, in any Node gateway: the bare relay of `npm run bench`
// (bench/lib/node-relay.mjs, frames mode) with svc's grounding check, its audit webhook, or both, each done
// the least costly way that still does it (see node-relay.mjs), measured in the same run as Portkey and svc
// everything on, on the same core with the same load. If the relay with the features cannot reach a target
// ratio against Portkey, no Node gateway that also authenticates, limits, validates, logs and keeps its
// deliveries durable can.
//
//   node bench/feature-floor.mjs [--stream | --json] [--duration S] [--rounds N] [--skip-svc]
//
// Layout as in run.mjs: load generator, fake upstream and webhook receiver on core 0, the target alone on
// core 1. Each round measures every target once, in rotated order (a host whose speed drifts moves them
// alike); per target it prints req/s, CPU µs per request and the ratio to Portkey, per round and pooled, and
// for the webhook targets the deliveries the receiver counted per request, and writes it all, with the
// machine, to bench/results/feature-floor-{streamed|json}-latest.json. Not part of `npm run bench`.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { load, probe } from './lib/load.mjs';
import { startFakeUpstream, startNodeRelay, startWebhookReceiver } from './lib/helpers.mjs';
import { installPortkey, startPortkey } from './lib/portkey.mjs';
import { cpuSecondsOf, killAllSync, median, pinSelf, round, stop } from './lib/procs.mjs';
import { exitUnlessSvcBuilt, REPO, startSvc } from './lib/svc.mjs';
import { machineInfo } from './lib/report.mjs';

const { values: opts } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    stream: { type: 'boolean', default: false },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
    'skip-svc': { type: 'boolean', default: false },
  },
});
const stream = !opts.json;
const durationS = Number(opts.duration);
const connections = Number(opts.connections);
const chatPath = '/v1/chat/completions';
if (!opts['skip-svc']) exitUnlessSvcBuilt();
process.on('exit', killAllSync);
pinSelf(0);

const upstream = await startFakeUpstream(0);
const receiver = await startWebhookReceiver(0);
const upstreamPort = new URL(upstream.url).port;
const portkeyEntry = await installPortkey();

const relay = (mode) => async () => {
  const r = await startNodeRelay({ core: 1, mode, upstreamPort, webhookUrl: receiver.hook });
  return { proc: r.proc, url: `${r.url}${chatPath}`, headers: {}, body: bodies.direct(stream) };
};
const targets = [
  [
    'portkey',
    async () => {
      const pk = await startPortkey({ core: 1, entry: portkeyEntry, upstreamUrl: upstream.base });
      return { proc: pk.proc, url: `${pk.url}${chatPath}`, headers: pk.headers, body: bodies.direct(stream) };
    },
  ],
  ['relay', relay('frames')],
  ['relay+grounding', relay('frames+grounding')],
  ['relay+webhook', relay('frames+webhook')],
  ['relay+both', relay('frames+features')],
];
if (!opts['skip-svc']) {
  targets.push([
    'svc-full',
    async () => {
      const svc = await startSvc({ core: 1, upstreamUrl: upstream.base, webhookUrl: receiver.hook });
      return { proc: svc.proc, url: `${svc.url}${chatPath}`, headers: { authorization: `Bearer ${svc.key}` }, body: bodies.svcFull(stream) };
    },
  ]);
}

/** One target, one round: a fresh process, a probe, warm-up, then the timed load. */
async function measure(name, start) {
  const t = await start();
  try {
    const probed = await probe(t);
    if (probed.status !== 200) throw new Error(`${name}: probe answered ${probed.status}: ${probed.text.slice(0, 200)}`);
    if ((name.includes('grounding') || name.includes('both')) && !probed.text.includes('"svc"')) throw new Error(`${name}: no svc object in its answer`);
    await load({ ...t, connections, durationS: Number(opts.warmup) });
    // Deliveries of the warm-up still in flight land before the count starts.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const received0 = await receiver.received();
    const cpu0 = cpuSecondsOf(t.proc.pid);
    const m = await load({ ...t, connections, durationS });
    const cpuS = cpuSecondsOf(t.proc.pid) - cpu0;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const received = (await receiver.received()) - received0;
    return { rps: m.rps, requests: m.requests, cpuUs: (cpuS * 1e6) / m.requests, received, non2xx: m.non2xx, errors: m.errors };
  } finally {
    await stop(t.proc);
  }
}

const results = new Map(targets.map(([name]) => [name, []]));
const rounds = Number(opts.rounds);
process.stdout.write(`${stream ? 'streamed' : 'json'}: ${rounds} rounds of ${durationS} s per target, ${connections} connections\n`);
for (let r = 0; r < rounds; r++) {
  const order = targets.slice(r % targets.length).concat(targets.slice(0, r % targets.length));
  for (const [name, start] of order) {
    const m = await measure(name, start);
    results.get(name).push(m);
    const hooks = name.includes('webhook') || name.includes('both') || name === 'svc-full' ? `  deliveries/request ${round(m.received / m.requests, 3)}` : '';
    process.stdout.write(`  round ${r + 1} ${name.padEnd(16)} ${String(m.rps).padStart(6)} req/s  ${round(m.cpuUs, 0)} µs/req  non2xx ${m.non2xx} errors ${m.errors}${hooks}\n`);
  }
}

const pk = results.get('portkey');
const pooledRps = (runs) => runs.reduce((a, m) => a + m.requests, 0) / (durationS * runs.length);
const summary = [];
process.stdout.write('\ntarget            req/s (pooled)  µs/req (median)  vs Portkey (pooled; per round)\n');
for (const [name, runs] of results) {
  const rps = pooledRps(runs);
  const perRound = runs.map((m, i) => round(m.rps / pk[i].rps, 2));
  const cpuUs = median(runs.map((m) => m.cpuUs));
  summary.push({ target: name, rps: round(rps, 0), cpuUsPerRequest: round(cpuUs, 0), vsPortkey: round(rps / pooledRps(pk), 2), vsPortkeyPerRound: perRound });
  process.stdout.write(`${name.padEnd(16)}  ${String(round(rps, 0)).padStart(14)}  ${String(round(cpuUs, 0)).padStart(15)}  ${round(rps / pooledRps(pk), 2)}× (${perRound.join(' ')})\n`);
}
const out = join(REPO, `bench/results/feature-floor-${stream ? 'streamed' : 'json'}-latest.json`);
const settings = { mode: stream ? 'streamed' : 'json', durationS, warmupS: Number(opts.warmup), rounds, connections, pinning: 'load generator, fake upstream, webhook receiver: core 0; targets: core 1, one under load at a time' };
const rounded = Object.fromEntries([...results].map(([name, runs]) => [name, runs.map((m) => ({ ...m, cpuUs: round(m.cpuUs, 0) }))]));
writeFileSync(out, `${JSON.stringify({ machine: machineInfo(REPO), settings, summary, rounds: rounded }, null, 2)}\n`);
process.stdout.write(`\n→ ${out}\n`);
await stop(upstream.proc);
await stop(receiver.proc);
