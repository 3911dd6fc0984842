// Zero-latency OpenAI-compatible upstream: a fixed ~200-token answer, or the same answer streamed in ~20
// SSE chunks with a usage chunk. All bytes are prebuilt; run as `node fake-upstream.mjs PORT`.
// FAKE_UPSTREAM_PACING in the environment: `burst` (default, what `npm run bench` measures) writes every frame
// of a stream at once, so the gateway mostly reads a whole answer in one go; `frame` writes one frame per
// event-loop turn, each in its own packet, as a real upstream sends tokens (bench/abort-rss.mjs uses it).
import http from 'node:http';
import { ANSWER, USAGE, answerPieces } from './fixtures.mjs';

const created = Math.floor(Date.now() / 1000);
const id = 'chatcmpl-fakeupstream0001';
const model = 'gpt-4o-mini-2024-07-18';

const completion = Buffer.from(
  JSON.stringify({
    id,
    object: 'chat.completion',
    created,
    model,
    system_fingerprint: 'fp_bench',
    choices: [{ index: 0, message: { role: 'assistant', content: ANSWER, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: USAGE,
  }),
);

const chunk = (choices, extra = {}) =>
  Buffer.from(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_bench', choices, ...extra })}\n\n`);
const pieces = answerPieces(20);
const frames = [
  ...pieces.map((content, i) =>
    chunk([{ index: 0, delta: i === 0 ? { role: 'assistant', content } : { content }, logprobs: null, finish_reason: null }]),
  ),
  chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]),
  chunk([], { usage: USAGE }),
  Buffer.from('data: [DONE]\n\n'),
];

const PACING = process.env.FAKE_UPSTREAM_PACING ?? 'burst';
if (PACING !== 'burst' && PACING !== 'frame') throw new Error(`FAKE_UPSTREAM_PACING must be burst or frame, not ${PACING}`);

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
    res.writeHead(req.url === '/healthz' ? 200 : 404).end();
    return;
  }
  const parts = [];
  req.on('data', (d) => parts.push(d));
  req.on('end', () => {
    // Cheap check instead of a JSON parse: the upstream should cost as little as possible.
    const stream = Buffer.concat(parts).includes('"stream":true');
    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': completion.length });
      res.end(completion);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    if (PACING === 'burst') {
      for (const f of frames) res.write(f);
      res.end();
      return;
    }
    let next = 0;
    const writeOne = () => {
      if (res.destroyed) return;
      res.write(frames[next++]);
      if (next < frames.length) setImmediate(writeOne);
      else res.end();
    };
    writeOne();
  });
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 121_000;
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`ready ${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
