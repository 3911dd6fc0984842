#!/usr/bin/env node
// Instructions per relayed frame of svc's upstream stream reader at a model's pace, counted by callgrind: two
// checkouts' `createOpenAICompatibleUpstream` (each bundled from its sources) read paced streams from the fake
// upstream (`lib/fake-upstream.mjs --rate R --tokens T`, one frame per read), each in a process of its own under
// `valgrind --tool=callgrind --instr-atstart=no`, counted after a warm-up. What a frame costs from the socket's
// read to the batch handed on (undici's client, the body, decoding, SSE, reading the frame), which
// instructions.mjs's zero-latency upstream, whose 23 frames arrive in one or two reads, does not show.
//
//   node bench/frame-instructions.mjs --base OTHER/apps/server/src [--runs 2] [--streams 60] [--windows 3]
//                                     [--warmup 400] [--concurrency 8] [--rate 20] [--tokens 50]
//                                     [--background-threads] [--keep]
//
// For a figure that repeats run after run: V8 runs its compiler and collector on the main thread
// (`--single-threaded`, unless --background-threads), where their work comes at the same point of the same work
// instead of whenever the host lets a thread run; each of --windows windows of --streams streams starts from a
// full collection (uncounted) and is dumped on its own, so a window still paying for compilation shows beside the
// others. Prints, per run and build, each window's instructions per frame (the window's streams' whole cost,
// their starts included, over their frames; and how many reads brought them) and their median; then each
// build's median and spread over runs. --keep keeps the dumps (and runs the child with --perf-basic-prof) for
// `node bench/lib/callgrind-summary.mjs DUMP /tmp/perf-PID.map`. Needs valgrind. Not part of `npm test`.
import { execFile, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs, promisify } from 'node:util';
import { bundleSrc } from './lib/bundle-src.mjs';
import { freePort, killAllSync, median, pinSelf, spawnPinned, stop, waitHttp } from './lib/procs.mjs';

const { values: opts } = parseArgs({
  options: {
    child: { type: 'string' },
    upstream: { type: 'string' },
    base: { type: 'string' },
    src: { type: 'string', default: new URL('../apps/server/src', import.meta.url).pathname },
    runs: { type: 'string', default: '2' },
    streams: { type: 'string', default: '60' },
    warmup: { type: 'string', default: '400' },
    windows: { type: 'string', default: '3' },
    'background-threads': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    concurrency: { type: 'string', default: '8' },
    rate: { type: 'string', default: '20' },
    tokens: { type: 'string', default: '50' },
  },
});

if (opts.child) await child();
else await driver();

/**
 * Under valgrind: warm-up streams, 'warm' on stdout; then for each 'collect' on stdin a full collection,
 * 'collected'; for each 'go' a window of counted streams, 'done FRAMES BATCHES'; 'end' closes.
 */
async function child() {
  const { createOpenAICompatibleUpstream, Cancellation } = await import(opts.child);
  const upstream = createOpenAICompatibleUpstream({ baseUrl: opts.upstream, apiKey: 'sk-bench', timeoutMs: 600_000, firstByteTimeoutMs: 600_000 });
  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say fifty words.' }], max_tokens: 512, stream_options: { include_usage: true } };
  let frames = 0;
  let batches = 0;
  const one = async () => {
    const chunks = await upstream.stream({ body, signal: new Cancellation(), thinking: false });
    await chunks.each((batch) => {
      frames += batch.length;
      batches++;
      return undefined;
    });
  };
  const streams = async (n) => {
    let left = n;
    await Promise.all(Array.from({ length: Number(opts.concurrency) }, async () => {
      while (left-- > 0) await one();
    }));
  };
  await streams(Number(opts.warmup));
  process.stdout.write('warm\n');
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'collect') {
      // Each window starts from a collected heap, so each meets its collections at the same point of its work.
      globalThis.gc();
      process.stdout.write('collected\n');
      continue;
    }
    if (line !== 'go') break;
    frames = 0;
    batches = 0;
    await streams(Number(opts.streams));
    process.stdout.write(`done ${frames} ${batches}\n`);
  }
  await upstream.close();
  process.exit(0);
}

