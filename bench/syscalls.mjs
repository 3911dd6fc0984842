#!/usr/bin/env node
// System calls per request of one svc case, counted by `strace -c -f` attached to the server for a load run.
// strace slows the server several times over, so the counts per request are what this is for, not its
// req/s or the times strace prints. Same layout as ab.mjs: helpers on core 0, svc alone on core 1.
//
//   node bench/syscalls.mjs [--plain] [--stream] [--duration S]
//
// Needs strace (Debian package `strace`). Prints the calls per request of every system call seen.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { load, probe } from './lib/load.mjs';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { killAllSync, pinSelf, stop } from './lib/procs.mjs';
import { startSvc, exitUnlessSvcBuilt } from './lib/svc.mjs';

const { values: opts } = parseArgs({
  options: {
    plain: { type: 'boolean', default: false },
    stream: { type: 'boolean', default: false },
    duration: { type: 'string', default: '5' },
  },
});
exitUnlessSvcBuilt();
if (spawnSync('strace', ['-V']).status !== 0) {
  process.stderr.write('strace not found (apt-get install strace)\n');
  process.exit(2);
}
process.on('exit', killAllSync);
pinSelf(0);

const dir = mkdtempSync(join(tmpdir(), 'svc-syscalls-'));
const out = join(dir, 'strace.txt');
const upstream = await startFakeUpstream(0);
const receiver = await startWebhookReceiver(0);
const body = (opts.plain ? bodies.svcPlain : bodies.svcFull)(opts.stream);
const svc = await startSvc({ core: 1, upstreamUrl: upstream.base, webhookUrl: opts.plain ? undefined : receiver.hook });
try {
  const target = { url: `${svc.url}/v1/chat/completions`, headers: { authorization: `Bearer ${svc.key}` }, body };
  const probed = await probe(target);
  if (probed.status !== 200) throw new Error(`probe answered ${probed.status}: ${probed.text.slice(0, 300)}`);
  await load({ ...target, connections: 50, durationS: 3 }); // warm-up, outside the count
  const tracer = spawn('strace', ['-c', '-f', '-p', String(svc.proc.pid), '-o', out], { stdio: 'ignore' });
  await new Promise((resolve) => setTimeout(resolve, 1000)); // attached to every thread
  const m = await load({ ...target, connections: 50, durationS: Number(opts.duration) });
  // What the server still does for these requests (webhook attempts, their records) lands within ~100 ms.
  await new Promise((resolve) => setTimeout(resolve, 500));
  tracer.kill('SIGINT');
  await new Promise((resolve) => tracer.once('exit', resolve));
  const rows = readFileSync(out, 'utf8')
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f.length >= 5 && /^\d+$/.test(f[3] ?? ''))
    .map((f) => ({ name: f.at(-1), calls: Number(f[3]) }))
    .filter((r) => r.name !== 'total')
    .sort((a, b) => b.calls - a.calls);
  const label = `${opts.plain ? 'plain' : 'everything-on'} ${opts.stream ? 'streamed' : 'json'}`;
  process.stdout.write(`${label}: ${m.requests} requests under strace (non-2xx ${m.non2xx})\n`);
  for (const r of rows) process.stdout.write(`  ${r.name.padEnd(16)} ${(r.calls / m.requests).toFixed(2).padStart(7)} per request\n`);
} finally {
  await stop(svc.proc, 10_000);
  await stop(upstream.proc);
  await stop(receiver.proc);
  rmSync(dir, { recursive: true, force: true });
}
