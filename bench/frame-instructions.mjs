#!/usr/bin/env node
// Instructions per relayed frame of svc's upstream stream reader at a model's pace, counted by callgrind: two
// checkouts' `createOpenAICompatibleUpstream` (each bundled from its sources) read paced streams from the fake
// upstream (`lib/fake-upstream.mjs --rate R --tokens T`, one frame per read), each in a process of its own under
// `valgrind --tool=callgrind --instr-atstart=no`, counted after a warm-up. What a frame costs from the socket's
// read to the batch handed on (undici's client, the body, decoding, SSE, reading the frame), which
// instructions.mjs's zero-latency upstream, whose 23 frames arrive in one or two reads, does not show.
//
//   node bench/frame-instructions.mjs --base OTHER/apps/server/src [--runs 2] [--streams 60] [--warmup 100]
//                                     [--concurrency 4] [--rate 20] [--tokens 50]
//
// Prints, per run and build, instructions per frame (the counted streams' whole cost, their starts included,
// over their frames) and per stream. Needs valgrind. Not part of `npm test`.
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
    warmup: { type: 'string', default: '100' },
    concurrency: { type: 'string', default: '4' },
    rate: { type: 'string', default: '20' },
    tokens: { type: 'string', default: '50' },
  },
});

if (opts.child) await child();
else await driver();

/** Under valgrind: warm-up streams, 'warm' on stdout, wait for 'go' on stdin, counted streams, 'done FRAMES'. */
async function child() {
  const { createOpenAICompatibleUpstream, Cancellation } = await import(opts.child);
  const upstream = createOpenAICompatibleUpstream({ baseUrl: opts.upstream, apiKey: 'sk-bench', timeoutMs: 600_000, firstByteTimeoutMs: 600_000 });
  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say fifty words.' }], max_tokens: 512, stream_options: { include_usage: true } };
  let frames = 0;
  const one = async () => {
    const chunks = await upstream.stream({ body, signal: new Cancellation(), thinking: false });
    await chunks.each((batch) => {
      frames += batch.length;
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
  await new Promise((resolve) => process.stdin.once('data', resolve));
  frames = 0;
  await streams(Number(opts.streams));
  process.stdout.write(`done ${frames}\n`);
  await new Promise((resolve) => process.stdin.once('data', resolve));
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
        const per = await measure(build, `http://127.0.0.1:${port}/v1`);
        figures[build.name].push(per);
        process.stdout.write(`${build.name} run ${run + 1}: ${per.frames} frames, ${per.perFrame.toLocaleString('en')} instructions per frame, ${per.perStream.toLocaleString('en')} per stream\n`);
      }
    }
  } finally {
    await stop(fake);
  }
  const m = (name) => median(figures[name].map((f) => f.perFrame));
  process.stdout.write(`median instructions per frame: new ${m('new').toLocaleString('en')}  base ${m('base').toLocaleString('en')}  new/base ${(m('new') / m('base')).toFixed(4)}\n`);
}

async function measure(build, upstreamUrl) {
  const out = join(tmpdir(), `svc-frame-instructions-${process.pid}-${build.name}`);
  const proc = spawn('taskset', ['-c', '1', 'valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}.%p`, process.execPath, new URL(import.meta.url).pathname, '--child', build.file, '--upstream', upstreamUrl, '--streams', opts.streams, '--warmup', opts.warmup, '--concurrency', opts.concurrency], { stdio: ['pipe', 'pipe', 'inherit'] });
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
    proc.stdin.write('go\n');
    const done = await next();
    await control('--dump=measured');
    const frames = Number(done.split(' ')[1]);
    const dump = `${out}.${valgrindPid}.1`;
    const totals = /^summary: (\d+)/m.exec(readFileSync(dump, 'utf8'));
    rmSync(dump, { force: true });
    if (!totals) throw new Error(`no summary line in ${dump}`);
    const instructions = Number(totals[1]);
    return { frames, perFrame: Math.round(instructions / frames), perStream: Math.round(instructions / Number(opts.streams)) };
  } finally {
    proc.stdin.write('end\n');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    if (proc.exitCode === null && proc.signalCode === null) await new Promise((resolve) => proc.once('exit', resolve));
    clearTimeout(timer);
    rmSync(`${out}.${valgrindPid}`, { force: true });
  }
}
