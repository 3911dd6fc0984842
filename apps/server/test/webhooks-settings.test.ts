import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';
import { DashboardClient } from './support/dashboard-client.js';

/**
 * Webhook settings changes apply to pending deliveries (issue #26 §10): clearing a key's URL cancels them,
 * changing it sends their retries to the new URL, Redeliver needs a URL, and a delivery can be cancelled.
 */

let upstream: FakeUpstream;
let server: TestServer;
const receivers: Receiver[] = [];

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Hello.' });
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_RETRY_SCHEDULE: '3s,1h' } });
});

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await server?.close();
  await upstream?.close();
});

async function receiver(...args: Parameters<typeof startReceiver>) {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

async function api(token: string, method: string, path: string) {
  const res = await fetch(`${server.url}/v1${path}`, { method, headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: (await res.json()) as any };
}

async function chat(token: string) {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(res.status).toBe(200);
}

/**
 * A receiver that fails every attempt and asks for the retry an hour later (Retry-After): a delivery to it
 * stays pending with one attempt for as long as a test looks, however slowly the test runs.
 */
function failingReceiver() {
  return receiver({ status: 500, headers: { 'retry-after': '3600' } });
}

/** A key whose receiver failed its first attempt: the delivery is pending, its retry scheduled. */
async function pendingDelivery(failing: Receiver) {
  const { token, user, key } = await server.createKey({ webhookUrl: failing.url });
  await chat(token);
  const delivery = await eventually(async () => {
    const list = await api(token, 'GET', '/webhooks/deliveries');
    const d = list.body.data[0];
    return d?.attempts === 1 && d.status === 'pending' ? d : undefined;
  });
  const client = new DashboardClient(server.url);
  await client.login(user.email);
  return { token, key, client, delivery };
}

describe('changing the webhook URL', () => {
  it('cleared: pending deliveries are cancelled with the reason, and Redeliver is a 400', async () => {
    const failing = await failingReceiver();
    const { token, key, client, delivery } = await pendingDelivery(failing);
    const saved = await client.request('PATCH', `/keys/${key.id}`, { webhook_url: null });
    expect(saved.status).toBe(200);
    const after = await api(token, 'GET', `/webhooks/deliveries/${delivery.id}`);
    expect(after.body).toMatchObject({ status: 'cancelled', next_attempt_at: null, last_error: "cancelled: the key's webhook URL was removed" });
    expect((await api(token, 'GET', '/webhooks/deliveries?status=cancelled')).body.data).toHaveLength(1);

    const again = await api(token, 'POST', `/webhooks/deliveries/${delivery.id}/redeliver`);
    expect(again.status).toBe(400);
    expect(again.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/no webhook URL/) });
    const viaDashboard = await client.request('POST', `/keys/${key.id}/deliveries/${delivery.id}/redeliver`);
    expect(viaDashboard.status).toBe(400);
    expect(failing.received).toHaveLength(1);
  });

  it('changed: the pending delivery’s retry goes to the new URL', async () => {
    // The first attempt is held until the URL has changed, so its retry (3 s later) cannot come before the change.
    let fail!: () => void;
    const failing = await receiver({ status: 500, until: new Promise<void>((resolve) => (fail = resolve)) });
    const next = await receiver();
    const { token, user, key } = await server.createKey({ webhookUrl: failing.url });
    const client = new DashboardClient(server.url);
    await client.login(user.email);
    await chat(token);
    await failing.waitFor((r) => r.length === 1);
    const id = (await api(token, 'GET', '/webhooks/deliveries')).body.data[0].id as string;
    expect((await client.request('PATCH', `/keys/${key.id}`, { webhook_url: next.url })).status).toBe(200);
    expect((await api(token, 'GET', `/webhooks/deliveries/${id}`)).body).toMatchObject({ status: 'pending', url: next.url });
    fail();
    await next.waitFor((r) => r.length === 1);
    expect(next.received[0]!.headers['x-svc-delivery']).toBe(id);
    expect(failing.received).toHaveLength(1);
    const done = await eventually(async () => {
      const d = (await api(token, 'GET', `/webhooks/deliveries/${id}`)).body;
      return d.status === 'delivered' ? d : undefined;
    });
    expect(done.attempt_log).toHaveLength(2);
  });
});

