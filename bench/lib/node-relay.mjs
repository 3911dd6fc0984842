// The floor under any Node gateway: a bare node:http server relaying to the fake upstream through undici,
// with nothing else (no auth, no validation, no logging, no metrics). Started (`startNodeRelay` in
// helpers.mjs) by `npm run bench` as the target `node-relay`, by `npm run bench:streams` and by
// `bench/feature-floor.mjs`. A non-streamed answer is parsed, its id and model replaced, and re-serialised; a
// stream's SSE frames are each JSON.parse'd, id and model replaced, and JSON.stringify'd (what any gateway that
// reads the frames pays at least): the mode `frames`.
// Two features of svc can be added to it (`frames+grounding` …), each done the least
// costly way that still does it, so that what they cost on top of the bare relay is a floor too:
//   +grounding: the answer's text is kept and `checkGrounding` (@svc/grounding, the check svc runs, with its
//               source-index cache) runs on it against the messages svc takes as sources when the first
//               choice finishes;
//               its result goes out as `svc` on that frame (or on the JSON answer);
//   +webhook:   once the response is sent, an audit payload of svc's shape (prompt, answer, usage, score) is
//               serialised, signed with HMAC-SHA256 and POSTed to WEBHOOK_URL through an undici Pool; the
//               answer is read and dropped. Nothing is stored and nothing retried (svc records each
//               delivery in a durable outbox and each attempt after it: more work, not less).
//   +features:  both.
//
//   node bench/lib/node-relay.mjs MODE UPSTREAM_PORT [WEBHOOK_URL] PORT
import http from 'node:http';
import { createHmac, randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { checkGrounding, SourceIndexCache } from '@svc/grounding';

const args = process.argv.slice(2);
const [mode, upstreamPort] = args;
const port = args.at(-1);
const webhookUrl = args.length === 4 ? new URL(args[2]) : undefined;
const [relayMode, feature = ''] = mode.split('+');
const grounding = feature === 'grounding' || feature === 'features';
const webhook = feature === 'webhook' || feature === 'features';
if (relayMode !== 'frames' || !['', 'grounding', 'webhook', 'features'].includes(feature)) throw new Error(`unknown mode ${mode}`);
if (webhook && !webhookUrl) throw new Error('+webhook needs WEBHOOK_URL');

// No cap on connections: a fixed pool queues the stream past it unseen (streams at a model's pace hold
// their connection for seconds).
const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: null, pipelining: 1 });
const hooks = webhook ? new Pool(webhookUrl.origin, { connections: 128, pipelining: 1 }) : undefined;
const SECRET = Buffer.from('whsec_node-relay-secret', 'utf8');
const sourceIndexCache = new SourceIndexCache();
const headers = { 'content-type': 'application/json', authorization: 'Bearer x' };

/** The `svc` object of an answer to `request` (svc's offline check, its result shaped as svc sends it). */
function svcOf(request, answer) {
  const messages = request.messages;
  const sources = [];
  let question;
  // As svc takes them (its groundingSources and lastUserText): every system, developer, user and tool
  // message's text is a source; the last user message is the question.
  for (const m of messages) {
    if (typeof m.content !== 'string' || m.content.trim() === '') continue;
    if (m.role === 'system' || m.role === 'developer' || m.role === 'user' || m.role === 'tool') sources.push(m.content);
    if (m.role === 'user') question = m.content;
  }
  const r = checkGrounding({ sources, answer, question }, { sourceIndexCache });
  return { dehallucinate_requested: true, grounded: r.grounded, score: r.score, flagged_spans: r.flaggedSpans, checked: r.checked };
}

/** Sends the audit webhook of one request: payload, signature, POST; the receiver's answer is dropped. */
function deliver(request, answer, usage, svc, startedAt, streaming) {
  const finishedAt = Date.now();
  const body = JSON.stringify({
    event: 'llm.request.completed',
    request_id: `chatcmpl-${randomUUID()}`,
    timestamp: new Date(finishedAt).toISOString(),
    user_id: 'usr_relay',
    model: 'svc01',
    input_tokens: usage?.prompt_tokens ?? 0,
    output_tokens: usage?.completion_tokens ?? 0,
    total_tokens: usage?.total_tokens ?? 0,
    latency_ms: finishedAt - startedAt,
    status_code: 200,
    streaming,
    prompt: request.messages.map((m) => `${m.role}: ${m.content}`).join('\n'),
    response_text: answer,
    grounded: svc ? svc.grounded : true,
    hallucination_score: svc ? 1 - svc.score : 0,
  });
  const bytes = Buffer.from(body);
  const signature = `sha256=${createHmac('sha256', SECRET).update(bytes).digest('hex')}`;
  hooks
    .request({
      path: webhookUrl.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(bytes.length), 'x-svc-signature': signature, 'x-svc-event': 'llm.request.completed' },
      body: bytes,
    })
    .then((res) => res.body.dump())
    .catch(() => {});
}

const server = http.createServer((req, res) => {
  const startedAt = Date.now();
  const parts = [];
  req.on('data', (part) => parts.push(part));
  req.on('end', async () => {
    // The client's body goes upstream as received (as Portkey sends it), parsed once for `stream`.
    const body = Buffer.concat(parts).toString();
    let request;
    try {
      request = JSON.parse(body);
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"the body is not JSON"}}');
      return;
    }
    const stream = request.stream === true;
    try {
      const upstream = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body });
      if (!stream) {
        const answer = await upstream.body.json();
        answer.id = 'chatcmpl-relay';
        answer.model = 'relay';
        const text = answer.choices?.[0]?.message?.content ?? '';
        const svc = grounding ? svcOf(request, text) : undefined;
        if (svc) answer.svc = svc;
        const out = JSON.stringify(answer);
        res.writeHead(upstream.statusCode, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
        res.end(out);
        if (webhook) deliver(request, text, answer.usage, svc, startedAt, false);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const decoder = new TextDecoder();
      let pending = '';
      let text = '';
      let usage;
      let svc;
      for await (const part of upstream.body) {
        pending += decoder.decode(part, { stream: true });
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
          if (frame.usage) usage = frame.usage;
          const choice = frame.choices?.[0];
          if (choice && choice.index === 0) {
            if (typeof choice.delta?.content === 'string') text += choice.delta.content;
            if (grounding && choice.finish_reason) frame.svc = svc = svcOf(request, text);
          }
          out += `data: ${JSON.stringify(frame)}\n\n`;
        }
        if (out) res.write(out);
      }
      res.end();
      if (webhook) deliver(request, text, usage, svc, startedAt, true);
    } catch (err) {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: String(err?.message ?? err) } }));
    }
  });
});
server.listen(Number(port), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
