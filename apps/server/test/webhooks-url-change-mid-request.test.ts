import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';
import { DashboardClient } from './support/dashboard-client.js';

/**
 * A key's webhook URL changed or removed (the dashboard's Save) while one of its requests is still being answered (a
 * long completion, a background response that runs for minutes): that request's delivery goes where the key says when
 * it is recorded, not to the URL the key had when the request arrived, which the user has just replaced or removed.
 */

let upstream: FakeUpstream;
let server: TestServer;
const receivers: Receiver[] = [];

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Hello.' });
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
});

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await server?.close();
  await upstream?.close();
});

async function receiver() {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

/** A key pointed at `old`, its user signed in to the dashboard, and one chat request held at the upstream until `answer()`. */
async function requestInFlight(old: Receiver) {
  const { token, user, key } = await server.createKey({ webhookUrl: old.url });
  const client = new DashboardClient(server.url);
  await client.login(user.email);
  let answer!: () => void;
  const asked = upstream.requests.length;
  upstream.nextBehavior({ answer: 'Hello.', holdUntil: new Promise<void>((resolve) => (answer = resolve)) });
  const response = fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await eventually(() => upstream.requests.length > asked || undefined);
  return { token, key, client, answer, response };
}

async function deliveries(token: string): Promise<Array<{ id: string; url: string | null; status: string }>> {
  const res = await fetch(`${server.url}/v1/webhooks/deliveries`, { headers: { authorization: `Bearer ${token}` } });
  return ((await res.json()) as { data: Array<{ id: string; url: string | null; status: string }> }).data;
}

describe('a webhook URL changed while a request is being answered', () => {
  it('changed: the request’s delivery goes to the new URL, none to the old one', async () => {
    const old = await receiver();
    const next = await receiver();
    const { token, key, client, answer, response } = await requestInFlight(old);
    expect((await client.request('PATCH', `/keys/${key.id}`, { webhook_url: next.url })).status).toBe(200);
    answer();
    expect((await response).status).toBe(200);
    await next.waitFor((r) => r.length === 1);
    const [delivery] = await eventually(async () => {
      const list = await deliveries(token);
      return list[0]?.status === 'delivered' ? list : undefined;
    });
    expect(delivery).toMatchObject({ url: next.url });
    expect(next.received[0]!.headers['x-svc-delivery']).toBe(delivery!.id);
    expect(old.received).toEqual([]);
  });

  it('removed: the request’s delivery is sent nowhere', async () => {
    const old = await receiver();
    const { token, key, client, answer, response } = await requestInFlight(old);
    expect((await client.request('PATCH', `/keys/${key.id}`, { webhook_url: null })).status).toBe(200);
    answer();
    expect((await response).status).toBe(200);
    // Recorded with the response (before its last byte), sent at once when it is sent at all: a later request of the
    // same key, recorded after it, is the mark that the worker has had its turn.
    await eventually(async () => (await deliveries(token)).every((d) => d.status !== 'pending') || undefined);
    const { token: other } = await server.createKey({ webhookUrl: old.url });
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${other}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await old.waitFor((r) => r.length === 1);
    const requestIds = old.received.map((r) => (JSON.parse(r.raw.toString()) as { request_id: string }).request_id);
    expect(requestIds).toEqual([res.headers.get('x-request-id')]);
    expect((await deliveries(token)).filter((d) => d.status !== 'cancelled')).toEqual([]);
  });
});