describe('cancelling a delivery', () => {
  it('POST /v1/webhooks/deliveries/{id}/cancel stops a pending delivery; again is a 400; Redeliver resumes it', async () => {
    const flaky = await failingReceiver();
    const { token, delivery } = await pendingDelivery(flaky);
    const cancelled = await api(token, 'POST', `/webhooks/deliveries/${delivery.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id: delivery.id, status: 'cancelled', last_error: 'cancelled by request', next_attempt_at: null });
    const twice = await api(token, 'POST', `/webhooks/deliveries/${delivery.id}/cancel`);
    expect(twice.status).toBe(400);
    expect(twice.body.error.message).toBe(`Delivery ${delivery.id} is cancelled; only pending deliveries can be cancelled.`);
    expect((await api(token, 'POST', '/webhooks/deliveries/whd_00000000000000000000000000000000/cancel')).status).toBe(404);

    flaky.fallback = { status: 200 };
    expect((await api(token, 'POST', `/webhooks/deliveries/${delivery.id}/redeliver`)).status).toBe(202);
    await eventually(async () => (await api(token, 'GET', `/webhooks/deliveries/${delivery.id}`)).body.status === 'delivered');
    expect(flaky.received).toHaveLength(2);
  });

  it('the dashboard cancels too; another user’s delivery is a 404', async () => {
    const failing = await failingReceiver();
    const { key, client, delivery } = await pendingDelivery(failing);
    const other = await server.createKey();
    const stranger = new DashboardClient(server.url);
    await stranger.login(other.user.email);
    expect((await stranger.request('POST', `/keys/${key.id}/deliveries/${delivery.id}/cancel`)).status).toBe(404);
    const res = await client.request('POST', `/keys/${key.id}/deliveries/${delivery.id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'cancelled' });
  });

  it('cancelled while its attempt is in flight: the attempt is logged, the delivery stays cancelled', async () => {
    let answer!: () => void;
    const held = new Promise<void>((resolve) => (answer = resolve));
    const slow = await receiver({ status: 500, until: held });
    const { token } = await server.createKey({ webhookUrl: slow.url });
    await chat(token);
    await slow.waitFor((r) => r.length === 1);
    const id = (await api(token, 'GET', '/webhooks/deliveries')).body.data[0].id as string;
    expect((await api(token, 'POST', `/webhooks/deliveries/${id}/cancel`)).status).toBe(200);
    answer();
    const detail = await eventually(async () => {
      const d = (await api(token, 'GET', `/webhooks/deliveries/${id}`)).body;
      return d.attempt_log.length === 1 ? d : undefined;
    });
    expect(detail).toMatchObject({ status: 'cancelled', last_error: 'cancelled by request', next_attempt_at: null, last_status_code: 500 });
  });
});

describe('test sends', () => {
  it('at most 4 of a key wait on its receiver at once; the next is a 429 with retry-after, and goes once one ended', async () => {
    // Was unbounded: 150 test sends to a receiver that never answers held 150 connections for the whole timeout.
    const hung = await receiver();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    hung.fallback = { until: held };
    const { token } = await server.createKey({ webhookUrl: hung.url });
    const waiting = Array.from({ length: 4 }, () => api(token, 'POST', '/webhooks/test'));
    await hung.waitFor((list) => list.length === 4);
    const refused = await fetch(`${server.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await refused.json()) as any).error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    // Another key's test is not held up by this one's.
    const other = await receiver();
    const { token: otherToken } = await server.createKey({ webhookUrl: other.url });
    expect((await api(otherToken, 'POST', '/webhooks/test')).body).toMatchObject({ success: true });
    release();
    for (const result of await Promise.all(waiting)) expect(result.body).toMatchObject({ success: true });
    hung.fallback = {};
    expect((await api(token, 'POST', '/webhooks/test')).body).toMatchObject({ success: true });
  });
});
