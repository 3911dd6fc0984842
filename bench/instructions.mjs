#!/usr/bin/env node
// Instructions per request of one svc case, counted by valgrind's callgrind: a measure of the hot path that
// does not move with the host's speed. On a shared host wall-clock A/B runs of the same build differ by
// up to 2× (seen: 262–565 µs of CPU per request in four 10 s runs), which hides a change worth a few per
// cent; callgrind counts what the process executes, JIT code, GC and the kernel-call wrappers included
// (not time in the kernel), whatever else the machine does.
//
//   node bench/instructions.mjs [--plain] [--stream] [--no-webhook] [--requests N] [--warmup N] [--runs N] [--bin-b PATH/bin.js] [--keep]
//                                  [--svc-node-args="…"]
//
// The server runs under `valgrind --tool=callgrind --instr-atstart=no` (about 50× slower); after a warm-up
// of --warmup requests (uncounted; with 3,000 TurboFan still made 28 % of the counted instructions of a
// streamed everything-on run, with 8,000 7 %), counting is switched on with
// `callgrind_control -i on`, --requests requests are sent (8 connections), and the count is dumped. With
// --bin-b, every run measures both builds in alternating order, as bench/ab.mjs does; --keep keeps the
// dump and runs the server with --perf-basic-prof, so bench/lib/callgrind-summary.mjs can name JIT code too. Needs valgrind
// (Debian package `valgrind`). Not part of `npm test`.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { load, probe } from './lib/load.mjs';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { killAllSync, pinSelf, round, stop } from './lib/procs.mjs';
import { exitUnlessSvcBuilt, startSvc } from './lib/svc.mjs';
import { buildsOf, measureAlternately } from './lib/ab-builds.mjs';

const { values: opts } = parseArgs({
  options: {
    plain: { type: 'boolean', default: false },
    stream: { type: 'boolean', default: false },
    requests: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '8000' },
    runs: { type: 'string', default: '1' },
    connections: { type: 'string', default: '8' },
    'bin-b': { type: 'string' },
    keep: { type: 'boolean', default: false },
    'no-webhook': { type: 'boolean', default: false },
    'svc-node-args': { type: 'string', default: '' },
  },
});
try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
} catch {
  process.stderr.write('instructions.mjs needs valgrind: apt-get install valgrind\n');
  process.exit(2);
}
exitUnlessSvcBuilt();
process.on('exit', killAllSync);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));
// Bounded: stops everything if a run hangs (a run takes minutes under valgrind, half an hour on a loaded host).
setTimeout(() => {
  process.stderr.write('instructions: took too long, stopping everything\n');
  process.exit(3);
}, Number(opts.runs) * 2 * 60 * 60_000).unref();
pinSelf(0);

const requests = Number(opts.requests);
const connections = Number(opts.connections);
const builds = buildsOf(opts['bin-b']);
const upstream = await startFakeUpstream(0);
const receiver = await startWebhookReceiver(0);
const body = (opts.plain ? bodies.svcPlain : bodies.svcFull)(opts.stream);
/** A request's time before the load generator gives up on it: ~50× slower under valgrind, slower still on a loaded host. */
const UNDER_VALGRIND_TIMEOUT_S = 600;
const callgrind = (pid, ...args) => execFileSync('callgrind_control', [...args, String(pid)], { stdio: 'ignore' });

/** Instructions per request of one build: a fresh server under callgrind, warm-up, then the counted requests. */
async function measure(build, run) {
  const out = join(tmpdir(), `svc-instructions-${process.pid}-${build.name}-${run}`);
  const wrapper = ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}.%p`];
  const nodeArgs = [...opts['svc-node-args'].split(/\s+/).filter(Boolean), ...(opts.keep ? ['--perf-basic-prof'] : [])];
  const svc = await startSvc({ core: 1, upstreamUrl: upstream.base, webhookUrl: opts.plain || opts['no-webhook'] ? undefined : receiver.hook, bin: build.bin, wrapper, nodeArgs, startTimeoutMs: 300_000 });
  try {
    const target = { url: `${svc.url}/v1/chat/completions`, headers: { authorization: `Bearer ${svc.key}` }, body };
    const probed = await probe(target, 300_000);
    if (probed.status !== 200) throw new Error(`probe answered ${probed.status}: ${probed.text.slice(0, 300)}`);
    await load({ ...target, connections, amount: Number(opts.warmup), timeoutS: UNDER_VALGRIND_TIMEOUT_S });
    callgrind(svc.proc.pid, '--instr=on');
    const m = await load({ ...target, connections, amount: requests, timeoutS: UNDER_VALGRIND_TIMEOUT_S });
    callgrind(svc.proc.pid, '--dump=measured');
    // The first dump of process PID goes to OUT.PID.1 (OUT.PID is written at exit).
    const dump = `${out}.${svc.proc.pid}.1`;
    const totals = /^summary: (\d+)/m.exec(readFileSync(dump, 'utf8'));
    if (opts.keep) process.stdout.write(`callgrind dump kept: ${dump}; by function, JIT code named from /tmp/perf-${svc.proc.pid}.map:\n  node bench/lib/callgrind-summary.mjs ${dump} /tmp/perf-${svc.proc.pid}.map\n`);
    else rmSync(dump, { force: true });
    if (!totals) throw new Error(`no summary line in ${dump}`);
    const instructions = Number(totals[1]);
    if (m.non2xx || m.errors) throw new Error(`${m.non2xx} non-2xx answers and ${m.errors} errors under callgrind`);
    const per = round(instructions / m.requests, 0);
    process.stdout.write(
      `${builds.length > 1 ? `${build.name} ` : ''}${opts.plain ? 'plain' : opts['no-webhook'] ? 'full without webhook' : 'full'} ${opts.stream ? 'streamed' : 'json'} run ${run + 1}: ` +
        `${m.requests} requests, ${(instructions / 1e9).toFixed(3)} G instructions, ${per.toLocaleString('en')} per request\n`,
    );
    return per;
  } finally {
    await stop(svc.proc, 30_000);
    rmSync(`${out}.${svc.proc.pid}`, { force: true });
  }
}


try {
  await measureAlternately(builds, Number(opts.runs), measure, 'instructions per request');
} finally {
  await stop(upstream.proc);
  await stop(receiver.proc);
}
