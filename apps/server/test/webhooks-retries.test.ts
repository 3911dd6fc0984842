import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import {
  AuditPayloadSchema,
  DeliveryDetailSchema,
  DeliveryListSchema,
  DeliverySchema,
  WebhookTestResultSchema,
  type DeliveryDetail,
} from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver, type ReceiverReply } from './support/webhooks.js';

const TIMEOUT_MS = 500;

let upstream: FakeUpstream;
let server: TestServer;
const receivers: Receiver[] = [];

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Hello.' });
  server = await startTestServer({
    env: {
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_WEBHOOK_RETRY_SCHEDULE: '100ms,200ms',
      SVC_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    },
  });
});

afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

async function setup(replies: ReceiverReply[], fallback: ReceiverReply = {}, options: { signingSecret?: string } = {}) {
  const receiver = await startReceiver(fallback);
  receivers.push(receiver);
  receiver.queue.push(...replies);
  const { token, key } = await server.createKey({ webhookUrl: receiver.url, signingSecret: options.signingSecret ?? null });
  const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
  const api = async (method: string, path: string) => {
    const res = await fetch(`${server.url}/v1/webhooks${path}`, { method, headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return { receiver, token, key, client, api };
}

async function chat(client: OpenAI): Promise<string> {
  const completion = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
  return completion.id;
}

/** The only delivery of a fresh key, once it reached `status`. */
async function settled(api: Awaited<ReturnType<typeof setup>>['api'], status: string): Promise<DeliveryDetail> {
  return eventually(async () => {
    const list = DeliveryListSchema.parse((await api('GET', '/deliveries')).body);
    const first = list.data[0];
    if (first?.status !== status) return undefined;
    return DeliveryDetailSchema.parse((await api('GET', `/deliveries/${first.id}`)).body);
  });
}

const gap = (d: DeliveryDetail, i: number) => Date.parse(d.attempt_log[i]!.attempted_at) - Date.parse(d.attempt_log[i - 1]!.attempted_at);

describe('retries', () => {
  it('retries a 500 per the schedule with the same bytes and delivery id, then records success', async () => {
    const { receiver, client, api, key } = await setup([{ status: 500, body: 'boom' }]);
    const requestId = await chat(client);
    const detail = await settled(api, 'delivered');
    expect(detail.request_id).toBe(requestId);
    expect(detail.attempts).toBe(2);
    expect(detail.attempt_log.map((a) => [a.attempt, a.status_code, a.error, a.response_body])).toEqual([
      [1, 500, 'HTTP 500', 'boom'],
      [2, 200, null, 'ok'],
    ]);
    // The first retry waits 100 ms ± 20 %.
    expect(gap(detail, 1)).toBeGreaterThanOrEqual(80);
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[1]!.raw.equals(receiver.received[0]!.raw)).toBe(true);
    expect(receiver.received[1]!.headers['x-svc-delivery']).toBe(detail.id);
    expect(receiver.received[0]!.headers['x-svc-delivery']).toBe(detail.id);
    expect(detail.payload).toBe(receiver.received[0]!.raw.toString('utf8'));
    const stored = await server.running.store.keys.byId(key.id);
    expect(stored).toMatchObject({ last_delivery_outcome: 'success', last_delivery_status_code: 200, last_delivery_error: null });
  });

  it('marks a delivery failed after the last scheduled attempt; redeliver sends the same bytes again', async () => {
    const { receiver, client, api, key } = await setup([], { status: 503, body: 'down' });
    await chat(client);
    const failed = await settled(api, 'failed');
    expect(failed.attempts).toBe(3);
    expect(failed.attempt_log.map((a) => a.status_code)).toEqual([503, 503, 503]);
    expect(gap(failed, 2)).toBeGreaterThanOrEqual(160);
    expect(failed.next_attempt_at).toBeNull();
    expect(await server.running.store.keys.byId(key.id)).toMatchObject({
      last_delivery_outcome: 'failure',
      last_delivery_status_code: 503,
      last_delivery_error: 'HTTP 503',
    });

    receiver.fallback = {};
    const redeliver = await api('POST', `/deliveries/${failed.id}/redeliver`);
    expect(redeliver.status).toBe(202);
    expect(DeliverySchema.parse(redeliver.body)).toMatchObject({ id: failed.id, status: 'pending' });
    const delivered = await settled(api, 'delivered');
    expect(delivered.id).toBe(failed.id);
    expect(delivered.attempts).toBe(4);
    expect(receiver.received).toHaveLength(4);
    expect(receiver.received[3]!.raw.equals(receiver.received[0]!.raw)).toBe(true);
    expect(receiver.received[3]!.headers['x-svc-delivery']).toBe(failed.id);
    expect(await server.running.store.keys.byId(key.id)).toMatchObject({ last_delivery_outcome: 'success', last_delivery_status_code: 200 });
  });

  it('gives up on a receiver that hangs after SVC_WEBHOOK_TIMEOUT_MS and retries', async () => {
    const { client, api } = await setup([{ hang: true }]);
    await chat(client);
    const detail = await settled(api, 'delivered');
    expect(detail.attempt_log[0]).toMatchObject({ status_code: null, error: `timed out after ${TIMEOUT_MS} ms`, response_body: null });
    expect(detail.attempt_log[0]!.duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(detail.attempt_log[1]!.status_code).toBe(200);
  });

  it('records a connection reset as a failed attempt and retries', async () => {
    const { client, api } = await setup([{ reset: true }]);
    await chat(client);
    const detail = await settled(api, 'delivered');
    expect(detail.attempt_log[0]!.status_code).toBeNull();
    expect(detail.attempt_log[0]!.error).toMatch(/ECONNRESET|other side closed|socket hang up|closed/i);
  });

  it('does not follow a 302: it is a failure', async () => {
    const { receiver, client, api } = await setup([], { status: 302, headers: { location: '/elsewhere' } });
    await chat(client);
    const detail = await settled(api, 'failed');
    expect(detail.attempt_log.map((a) => a.error)).toEqual(Array(3).fill('HTTP 302 (redirects are not followed: it points to /elsewhere)'));
    expect(receiver.received.every((r) => r.headers['x-svc-delivery'] === detail.id)).toBe(true);
    expect(receiver.received).toHaveLength(3);
  });

  it('honours a Retry-After longer than the schedule', async () => {
    const { client, api } = await setup([{ status: 429, headers: { 'retry-after': '1' } }]);
    await chat(client);
    const detail = await settled(api, 'delivered');
    expect(detail.attempt_log[0]!.status_code).toBe(429);
    expect(gap(detail, 1)).toBeGreaterThanOrEqual(990);
  });
});

describe('deliveries API', () => {
  it('lists newest first with limit, cursor and status filter, scoped to the key', async () => {
    const { client, api } = await setup([]);
    const ids = [await chat(client), await chat(client), await chat(client)];
    await eventually(async () => {
      const list = DeliveryListSchema.parse((await api('GET', '/deliveries?status=delivered')).body);
      return list.data.length === 3;
    });
    const page1 = DeliveryListSchema.parse((await api('GET', '/deliveries?limit=2')).body);
    expect(page1.data.map((d) => d.request_id)).toEqual([ids[2], ids[1]]);
    expect(page1.has_more).toBe(true);
    const page2 = DeliveryListSchema.parse((await api('GET', `/deliveries?limit=2&before=${page1.next_cursor}`)).body);
    expect(page2.data.map((d) => d.request_id)).toEqual([ids[0]]);
    expect(page2).toMatchObject({ has_more: false, next_cursor: null });
    expect(DeliveryListSchema.parse((await api('GET', '/deliveries?status=failed')).body).data).toHaveLength(0);

    const other = await setup([]);
    expect(DeliveryListSchema.parse((await other.api('GET', '/deliveries')).body).data).toHaveLength(0);
    const theirs = page1.data[0]!.id;
    for (const [method, path] of [['GET', `/deliveries/${theirs}`], ['POST', `/deliveries/${theirs}/redeliver`], ['POST', `/deliveries/${theirs}/cancel`]] as const) {
      const res = await other.api(method, path);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: { type: 'invalid_request_error', code: 'not_found' } });
    }
  });

  it('rejects bad query values with 400 invalid_value naming the parameter', async () => {
    const { api } = await setup([]);
    for (const [query, param] of [['limit=0', 'limit'], ['limit=abc', 'limit'], ['limit=101', 'limit'], ['status=sent', 'status'], ['before=nope', 'before']]) {
      const res = await api('GET', `/deliveries?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body, query).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_value', param } });
    }
  });
});

describe('POST /v1/webhooks/test', () => {
  it('sends a signed test payload and reports success; the attempt shows in the log and last status', async () => {
    const secret = 'whsec_test-endpoint';
    const { receiver, api, key, token } = await setup([], {}, { signingSecret: secret });
    const res = await api('POST', '/test');
    expect(res.status).toBe(200);
    expect(WebhookTestResultSchema.parse(res.body)).toEqual({ success: true, delivered_to: receiver.url });
    expect(receiver.received).toHaveLength(1);
    const entry = receiver.received[0]!;
    const payload = AuditPayloadSchema.parse(JSON.parse(entry.raw.toString('utf8')));
    expect(payload.test).toBe(true);
    expect(payload.request_id).toBe(`test-${entry.headers['x-svc-delivery']}`);
    expect(payload.user_id).toBe(key.user_id);
    const { signBody } = await import('../src/webhooks/signer.js');
    expect(entry.headers['x-svc-signature']).toBe(signBody(entry.raw, secret));
    const list = DeliveryListSchema.parse((await api('GET', '/deliveries')).body);
    expect(list.data[0]).toMatchObject({ request_id: payload.request_id, status: 'delivered', attempts: 1 });
    expect(await server.running.store.keys.byId(key.id)).toMatchObject({ last_delivery_outcome: 'success', last_delivery_status_code: 200 });
    expect(token).toBeTruthy();
  });

  it('reports a receiver failure with success: false, the status code, the error and its answer, without retrying', async () => {
    const { receiver, api } = await setup([], { status: 500, body: 'nope' });
    const res = await api('POST', '/test');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: false, delivered_to: receiver.url, status_code: 500, error: 'HTTP 500', response_body: 'nope' });
    const list = DeliveryListSchema.parse((await api('GET', '/deliveries')).body);
    expect(list.data[0]).toMatchObject({ status: 'failed', attempts: 1, last_status_code: 500 });
  });

  it("a refused test says why in the receiver's words: the first 2 KB of its answer, as the attempt log keeps it", async () => {
    const why = JSON.stringify({ error: { message: 'X-Svc-Signature does not match: is the secret the key\'s?', code: 'signature_mismatch' } });
    const { receiver, api } = await setup([{ status: 401, body: why }, { status: 400, body: `${why}${'x'.repeat(5000)}` }]);
    const refused = await api('POST', '/test');
    expect(WebhookTestResultSchema.parse(refused.body)).toEqual({ success: false, delivered_to: receiver.url, status_code: 401, error: 'HTTP 401', response_body: why });
    const long = await api('POST', '/test');
    expect(long.body).toMatchObject({ success: false, status_code: 400 });
    expect(long.body.response_body).toBe(`${why}${'x'.repeat(2048 - why.length)}`);
    const detail = await settled(api, 'failed');
    expect(detail.attempt_log[0]!.response_body).toBe(long.body.response_body);
  });

  it('a test with no answer (connection dropped) has response_body null', async () => {
    const { api } = await setup([], { reset: true });
    const res = await api('POST', '/test');
    expect(res.body).toMatchObject({ success: false, status_code: null, response_body: null });
  });

  it('a redelivered test delivery gets one attempt, alone or in bulk: failed again, not retrying', async () => {
    const { receiver, api, token } = await setup([], { status: 500, body: 'nope' });
    await api('POST', '/test');
    const first = await settled(api, 'failed');
    const redeliver = await api('POST', `/deliveries/${first.id}/redeliver`);
    expect(redeliver.status).toBe(202);
    const again = await settled(api, 'failed');
    expect(again).toMatchObject({ id: first.id, attempts: 2, next_attempt_at: null });
    const bulk = await fetch(`${server.url}/v1/webhooks/deliveries/redeliver`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ status: 'failed' }),
    });
    expect(await bulk.json()).toMatchObject({ redelivered: 1 });
    const third = await settled(api, 'failed');
    expect(third).toMatchObject({ id: first.id, attempts: 3, next_attempt_at: null });
    expect(third.attempt_log.map((a) => a.status_code)).toEqual([500, 500, 500]);
    expect(receiver.received).toHaveLength(3);
  });

  it('answers 400 invalid_request without param when the key has no webhook URL', async () => {
    const { token } = await server.createKey({ webhookUrl: null });
    const res = await fetch(`${server.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(body).toEqual({
      error: {
        message: 'No webhook URL is configured for this API key. Set one in the dashboard under Settings, API Keys (or with svc-server keys update KEY --webhook-url URL), then try again.',
        type: 'invalid_request_error',
        code: 'invalid_request',
      },
    });
    expect('param' in body.error).toBe(false);
  });
});
