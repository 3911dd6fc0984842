#!/usr/bin/env node
// The issue's req/s ratios (svc everything-on and svc plain proxy against Portkey), measured in interleaved
// rounds instead of one long measurement per target. `run.mjs` measures the targets one after the other,
// minutes apart; on a host whose speed drifts (seen: the fake upstream alone 43,011 req/s in one run and
// 32,673 in the next, with 0 % steal reported), a ratio of two such measurements carries the drift. Here
// all three gateways run at once, each pinned to core 1 (only the one under load uses it), and every round
// measures each of them for a short slice, in an order rotated from round to round; the ratio of each
// round is taken from slices seconds apart, and the report gives the median and the range over rounds.
//
//   node bench/interleaved.mjs [--rounds 5] [--slice 12] [--warmup 5] [--modes json,streamed]
//
// Same layout as run.mjs: load generator, fake upstream and webhook receiver on core 0. Portkey is
// installed on demand as in run.mjs. Writes bench/results/interleaved-latest.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { load, probe } from './lib/load.mjs';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { installPortkey, PORTKEY_VERSION, startPortkey } from './lib/portkey.mjs';
import { cpuSecondsOf, killAllSync, median, memoryOf, pinSelf, round, stop } from './lib/procs.mjs';
import { machineInfo } from './lib/report.mjs';
import { REPO, startSvc, exitUnlessSvcBuilt } from './lib/svc.mjs';

const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    slice: { type: 'string', default: '12' },
    warmup: { type: 'string', default: '5' },
    modes: { type: 'string', default: 'json,streamed' },
    connections: { type: 'string', default: '50' },
  },
});
const rounds = Number(opts.rounds);
const sliceS = Number(opts.slice);
const warmupS = Number(opts.warmup);
const connections = Number(opts.connections);
const modes = opts.modes.split(',').map((m) => m.trim());
exitUnlessSvcBuilt();
process.on('exit', killAllSync);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));
// Bounded: every slice is short; this stops everything if something hangs.
const budgetS = modes.length * (3 * warmupS + rounds * 3 * (sliceS + 2)) + 300;
setTimeout(() => {
  process.stderr.write('interleaved: took too long, stopping everything\n');
  process.exit(3);
}, budgetS * 1000).unref();
pinSelf(0);
const log = (line) => process.stdout.write(`${line}\n`);

log(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into a temp dir…`);
const portkeyEntry = await installPortkey();
const upstream = await startFakeUpstream(0);
const receiver = await startWebhookReceiver(0);
const started = [];
try {
  const full = await startSvc({ core: 1, upstreamUrl: upstream.base, webhookUrl: receiver.hook });
  started.push(full.proc);
  const plain = await startSvc({ core: 1, upstreamUrl: upstream.base });
  started.push(plain.proc);
  const portkey = await startPortkey({ core: 1, entry: portkeyEntry, upstreamUrl: upstream.base });
  started.push(portkey.proc);
  const chat = '/v1/chat/completions';
  const targets = [
    { name: 'svc-full', pid: full.proc.pid, url: `${full.url}${chat}`, headers: { authorization: `Bearer ${full.key}` }, body: bodies.svcFull },
    { name: 'svc-plain', pid: plain.proc.pid, url: `${plain.url}${chat}`, headers: { authorization: `Bearer ${plain.key}` }, body: bodies.svcPlain },
    { name: 'portkey', pid: portkey.proc.pid, url: `${portkey.url}${chat}`, headers: portkey.headers, body: bodies.direct },
  ];
  const machine = machineInfo(REPO);
  log(`interleaved: ${rounds} rounds × ${sliceS} s per target and mode (+${warmupS} s warm-up each), ${connections} connections, ${machine.cpuModel} × ${machine.cores}, node ${machine.node}`);
  const results = { machine, settings: { rounds, sliceS, warmupS, connections, modes, portkey: PORTKEY_VERSION }, modes: {} };
  for (const mode of modes) {
    const stream = mode === 'streamed';
    for (const t of targets) {
      const p = await probe({ url: t.url, headers: t.headers, body: t.body(stream) });
      if (p.status !== 200) throw new Error(`${t.name} ${mode}: probe answered ${p.status}: ${p.text.slice(0, 300)}`);
      await load({ url: t.url, headers: t.headers, body: t.body(stream), connections, durationS: warmupS });
    }
    const slices = [];
    for (let r = 0; r < rounds; r++) {
      const order = targets.map((_, i) => targets[(i + r) % targets.length]);
      const round_ = { round: r + 1, order: order.map((t) => t.name) };
      for (const t of order) {
        const cpu0 = cpuSecondsOf(t.pid);
        const m = await load({ url: t.url, headers: t.headers, body: t.body(stream), connections, durationS: sliceS });
        const cpuS = cpuSecondsOf(t.pid) - cpu0;
        round_[t.name] = { rps: m.rps, p50: m.p50, p99: m.p99, non2xx: m.non2xx, errors: m.errors, cpuUsPerRequest: m.requests ? round((cpuS * 1e6) / m.requests, 0) : null };
      }
      round_.fullVsPortkey = round(round_['svc-full'].rps / round_.portkey.rps, 2);
      round_.plainVsPortkey = round(round_['svc-plain'].rps / round_.portkey.rps, 2);
      slices.push(round_);
      log(
        `  ${mode.padEnd(8)} round ${r + 1}: svc-full ${round_['svc-full'].rps}  svc-plain ${round_['svc-plain'].rps}  portkey ${round_.portkey.rps} req/s` +
          `  → ${round_.fullVsPortkey}× / ${round_.plainVsPortkey}×`,
      );
    }
    const summary = {};
    for (const key of ['fullVsPortkey', 'plainVsPortkey']) {
      const xs = slices.map((s) => s[key]);
      summary[key] = { median: round(median(xs), 2), min: Math.min(...xs), max: Math.max(...xs) };
    }
    for (const t of targets) summary[`${t.name}MedianRps`] = median(slices.map((s) => s[t.name].rps));
    results.modes[mode] = { slices, summary };
    log(
      `  ${mode}: everything-on vs Portkey ${summary.fullVsPortkey.median}× (rounds ${summary.fullVsPortkey.min}–${summary.fullVsPortkey.max}), ` +
        `plain proxy vs Portkey ${summary.plainVsPortkey.median}× (rounds ${summary.plainVsPortkey.min}–${summary.plainVsPortkey.max})`,
    );
  }
  results.peakRssMb = Object.fromEntries(targets.map((t) => [t.name, memoryOf(t.pid)?.peakRssMb ?? null]));
  log(`  peak RSS over the whole run (MB): ${Object.entries(results.peakRssMb).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  const dir = join(REPO, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'interleaved-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  log('results written to bench/results/interleaved-latest.json');
} finally {
  for (const proc of started) await stop(proc, 10_000);
  await stop(upstream.proc);
  await stop(receiver.proc);
}