async function driver() {
  if (!opts.base) throw new Error('usage: node bench/frame-instructions.mjs --base OTHER/apps/server/src [--runs 2] …');
  process.on('exit', killAllSync);
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));
  setTimeout(() => {
    process.stderr.write('frame-instructions: took too long, stopping everything\n');
    process.exit(3);
  }, Number(opts.runs) * 2 * 30 * 60_000).unref();
  pinSelf(0);
  const modules = { createOpenAICompatibleUpstream: 'upstream/openai-compatible.ts', Cancellation: 'upstream/upstream.ts' };
  const builds = [
    { name: 'new', file: await bundleSrc(resolve(opts.src), modules, 'frame-instructions', 'new') },
    { name: 'base', file: await bundleSrc(resolve(opts.base), modules, 'frame-instructions', 'base') },
  ];
  const port = await freePort();
  const fake = spawnPinned(0, process.execPath, [new URL('./lib/fake-upstream.mjs', import.meta.url).pathname, '--rate', opts.rate, '--tokens', opts.tokens, String(port)]);
  await waitHttp(`http://127.0.0.1:${port}/healthz`, { proc: fake });
  const figures = { new: [], base: [] };
  try {
    for (let run = 0; run < Number(opts.runs); run++) {
      for (const build of run % 2 === 0 ? builds : [...builds].reverse()) {
        const windows = await measure(build, `http://127.0.0.1:${port}/v1`);
        const per = median(windows.map((w) => w.perFrame));
        figures[build.name].push(per);
        const each = windows.map((w) => `${w.perFrame.toLocaleString('en')} (${w.frames} frames in ${w.batches} batches, ${w.perStream.toLocaleString('en')} per stream)`);
        process.stdout.write(`${build.name} run ${run + 1}: ${per.toLocaleString('en')} instructions per frame, median of windows ${each.join(', ')}\n`);
      }
    }
  } finally {
    await stop(fake);
  }
  const m = (name) => median(figures[name]);
  const spread = (name) => `${Math.min(...figures[name]).toLocaleString('en')}–${Math.max(...figures[name]).toLocaleString('en')}`;
  process.stdout.write(`runs' spread: new ${spread('new')}  base ${spread('base')}\n`);
  process.stdout.write(`median instructions per frame: new ${m('new').toLocaleString('en')}  base ${m('base').toLocaleString('en')}  new/base ${(m('new') / m('base')).toFixed(4)}\n`);
}

/**
 * One build in a fresh process under callgrind: the warm-up uncounted, then --windows windows of --streams streams,
 * each after a full collection (uncounted), counted and dumped on its own, so a window still paying for
 * compilation shows beside the ones after it.
 */
async function measure(build, upstreamUrl) {
  const out = join(tmpdir(), `svc-frame-instructions-${process.pid}-${build.name}`);
  // V8's background compiler and collector threads run whenever the host lets them, so how much of their work
  // lands in a window depends on the host's load; on the main thread it comes at the same point of the same work.
  const nodeArgs = [...(opts.keep ? ['--perf-basic-prof'] : []), '--expose-gc', ...(opts['background-threads'] ? [] : ['--single-threaded'])];
  const proc = spawn('taskset', ['-c', '1', 'valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}.%p`, process.execPath, ...nodeArgs, new URL(import.meta.url).pathname, '--child', build.file, '--upstream', upstreamUrl, '--streams', opts.streams, '--warmup', opts.warmup, '--concurrency', opts.concurrency], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout });
  const next = () => new Promise((resolve, reject) => {
    lines.once('line', resolve);
    proc.once('exit', (code) => reject(new Error(`the valgrind child exited (${code})`)));
  });
  const valgrindPid = proc.pid;
  const control = (...args) => promisify(execFile)('callgrind_control', [...args, String(valgrindPid)]);
  try {
    if ((await next()) !== 'warm') throw new Error('the child did not warm up');
    await control('--instr=on');
    const windows = [];
    for (let w = 1; w <= Number(opts.windows); w++) {
      proc.stdin.write('collect\n');
      if ((await next()) !== 'collected') throw new Error('the child did not collect');
      await control('--zero');
      proc.stdin.write('go\n');
      const [, frames, batches] = (await next()).split(' ').map(Number);
      await control(`--dump=window-${w}`);
      const dump = `${out}.${valgrindPid}.${w}`;
      const totals = /^summary: (\d+)/m.exec(readFileSync(dump, 'utf8'));
      if (opts.keep) process.stdout.write(`kept: node bench/lib/callgrind-summary.mjs ${dump} /tmp/perf-${valgrindPid}.map\n`);
      else rmSync(dump, { force: true });
      if (!totals) throw new Error(`no summary line in ${dump}`);
      const instructions = Number(totals[1]);
      windows.push({ frames, batches, perFrame: Math.round(instructions / frames), perStream: Math.round(instructions / Number(opts.streams)) });
    }
    return windows;
  } finally {
    proc.stdin.write('end\n');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    if (proc.exitCode === null && proc.signalCode === null) await new Promise((resolve) => proc.once('exit', resolve));
    clearTimeout(timer);
    rmSync(`${out}.${valgrindPid}`, { force: true });
  }
}
