// The bench's OpenAI-compatible upstream. All bytes are prebuilt, so it costs as little as possible.
//
//   node fake-upstream.mjs PORT                                  zero latency: the fixed ~200-token answer of
//                                                                fixtures.mjs, or the same answer streamed in
//                                                                20 SSE chunks, all written at once
//   node fake-upstream.mjs --rate R --tokens T [--jitter J] PORT at a model's pace: T one-word tokens, one per
//                                                                1/R s (each gap within ±J of it, 0 ≤ J < 1);
//                                                                the first goes out with the headers; a
//                                                                non-streamed answer comes after the same time
//
//   … --big-answers FILE                                        a request whose body holds `bench-big-I` gets
//                                                                answer I of FILE (a JSON array of strings) at
//                                                                once, streamed in 64-character deltas or whole
//   … --tls h1|h2 --cert FILE --key FILE --tls-port P2 PORT    also serves chat completions over TLS on P2,
//                                                                offering by ALPN h2 and http/1.1 (h2) or only
//                                                                http/1.1 (h1); PORT stays plain HTTP (/stats)
//
// A stream ends with a finish chunk, a usage chunk and [DONE]. GET /stats → { open, peakOpen, streams, frames,
// sessions }: requests open now and at most, streams started, frames written and HTTP/2 sessions accepted so far.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import { parseArgs } from 'node:util';
import { ANSWER, USAGE, answerPieces } from './fixtures.mjs';

const { values: opts, positionals } = parseArgs({
  options: {
    rate: { type: 'string' },
    tokens: { type: 'string' },
    jitter: { type: 'string', default: '0' },
    tls: { type: 'string' },
    cert: { type: 'string' },
    key: { type: 'string' },
    'tls-port': { type: 'string' },
    'big-answers': { type: 'string' },
  },
  allowPositionals: true,
});
const paced = opts.rate !== undefined;
const rate = Number(opts.rate);
const tokens = Number(opts.tokens);
const jitter = Number(opts.jitter);
if (paced && !(rate > 0 && tokens >= 1 && jitter >= 0 && jitter < 1)) {
  throw new Error('usage: fake-upstream.mjs [--rate R --tokens T [--jitter J]] PORT (R > 0, T ≥ 1, 0 ≤ J < 1)');
}

const created = Math.floor(Date.now() / 1000);
const id = 'chatcmpl-fakeupstream0001';
const model = 'gpt-4o-mini-2024-07-18';
const pieces = paced ? Array.from({ length: tokens }, (_, i) => `${i === 0 ? '' : ' '}w${i}`) : answerPieces(20);
const usage = paced ? { prompt_tokens: 12, completion_tokens: tokens, total_tokens: tokens + 12 } : USAGE;

const completion = Buffer.from(
  JSON.stringify({
    id,
    object: 'chat.completion',
    created,
    model,
    system_fingerprint: 'fp_bench',
    choices: [{ index: 0, message: { role: 'assistant', content: paced ? pieces.join('') : ANSWER, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage,
  }),
);
const chunk = (choices, extra = {}) =>
  Buffer.from(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_bench', choices, ...extra })}\n\n`);
const contentFrames = pieces.map((content, i) =>
  chunk([{ index: 0, delta: i === 0 ? { role: 'assistant', content } : { content }, logprobs: null, finish_reason: null }]),
);
const tailFrames = [chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]), chunk([], { usage }), Buffer.from('data: [DONE]\n\n')];
const tail = Buffer.concat(tailFrames);
const allFrames = [...contentFrames, ...tailFrames];

const gapMs = 1000 / rate;
const nextGap = () => gapMs * (1 + jitter * (2 * Math.random() - 1));

/** `--big-answers`: each answer's JSON body and SSE frames, prebuilt. */
const bigAnswers = (opts['big-answers'] ? JSON.parse(readFileSync(opts['big-answers'], 'utf8')) : []).map((text) => {
  const bigUsage = { prompt_tokens: 100_000, completion_tokens: Math.ceil(text.length / 4), total_tokens: 100_000 + Math.ceil(text.length / 4) };
  const json = Buffer.from(
    JSON.stringify({ id, object: 'chat.completion', created, model, choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: 'stop' }], usage: bigUsage }),
  );
  const frames = [];
  for (let i = 0; i < text.length; i += 64) frames.push(chunk([{ index: 0, delta: i === 0 ? { role: 'assistant', content: text.slice(i, i + 64) } : { content: text.slice(i, i + 64) }, logprobs: null, finish_reason: null }]));
  frames.push(tailFrames[0], chunk([], { usage: bigUsage }), tailFrames[2]);
  return { json, sse: Buffer.concat(frames) };
});
const BIG_MARK = Buffer.from('bench-big-');

