#!/usr/bin/env node
// What writing one SSE frame costs a node HTTP/1.1 server: `res.write(frame)` (node frames the chunk: a cork, a
// tick, four buffered writes, one `writev`) against one `socket.write` of the chunk framed by hand, as svc's
// SseWriter does once the header block is out. 500 keep-alive connections, each written a ~200-byte frame every
// 2 ms, 400 times; the server's CPU (user + system) per write. Each mode runs in a process of its own on core 1
// (the clients in the same process: they cost both modes alike), alternated.
//
//   node bench/sse-write.bench.mjs [--rounds N]
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const CONNECTIONS = 500;
const WRITES = 400;
const { values: opts, positionals } = parseArgs({ options: { rounds: { type: 'string', default: '2' } }, allowPositionals: true });

if (positionals[0] === 'res' || positionals[0] === 'socket') {
  const mode = positionals[0];
  const frame = `data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: ' w12' }, logprobs: null, finish_reason: null }] })}\n\n`;
  let done = 0;
  let start;
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    let n = 0;
    const tick = () => {
      if (mode === 'res') res.write(frame);
      else res.socket.write(`${Buffer.byteLength(frame).toString(16)}\r\n${frame}\r\n`);
      if (++n < WRITES) {
        setTimeout(tick, 2);
        return;
      }
      res.end();
      if (++done === CONNECTIONS) {
        const { user, system } = process.cpuUsage(start);
        process.stdout.write(`${((user + system) / (CONNECTIONS * WRITES)).toFixed(2)}\n`);
        process.exit(0);
      }
    };
    setTimeout(tick, 2);
  });
  server.listen(0, '127.0.0.1', () => {
    start = process.cpuUsage();
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    for (let i = 0; i < CONNECTIONS; i++) http.get({ host: '127.0.0.1', port: server.address().port, agent }, (r) => r.resume());
  });
} else {
  const self = fileURLToPath(import.meta.url);
  const results = { res: [], socket: [] };
  for (let round = 0; round < Number(opts.rounds); round++) {
    for (const mode of ['res', 'socket']) {
      const run = spawnSync('taskset', ['-c', '1', process.execPath, self, mode], { encoding: 'utf8' });
      if (run.status !== 0) throw new Error(`${mode}: ${run.stderr}`);
      results[mode].push(Number(run.stdout.trim()));
    }
  }
  console.log(`CPU µs per frame written, ${CONNECTIONS} connections × ${WRITES} frames, per round:`);
  console.log(`  res.write:             ${results.res.join(', ')}`);
  console.log(`  socket.write (framed): ${results.socket.join(', ')}`);
}
