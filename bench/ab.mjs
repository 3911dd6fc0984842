#!/usr/bin/env node
// One svc case at a time, for A/B experiments on the hot path (not the issue's report: see run.mjs).
//
//   node bench/ab.mjs [--plain] [--stream] [--duration S] [--runs N] [--rate RPS] [--svc-node-args="…"]
//                     [--bin-b PATH/bin.js] [--no-webhook]
//
// Same layout as run.mjs: load generator, fake upstream and webhook receiver on core 0, svc alone on core 1.
// Prints, per run: req/s, p50/p99 (ms), svc CPU % (and the kernel's share of it), µs of svc CPU per request,
// peak RSS. --no-webhook: everything on but the webhook (the key has no webhook URL).
// With --bin-b (another build's apps/server/dist/bin.js, e.g. a copy of the build before a change), every
// run measures both builds back to back, in alternating order (A B, B A, …), so a host whose speed drifts
// moves both alike; the summary gives each build's median µs per request and their ratio.
import { parseArgs } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { load, probe } from './lib/load.mjs';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { cpuTimesOf, killAllSync, memoryOf, pinSelf, round, stop } from './lib/procs.mjs';
import { startSvc, exitUnlessSvcBuilt } from './lib/svc.mjs';
import { buildsOf, measureAlternately } from './lib/ab-builds.mjs';

const { values: opts } = parseArgs({
  options: {
    plain: { type: 'boolean', default: false },
    stream: { type: 'boolean', default: false },
    duration: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '3' },
    runs: { type: 'string', default: '1' },
    rate: { type: 'string' },
    connections: { type: 'string', default: '50' },
    'svc-node-args': { type: 'string', default: '' },
    'bin-b': { type: 'string' },
    'no-webhook': { type: 'boolean', default: false },
  },
});
const durationS = Number(opts.duration);
const rate = opts.rate ? Number(opts.rate) : undefined;
const connections = rate ? 1 : Number(opts.connections);
const nodeArgs = opts['svc-node-args'].split(/\s+/).filter(Boolean);
const builds = buildsOf(opts['bin-b']);
exitUnlessSvcBuilt();
process.on('exit', killAllSync);
pinSelf(0);

const upstream = await startFakeUpstream(0);
const receiver = await startWebhookReceiver(0);
const body = (opts.plain ? bodies.svcPlain : bodies.svcFull)(opts.stream);

/** One measurement of one build: a fresh server, warm-up, then the timed load. */
async function measure(build, run) {
  const svc = await startSvc({ core: 1, upstreamUrl: upstream.base, webhookUrl: opts.plain || opts['no-webhook'] ? undefined : receiver.hook, nodeArgs, bin: build.bin });
  try {
    const target = { url: `${svc.url}/v1/chat/completions`, headers: { authorization: `Bearer ${svc.key}` }, body };
    const probed = await probe(target);
    if (probed.status !== 200) throw new Error(`probe answered ${probed.status}: ${probed.text.slice(0, 300)}`);
    await load({ ...target, connections, durationS: Number(opts.warmup), overallRate: rate });
    const cpu0 = cpuTimesOf(svc.proc.pid);
    const m = await load({ ...target, connections, durationS, overallRate: rate });
    const cpu1 = cpuTimesOf(svc.proc.pid);
    const cpuS = cpu1.user + cpu1.system - cpu0.user - cpu0.system;
    const systemShare = round((100 * (cpu1.system - cpu0.system)) / cpuS, 0);
    const mem = memoryOf(svc.proc.pid);
    const us = round((cpuS * 1e6) / m.requests, 0);
    process.stdout.write(
      `${builds.length > 1 ? `${build.name} ` : ''}${opts.plain ? 'plain' : opts['no-webhook'] ? 'full without webhook' : 'full'} ${opts.stream ? 'streamed' : 'json'} run ${run + 1}: ${m.rps} req/s  p50 ${m.p50}  p99 ${m.p99} ms  ` +
        `cpu ${round((100 * cpuS) / durationS, 0)}% (${systemShare}% in the kernel)  ${us} µs/req  peak RSS ${mem?.peakRssMb} MB  non2xx ${m.non2xx} errors ${m.errors}\n`,
    );
    return us;
  } finally {
    await stop(svc.proc, 10_000);
  }
}

try {
  await measureAlternately(builds, Number(opts.runs), measure, 'µs/req');
} finally {
  await stop(upstream.proc);
  await stop(receiver.proc);
}
