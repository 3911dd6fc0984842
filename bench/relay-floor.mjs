#!/usr/bin/env node
// The floor under a Node gateway's streamed relay: a bare node:http → undici relay of the fake upstream's
// stream, pinned to core 1 like svc in `npm run bench`, in two modes —
//   bytes: the upstream's bytes written on as they come (decode, write; no parsing);
//   frames: each SSE frame JSON.parse'd, id and model replaced, JSON.stringify'd (what any gateway that
//           reads the frames pays at least).
//
//   node bench/relay-floor.mjs [--duration S] [--pairs N]
//
// Prints req/s and the relay's CPU µs per request for each mode. Not part of `npm run bench`.
import http from 'node:http';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { load } from './lib/load.mjs';
import { startFakeUpstream } from './lib/helpers.mjs';
import { cpuSecondsOf, freePort, killAllSync, pinSelf, round, spawnPinned, stop, waitHttp } from './lib/procs.mjs';

const [role, mode, upstreamPort, port] = process.argv.slice(2);

if (role === '--relay') {
  const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 128, pipelining: 1 });
  const body = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  const headers = { 'content-type': 'application/json', accept: 'text/event-stream' };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      const upstream = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const decoder = new TextDecoder();
      let pending = '';
      for await (const part of upstream.body) {
        const text = decoder.decode(part, { stream: true });
        if (mode === 'bytes') {
          res.write(text);
          continue;
        }
        pending += text;
        let out = '';
        for (let end = pending.indexOf('\n\n'); end !== -1; end = pending.indexOf('\n\n')) {
          const data = pending.slice(6, end); // after "data: "
          pending = pending.slice(end + 2);
          if (data === '[DONE]') {
            out += 'data: [DONE]\n\n';
            continue;
          }
          const frame = JSON.parse(data);
          frame.id = 'chatcmpl-relay';
          frame.model = 'relay';
          out += `data: ${JSON.stringify(frame)}\n\n`;
        }
        if (out) res.write(out);
      }
      res.end();
    });
  });
  server.listen(Number(port), '127.0.0.1');
  process.on('SIGTERM', () => process.exit(0));
} else {
  const { values: opts } = parseArgs({ options: { duration: { type: 'string', default: '10' }, pairs: { type: 'string', default: '2' } } });
  process.on('exit', killAllSync);
  pinSelf(0);
  const upstream = await startFakeUpstream(0);
  const upPort = new URL(upstream.url).port;
  const body = JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [] });
  for (let pair = 0; pair < Number(opts.pairs); pair++) {
    for (const relayMode of ['bytes', 'frames']) {
      const relayPort = await freePort();
      const relay = spawnPinned(1, process.execPath, [new URL(import.meta.url).pathname, '--relay', relayMode, String(upPort), String(relayPort)]);
      const url = `http://127.0.0.1:${relayPort}/`;
      await waitHttp(url, { proc: relay });
      await load({ url, body, connections: 50, durationS: 3 });
      const cpu0 = cpuSecondsOf(relay.pid);
      const m = await load({ url, body, connections: 50, durationS: Number(opts.duration) });
      const cpuS = cpuSecondsOf(relay.pid) - cpu0;
      process.stdout.write(`${relayMode.padEnd(6)} ${m.rps} req/s  ${round((cpuS * 1e6) / m.requests, 0)} µs of relay CPU per request  non2xx ${m.non2xx}\n`);
      await stop(relay);
    }
  }
  await stop(upstream.proc);
}
