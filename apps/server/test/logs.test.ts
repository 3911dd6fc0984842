import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';
import { postChat } from './support/reliability-http.js';

const SECRET = 'whsec_log-test-secret-Qm9vJ3Rj';
const PROMPT_MARKER = 'prompt-marker-4f1c9a';
const ANSWER_MARKER = 'answer-marker-7d2e5b';

let upstream: FakeUpstream;
let receiver: Receiver;
let server: TestServer;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: `Here you are: ${ANSWER_MARKER}.` });
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_LOG_LEVEL: 'info' } });
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

async function post(path: string, token: string, body?: unknown): Promise<Response> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res;
}

type Line = Record<string, unknown>;
const parsed = (from: number): Line[] => server.logs.slice(from).map((line) => JSON.parse(line) as Line);

describe('logs', () => {
  it('one line per request and per delivery attempt, with ids, status, latency and tokens; never keys, secrets, prompts or answers', async () => {
    const from = server.logs.length;
    const { token, key } = await server.createKey({ webhookUrl: receiver.url, signingSecret: SECRET });
    const body = { model: 'svc01', messages: [{ role: 'user', content: `Tell me about ${PROMPT_MARKER}.` }] };

    const ok = await post('/v1/chat/completions', token, body);
    expect(ok.status).toBe(200);
    const okId = ok.headers.get('x-request-id');
    expect((await post('/v1/chat/completions', token, { ...body, stream: true })).status).toBe(200);
    upstream.nextBehavior({ status: 500, errorMessage: 'upstream is down' });
    expect((await post('/v1/chat/completions', token, body)).status).toBe(502);
    expect((await post('/v1/chat/completions', token, { ...body, model: PROMPT_MARKER })).status).toBe(404);
    expect((await post('/v1/webhooks/test', token)).status).toBe(200);
    // Four audited requests (200, 200, 502, 404) and the test delivery.
    await receiver.waitFor((received) => received.length >= 5);
    const lines = await eventually(() => {
      const all = parsed(from);
      return all.filter((l) => l.msg === 'webhook delivered').length >= 5 ? all : undefined;
    });

    const text = server.logs.slice(from).join('\n');
    expect(text).not.toContain(token);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(PROMPT_MARKER);
    expect(text).not.toContain(ANSWER_MARKER);

    const requests = lines.filter((l) => l.msg === 'request' && l.method === 'POST');
    expect(requests).toHaveLength(5);
    const okLine = requests.find((l) => l.request_id === okId)!;
    expect(okLine).toMatchObject({ level: 30, status: 200, key_prefix: key.prefix });
    expect(okLine.latency_ms).toEqual(expect.any(Number));
    expect(okLine.upstream_latency_ms).toEqual(expect.any(Number));
    expect(okLine.tokens).toBeGreaterThan(0);
    expect(requests.map((l) => l.status).sort()).toEqual([200, 200, 200, 404, 502]);
    // A failed request's line names its error; a served one has none.
    expect(requests.map((l) => `${l.status} ${l.error}`).sort()).toEqual(['200 undefined', '200 undefined', '200 undefined', '404 model_not_found', '502 upstream_error']);
    expect(requests.map((l) => l.path).sort()).toEqual([...Array(4).fill('/v1/chat/completions'), '/v1/webhooks/test']);
    // Every request that reached the upstream (not the 404) says how long the upstream took.
    for (const line of requests.filter((l) => l.path === '/v1/chat/completions' && l.status !== 404)) {
      expect(line.upstream_latency_ms, JSON.stringify(line)).toEqual(expect.any(Number));
      expect(line.key_prefix).toBe(key.prefix);
    }

    const attempts = lines.filter((l) => l.msg === 'webhook delivered');
    expect(attempts).toHaveLength(5);
    for (const attempt of attempts) {
      expect(attempt.delivery_id).toMatch(/^whd_[0-9a-f]{32}$/);
      expect(attempt).toMatchObject({ status_code: 200, outcome: 'success' });
      expect(attempt.duration_ms).toEqual(expect.any(Number));
    }
  });

  it("names the error that ended a stream after its 200 went out", async () => {
    const from = server.logs.length;
    const { token } = await server.createKey();
    upstream.nextBehavior({ errorEvent: true, errorMessage: 'the model fell over' });
    const res = await post('/v1/chat/completions', token, { model: 'svc01', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(200);
    const line = await eventually(() => parsed(from).find((l) => l.msg === 'request' && l.method === 'POST'));
    expect(line).toMatchObject({ status: 200, error: 'upstream_error' });
  });

  it('logs a failed delivery attempt with its status code and outcome', async () => {
    const from = server.logs.length;
    const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: SECRET });
    receiver.queue.push({ status: 503, body: `receiver body ${ANSWER_MARKER}` });
    expect((await post('/v1/webhooks/test', token)).status).toBe(200);
    const failed = parsed(from).find((l) => l.msg === 'webhook attempt failed');
    expect(failed).toMatchObject({ status_code: 503, outcome: 'failure', level: 40 });
    expect(failed?.delivery_id).toMatch(/^whd_/);
    const text = server.logs.slice(from).join('\n');
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(token);
    expect(text).not.toContain(ANSWER_MARKER);
  });
});

describe('a client that goes away mid-stream', () => {
  it('still gets its request line, with status 499', async () => {
    const from = server.logs.length;
    const { token } = await server.createKey();
    upstream.nextBehavior({ answer: 'one two three four five six seven eight', trickle: { intervalMs: 100 } });
    const abort = new AbortController();
    const res = await postChat(server.url, token, { stream: true, content: 'count', signal: abort.signal });
    const reader = res.body!.getReader();
    await reader.read();
    abort.abort();
    const line = await eventually(() => parsed(from).find((l) => l.msg === 'request' && l.path === '/v1/chat/completions'));
    expect(line).toMatchObject({ status: 499, method: 'POST' });
    expect(line.latency_ms).toEqual(expect.any(Number));
  });
});
