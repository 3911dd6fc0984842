#!/usr/bin/env node
// Peak RSS when clients leave mid-stream under load: the server then counts the usage itself, which loads the
// o200k tokenizer (~18–28 MB) on top of what the load holds. `npm run bench` never does this (every stream
// ends, and the upstream reports usage), so its peak RSS leaves the tokenizer out.
//
//   node bench/abort-rss.mjs [--runs N] [--duration S] [--bin-b PATH/bin.js]
//
// Per run: a fresh plain-proxy server (svc on core 1; load generator and fake upstream on core 0), streamed
// load from 50 connections for --duration seconds, and 3 s in, three streams that the client drops after their
// first chunk. The upstream sends one SSE frame per event-loop turn (FAKE_UPSTREAM_PACING=frame), as real
// ones do, so the drops land mid-stream. Prints VmHWM / VmRSS before the drops, after them, and after the
// load. With --bin-b, runs alternate between this checkout's build (A) and that one (B) and the summary
// gives each one's median peak.
import { parseArgs } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { load, probe } from './lib/load.mjs';
import { startFakeUpstream } from './lib/helpers.mjs';
import { killAllSync, memoryOf, pinSelf, stop } from './lib/procs.mjs';
import { startSvc, exitUnlessSvcBuilt } from './lib/svc.mjs';
import { buildsOf, measureAlternately } from './lib/ab-builds.mjs';

const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    duration: { type: 'string', default: '8' },
    'bin-b': { type: 'string' },
  },
});
const durationS = Number(opts.duration);
if (!(durationS >= 5)) throw new Error('--duration must be at least 5 s (the drops start 3 s in)');
exitUnlessSvcBuilt();
process.on('exit', killAllSync);
pinSelf(0);

process.env.FAKE_UPSTREAM_PACING = 'frame';
const upstream = await startFakeUpstream(0);
const body = bodies.svcPlain(true);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Drops a stream after its first chunk. */
async function dropMidStream(target) {
  const abort = new AbortController();
  const res = await fetch(target.url, { method: 'POST', headers: { ...target.headers, 'content-type': 'application/json' }, body, signal: abort.signal });
  await res.body.getReader().read();
  abort.abort();
}

async function measure(build, run) {
  const svc = await startSvc({ core: 1, upstreamUrl: upstream.base, bin: build.bin });
  try {
    const target = { url: `${svc.url}/v1/chat/completions`, headers: { authorization: `Bearer ${svc.key}` }, body };
    const probed = await probe(target);
    if (probed.status !== 200) throw new Error(`probe answered ${probed.status}: ${probed.text.slice(0, 300)}`);
    const mem = () => {
      const { peakRssMb, rssMb } = memoryOf(svc.proc.pid);
      return `peak ${peakRssMb.toFixed(1)} / now ${rssMb.toFixed(1)} MB`;
    };
    const running = load({ ...target, connections: 50, durationS });
    await sleep(3000);
    const before = mem();
    for (let i = 0; i < 3; i++) {
      await dropMidStream(target);
      await sleep(300);
    }
    const after = mem();
    const m = await running;
    await sleep(500);
    const peakMb = memoryOf(svc.proc.pid).peakRssMb;
    process.stdout.write(`${builds.length > 1 ? `${build.name} ` : ''}run ${run + 1}: before the drops ${before}; after them ${after}; after the load ${mem()}; ${m.rps} req/s\n`);
    return peakMb;
  } finally {
    await stop(svc.proc, 10_000);
  }
}

const builds = buildsOf(opts['bin-b']);
try {
  await measureAlternately(builds, Number(opts.runs), measure, 'peak RSS (MB)');
} finally {
  await stop(upstream.proc);
}
