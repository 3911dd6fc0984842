#!/usr/bin/env node
// The floor under a Node gateway's streamed relay: a bare node:http → undici relay of the fake upstream's
// stream (bench/lib/node-relay.mjs), pinned to core 1 like svc in `npm run bench`, in two modes —
//   bytes: the upstream's bytes written on as they come (decode, write; no parsing);
//   frames: each SSE frame JSON.parse'd, id and model replaced, JSON.stringify'd (what any gateway that
//           reads the frames pays at least; `npm run bench` measures this mode as its target `node-relay`).
//
//   node bench/relay-floor.mjs [--duration S] [--pairs N]
//
// Prints req/s and the relay's CPU µs per request for each mode. Not part of `npm run bench`.
import { parseArgs } from 'node:util';
import { load } from './lib/load.mjs';
import { startFakeUpstream, startNodeRelay } from './lib/helpers.mjs';
import { cpuSecondsOf, killAllSync, pinSelf, round, stop } from './lib/procs.mjs';

const { values: opts } = parseArgs({ options: { duration: { type: 'string', default: '10' }, pairs: { type: 'string', default: '2' } } });
process.on('exit', killAllSync);
pinSelf(0);
const upstream = await startFakeUpstream(0);
const upPort = new URL(upstream.url).port;
const body = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] });
for (let pair = 0; pair < Number(opts.pairs); pair++) {
  for (const relayMode of ['bytes', 'frames']) {
    const { proc: relay, url } = await startNodeRelay({ core: 1, mode: relayMode, upstreamPort: upPort });
    await load({ url, body, connections: 50, durationS: 3 });
    const cpu0 = cpuSecondsOf(relay.pid);
    const m = await load({ url, body, connections: 50, durationS: Number(opts.duration) });
    const cpuS = cpuSecondsOf(relay.pid) - cpu0;
    process.stdout.write(`${relayMode.padEnd(6)} ${m.rps} req/s  ${round((cpuS * 1e6) / m.requests, 0)} µs of relay CPU per request  non2xx ${m.non2xx}\n`);
    await stop(relay);
  }
}
await stop(upstream.proc);
