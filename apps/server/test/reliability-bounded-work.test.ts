import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../src/test-support/fake-upstream.js';
import { startTestServer, type TestServer } from '../src/test-support/test-server.js';
import { until } from './support/reliability-http.js';

/**
 * Issue #26, "one request must never stall everyone": inputs whose cost grew faster than their size, each
 * with the input that broke it. The watchdog test (`reliability-event-loop`) sends them all at once while
 * polling /healthz.
 */

/** Nothing listens there: deliveries stay pending, which is all these tests look at. */
const WEBHOOK_URL = 'http://127.0.0.1:9/hook';

let server: TestServer | undefined;
let upstream: FakeUpstream | undefined;

afterEach(async () => {
  await server?.close();
  await upstream?.close();
  server = undefined;
  upstream = undefined;
});

async function post(url: string, token: string, body: unknown): Promise<{ status: number; requestId: string; text: string; json?: any }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, requestId: res.headers.get('x-request-id') ?? '', text, json };
}

/** The `data:` payloads of an SSE body, parsed (`[DONE]` as the string). */
function sseEvents(text: string): any[] {
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => (block.slice(6) === '[DONE]' ? '[DONE]' : JSON.parse(block.slice(6))));
}

/** The delivery recorded for `requestId`, with its payload, through the deliveries API. */
async function deliveryOf(srv: TestServer, token: string, requestId: string): Promise<{ status_code: number; response_text: string; usage: any }> {
  const auth = { authorization: `Bearer ${token}` };
  const id = await until(async () => {
    const list = (await (await fetch(`${srv.url}/v1/webhooks/deliveries?limit=100`, { headers: auth })).json()) as { data: Array<{ id: string; request_id: string }> };
    return list.data.find((d) => d.request_id === requestId)?.id;
  }, 10_000, `delivery of ${requestId}`);
  const detail = (await (await fetch(`${srv.url}/v1/webhooks/deliveries/${id}`, { headers: auth })).json()) as { payload: unknown };
  return (typeof detail.payload === 'string' ? JSON.parse(detail.payload) : detail.payload) as any;
}

describe('a run of white space (svc counts the tokens itself)', () => {
  it('200 KB and 3 MB of spaces on the offline model are answered, streamed or not (200 KB took 41 s, 3 MB never returned)', async () => {
    server = await startTestServer({ env: { SVC_RATE_LIMIT_RPM: '100000' } });
    const { token } = await server.createKey({ webhookUrl: WEBHOOK_URL });
    for (const size of [200_000, 3_000_000]) {
      const messages = [{ role: 'user', content: `${' '.repeat(size)}What is this?` }];
      const plain = await post(server.url, token, { model: 'svc01', messages });
      expect(plain.status).toBe(200);
      expect(plain.json.usage.prompt_tokens).toBeGreaterThan(size / 64);
      const streamed = await post(server.url, token, { model: 'svc01', stream: true, stream_options: { include_usage: true }, messages });
      expect(streamed.status).toBe(200);
      const events = sseEvents(streamed.text);
      expect(events.at(-1)).toBe('[DONE]');
      expect(events.at(-2).usage.prompt_tokens).toBe(plain.json.usage.prompt_tokens);
    }
  });

  it('an upstream without usage: 3 MB of spaces in the message and in the answer', async () => {
    const answer = `${' '.repeat(3_000_000)}done`;
    upstream = await startFakeUpstream({ answer: () => answer, usage: false });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RATE_LIMIT_RPM: '100000' } });
    const { token } = await server.createKey({ webhookUrl: WEBHOOK_URL });
    const res = await post(server.url, token, { model: 'svc01', messages: [{ role: 'user', content: ' '.repeat(3_000_000) }], svc: { dehallucinate: false } });
    expect(res.status).toBe(200);
    expect(res.json.usage.prompt_tokens).toBeGreaterThan(3_000_000 / 64);
    expect(res.json.usage.completion_tokens).toBeGreaterThan(3_000_000 / 64);
  });
});

/** An SSE body of `text` as content deltas of `frameChars` characters each, without usage. */
function bigStream(text: string, frameChars: number, { finish }: { finish: boolean }): string[] {
  const frame = (delta: Record<string, unknown>, finishReason: string | null = null) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-big', object: 'chat.completion.chunk', created: 1, model: 'big', choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`;
  const pieces = [frame({ role: 'assistant', content: '' })];
  for (let i = 0; i < text.length; i += frameChars) pieces.push(frame({ content: text.slice(i, i + frameChars) }));
  if (finish) pieces.push(frame({}, 'stop'), 'data: [DONE]\n\n');
  return pieces;
}

describe('a very large streamed answer without usage', () => {
  // Over ~120k tokens after one long run: the old countUsage spread the token array as call arguments and threw
  // "Maximum call stack size exceeded" (as a 512 MB answer did): no [DONE], no error frame, no delivery.
  const ANSWER = `${'x'.repeat(100)} ${'word '.repeat(250_000)}`;

  it('ends with usage and [DONE], and its delivery is recorded', async () => {
    upstream = await startFakeUpstream({ rawSse: bigStream(ANSWER, 256 * 1024, { finish: true }) });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RATE_LIMIT_RPM: '100000' } });
    const { token } = await server.createKey({ webhookUrl: WEBHOOK_URL });
    const res = await post(server.url, token, {
      model: 'svc01',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Say word a lot.' }],
      svc: { dehallucinate: false },
    });
    const events = sseEvents(res.text);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.at(-2).usage.completion_tokens).toBeGreaterThan(200_000);
    const delivery = await deliveryOf(server, token, res.requestId);
    expect(delivery.status_code).toBe(200);
    expect(delivery.response_text).toBe(ANSWER);
  });

  it('cut off by the upstream: an error frame, and the delivery records the 502 with the partial text', async () => {
    upstream = await startFakeUpstream({ rawSse: bigStream(ANSWER, 256 * 1024, { finish: false }) });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RATE_LIMIT_RPM: '100000' } });
    const { token } = await server.createKey({ webhookUrl: WEBHOOK_URL });
    const res = await post(server.url, token, { model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Say word a lot.' }], svc: { dehallucinate: false } });
    const events = sseEvents(res.text);
    expect(events.at(-1).error).toMatchObject({ type: 'upstream_error', code: 'upstream_invalid_response' });
    const delivery = await deliveryOf(server, token, res.requestId);
    expect(delivery.status_code).toBe(502);
    expect(delivery.response_text).toBe(ANSWER);
    expect(server.logs.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
