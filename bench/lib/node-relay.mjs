// The floor under any Node gateway: a bare node:http server relaying to the fake upstream through undici,
// with nothing else (no auth, no validation, no logging, no metrics). Started (`startNodeRelay` in
// helpers.mjs) by `npm run bench` as the target `node-relay` and by `bench/relay-floor.mjs`. A non-streamed
// answer is parsed, its id and model replaced, and re-serialised; a stream is relayed in one of two modes:
//   bytes:  its bytes written on as they come (decode, write; no parsing);
//   frames: each SSE frame JSON.parse'd, id and model replaced, JSON.stringify'd (what any gateway that reads
//           the frames pays at least).
//
//   node bench/lib/node-relay.mjs MODE UPSTREAM_PORT PORT
import http from 'node:http';
import { Pool } from 'undici';

const [mode, upstreamPort, port] = process.argv.slice(2);
const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 128, pipelining: 1 });
const headers = { 'content-type': 'application/json', authorization: 'Bearer x' };
const server = http.createServer((req, res) => {
  const parts = [];
  req.on('data', (part) => parts.push(part));
  req.on('end', async () => {
    // The client's body goes upstream as received (as Portkey sends it), parsed once for `stream`.
    const body = Buffer.concat(parts).toString();
    let stream = false;
    try {
      stream = JSON.parse(body).stream === true;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"the body is not JSON"}}');
      return;
    }
    try {
      const upstream = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body });
      if (!stream) {
        const answer = await upstream.body.json();
        answer.id = 'chatcmpl-relay';
        answer.model = 'relay';
        const out = JSON.stringify(answer);
        res.writeHead(upstream.statusCode, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
        res.end(out);
        return;
      }
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
    } catch (err) {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: String(err?.message ?? err) } }));
    }
  });
});
server.listen(Number(port), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