let open = 0;
let peakOpen = 0;
let sessions = 0;
let streams = 0;
let frames = 0;

/** The whole answer at once: what `npm run bench` measures the gateways' own cost against. */
function answerAtOnce(res, stream) {
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': completion.length }).end(completion);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const frame of allFrames) res.write(frame);
  res.end();
  frames += allFrames.length;
}

/** One token per gap, one timer per open request. */
function answerPaced(res, stream) {
  open += 1;
  peakOpen = Math.max(peakOpen, open);
  let timer;
  res.once('close', () => {
    open -= 1;
    clearTimeout(timer);
  });
  // An HTTP/2 compatibility response has no `destroyed`; its stream has.
  const gone = res.stream ? () => res.stream.destroyed : () => res.destroyed;
  if (!stream) {
    timer = setTimeout(() => res.writeHead(200, { 'content-type': 'application/json', 'content-length': completion.length }).end(completion), gapMs * (tokens - 1));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let next = 0;
  const writeNext = () => {
    if (gone()) return;
    res.write(contentFrames[next++]);
    frames += 1;
    if (next < contentFrames.length) {
      timer = setTimeout(writeNext, nextGap());
      return;
    }
    frames += tailFrames.length;
    res.end(tail);
  };
  writeNext();
}

function onRequest(req, res) {
  if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
    if (req.url === '/stats') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ open, peakOpen, streams, frames, sessions }));
    else res.writeHead(req.url === '/healthz' ? 200 : 404).end();
    return;
  }
  const parts = [];
  req.on('data', (d) => parts.push(d));
  req.on('end', () => {
    // A byte search instead of a JSON parse: the upstream should cost as little as possible.
    const body = Buffer.concat(parts);
    const stream = body.includes('"stream":true');
    const big = bigAnswers.length > 0 ? body.lastIndexOf(BIG_MARK) : -1;
    if (big !== -1) {
      const answer = bigAnswers[Number.parseInt(body.subarray(big + BIG_MARK.length, big + BIG_MARK.length + 6).toString(), 10) % bigAnswers.length];
      if (stream) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }).end(answer.sse);
      else res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.json.length }).end(answer.json);
      return;
    }
    if (stream) streams += 1;
    (paced ? answerPaced : answerAtOnce)(res, stream);
  });
}

const server = http.createServer(onRequest);
server.keepAliveTimeout = 120_000;
server.headersTimeout = 121_000;
server.maxConnections = Infinity;
server.listen(Number(positionals[0] ?? 0), '127.0.0.1', 4096, () => {
  process.stdout.write(`ready ${server.address().port}\n`);
});
if (opts.tls) {
  const tls = { cert: readFileSync(opts.cert), key: readFileSync(opts.key) };
  // node:http2 always offers h2 by ALPN (and http/1.1 with allowHTTP1); one offering only http/1.1 is node:https.
  const secure =
    opts.tls === 'h2'
      ? http2.createSecureServer({ ...tls, allowHTTP1: true, settings: { maxConcurrentStreams: 1000 } }, onRequest)
      : https.createServer(tls, onRequest);
  secure.on('session', () => {
    sessions += 1;
  });
  secure.keepAliveTimeout = 120_000;
  secure.headersTimeout = 121_000;
  secure.listen(Number(opts['tls-port']), '127.0.0.1', 4096);
}
process.on('SIGTERM', () => process.exit(0));
