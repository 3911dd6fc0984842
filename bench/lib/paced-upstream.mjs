// An OpenAI-compatible upstream that streams at a model's pace: one content token per 1/RATE s (each gap
// drawn uniformly within ±JITTER of it), TOKENS tokens, then a finish frame, a usage frame and [DONE]. The
// first token goes out with the headers, so time to first token is the network's. Non-streamed requests get
// the whole answer after the same total time. Frames are prebuilt; one timer per open stream.
//
//   node bench/lib/paced-upstream.mjs RATE TOKENS JITTER PORT      (RATE tokens/s, JITTER 0..1)
//
// GET /stats → { open, peakOpen, streams, frames }: streams and frames written so far.
import http from 'node:http';

const [rate, tokens, jitter, port] = process.argv.slice(2).map(Number);
if (!(rate > 0 && tokens >= 1 && jitter >= 0 && jitter < 1)) throw new Error('usage: paced-upstream.mjs RATE TOKENS JITTER PORT');

const id = 'chatcmpl-paced0001';
const created = Math.floor(Date.now() / 1000);
const model = 'paced-model';
const frame = (choices, extra = {}) =>
  Buffer.from(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_paced', choices, ...extra })}\n\n`);
const words = Array.from({ length: tokens }, (_, i) => `${i === 0 ? '' : ' '}w${i}`);
const usage = { prompt_tokens: 12, completion_tokens: tokens, total_tokens: tokens + 12 };
const contentFrames = words.map((content, i) =>
  frame([{ index: 0, delta: i === 0 ? { role: 'assistant', content } : { content }, logprobs: null, finish_reason: null }]),
);
const tail = Buffer.concat([frame([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]), frame([], { usage }), Buffer.from('data: [DONE]\n\n')]);
const completion = Buffer.from(
  JSON.stringify({
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: words.join(''), refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage,
  }),
);
const gapMs = 1000 / rate;
const nextGap = () => gapMs * (1 + jitter * (2 * Math.random() - 1));

let open = 0;
let peakOpen = 0;
let streams = 0;
let frames = 0;

const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    if (req.url === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ open, peakOpen, streams, frames }));
    } else res.writeHead(req.url === '/healthz' ? 200 : 404).end();
    return;
  }
  const parts = [];
  req.on('data', (d) => parts.push(d));
  req.on('end', () => {
    const stream = Buffer.concat(parts).includes('"stream":true');
    open += 1;
    peakOpen = Math.max(peakOpen, open);
    let timer;
    res.once('close', () => {
      open -= 1;
      clearTimeout(timer);
    });
    if (!stream) {
      timer = setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': completion.length }).end(completion);
      }, gapMs * (tokens - 1));
      return;
    }
    streams += 1;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let next = 0;
    const writeNext = () => {
      if (res.destroyed) return;
      res.write(contentFrames[next++]);
      frames += 1;
      if (next < contentFrames.length) {
        timer = setTimeout(writeNext, nextGap());
        return;
      }
      frames += 3;
      res.end(tail);
    };
    writeNext();
  });
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 121_000;
server.maxConnections = Infinity;
server.listen(port, '127.0.0.1', 4096);
process.on('SIGTERM', () => process.exit(0));
