#!/usr/bin/env node
// svc-server on one process against `--processes 2` (node:cluster on the embedded SQLite file), everything on
// (auth, rate limiting, grounding, a signed webhook to a local receiver), non-streamed and streamed: what
// the second core of this machine adds. Unlike `npm run bench`, nothing is pinned to one core: the server,
// the load generator (autocannon, 50 connections), the fake upstream and the webhook receiver share both
// cores, as they would on a small machine running everything. The two settings alternate (1 2, 2 1, …)
// so that the host's drift moves both alike. Writes bench/results/processes-latest.json.
//
//   node bench/processes.mjs [--duration S] [--runs N] [--processes N]
//
// Build first (npx turbo run build --filter=@svc/server...). Not part of `npm test`.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { load, probe } from './lib/load.mjs';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { cpuSecondsOf, killAllSync, median, round, stop } from './lib/procs.mjs';
import { readFileSync } from 'node:fs';
import { REPO, exitUnlessSvcBuilt, startSvc, webhookBacklog } from './lib/svc.mjs';
import { machineInfo } from './lib/report.mjs';

const { values: opts } = parseArgs({
  options: {
    duration: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '5' },
    runs: { type: 'string', default: '2' },
    processes: { type: 'string', default: '2' },
  },
});
exitUnlessSvcBuilt();
process.on('exit', killAllSync);
const CORES = '0,1';
const settings = [1, Number(opts.processes)];
const upstream = await startFakeUpstream(CORES);
const receiver = await startWebhookReceiver(CORES);

/** One measurement: a fresh server with `processes`, warm-up, then the timed load. */
async function measure(processes, stream) {
  const svc = await startSvc({ core: CORES, upstreamUrl: upstream.base, webhookUrl: receiver.hook, startArgs: ['--processes', String(processes)] });
  try {
    const target = { url: `${svc.url}/v1/chat/completions`, headers: { authorization: `Bearer ${svc.key}` }, body: bodies.svcFull(stream) };
    const probed = await probe(target);
    if (probed.status !== 200) throw new Error(`probe answered ${probed.status}: ${probed.text.slice(0, 300)}`);
    await load({ ...target, connections: 50, durationS: Number(opts.warmup) });
    const pids = [svc.proc.pid, ...childrenOf(svc.proc.pid)];
    const cpu0 = pids.map(cpuSecondsOf);
    const m = await load({ ...target, connections: 50, durationS: Number(opts.duration) });
    // µs of CPU per request of each process: the first is the one started (the primary with --processes > 1).
    const cpuUs = pids.map((pid, i) => round(((cpuSecondsOf(pid) - cpu0[i]) * 1e6) / m.requests, 0));
    if (m.non2xx || m.errors) throw new Error(`${m.non2xx} non-2xx answers and ${m.errors} errors`);
    const backlog = webhookBacklog(svc.dbPath).pending;
    process.stdout.write(`${stream ? 'streamed' : 'json'} processes ${processes}: ${m.rps} req/s  p50 ${m.p50}  p99 ${m.p99} ms  backlog ${backlog}  CPU µs/request by process ${cpuUs.join(' + ')}\n`);
    return { processes, mode: stream ? 'streamed' : 'json', rps: m.rps, p50: m.p50, p99: m.p99, backlogAtEnd: backlog, cpuUsPerRequestByProcess: cpuUs };
  } finally {
    await stop(svc.proc, 15_000);
  }
}

/** The pids of a process's children (the cluster workers of a primary). */
function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

const results = [];
try {
  for (const stream of [false, true]) {
    for (let run = 0; run < Number(opts.runs); run++) {
      for (const processes of run % 2 === 0 ? settings : [...settings].reverse()) results.push(await measure(processes, stream));
    }
  }
} finally {
  await stop(upstream.proc);
  await stop(receiver.proc);
}
const summary = [];
for (const mode of ['json', 'streamed']) {
  const rps = (p) => median(results.filter((r) => r.mode === mode && r.processes === p).map((r) => r.rps));
  summary.push({ mode, oneProcess: rps(settings[0]), processes: settings[1], several: rps(settings[1]), ratio: round(rps(settings[1]) / rps(settings[0]), 2) });
  process.stdout.write(`${mode}: median ${rps(settings[0])} req/s with 1 process, ${rps(settings[1])} with ${settings[1]} (${round(rps(settings[1]) / rps(settings[0]), 2)}x)\n`);
}
mkdirSync(join(REPO, 'bench/results'), { recursive: true });
writeFileSync(join(REPO, 'bench/results/processes-latest.json'), `${JSON.stringify({ machine: machineInfo(REPO), settings: { ...opts, cores: CORES }, results, summary }, null, 2)}\n`);
