import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditPayloadSchema, REDELIVERY_MAX } from '@svc/protocol';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';
import { DashboardClient } from './support/dashboard-client.js';

/**
 * Recovery and the local loop (issue #28 items 4–6): every failed delivery of a key sent again in one call,
 * by status and time range, scoped to the key; the request's own status beside the delivery's; a delivery
 * retrying is told apart from one that failed; sample test payloads; the deliveries API on a limit of its own.
 */

let server: TestServer;
const receivers: Receiver[] = [];

beforeAll(async () => {
  // One retry 200 ms after the first attempt, then failed.
  server = await startTestServer({ env: { SVC_WEBHOOK_RETRY_SCHEDULE: '200ms' } });
});

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await server?.close();
});

async function receiver(...args: Parameters<typeof startReceiver>) {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

async function api(token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

async function chat(token: string, expected = 200) {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(res.status).toBe(expected);
  return ((await res.json()) as { id?: string }).id;
}

async function deliveries(token: string, query = '') {
  return (await api(token, 'GET', `/webhooks/deliveries${query}`)).body.data as any[];
}

describe('bulk redelivery: POST /v1/webhooks/deliveries/redeliver', () => {
  it('redelivers every failed delivery of the key in the time range (same ids, same bytes), and only those', async () => {
    const failing = await receiver({ status: 500 });
    const { token } = await server.createKey({ webhookUrl: failing.url });
    const other = await server.createKey({ webhookUrl: failing.url });
    await chat(token);
    await chat(token);
    await chat(other.token);
    await eventually(async () => (await deliveries(token, '?status=failed')).length === 2 && (await deliveries(other.token, '?status=failed')).length === 1);

    const dry = await api(token, 'POST', '/webhooks/deliveries/redeliver', { status: 'failed', dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toEqual({ object: 'webhook.redelivery', redelivered: 0, matched: 2, limit: REDELIVERY_MAX });
    const future = new Date(Date.now() + 60_000).toISOString();
    expect((await api(token, 'POST', '/webhooks/deliveries/redeliver', { status: 'failed', since: future })).body).toMatchObject({ redelivered: 0, matched: 0 });
    expect((await api(token, 'POST', '/webhooks/deliveries/redeliver', { status: 'delivered' })).body).toMatchObject({ redelivered: 0 });

    failing.fallback = { status: 200 };
    const before = failing.received.length;
    const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const done = await api(token, 'POST', '/webhooks/deliveries/redeliver', { status: 'failed', since, until: future });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ object: 'webhook.redelivery', redelivered: 2, matched: 2 });

    const resent = (await failing.waitFor((list) => list.length >= before + 2)).slice(before);
    const ids = (await deliveries(token)).map((d) => d.id).sort();
    expect(resent.map((r) => r.headers['x-svc-delivery']).sort()).toEqual(ids);
    await eventually(async () => (await deliveries(token)).every((d) => d.status === 'delivered'));
    for (const d of await deliveries(token)) {
      const detail = (await api(token, 'GET', `/webhooks/deliveries/${d.id}`)).body;
      const sent = resent.find((r) => r.headers['x-svc-delivery'] === d.id)!;
      expect(sent.raw.toString('utf8')).toBe(detail.payload);
    }
    // The other key's failed delivery was not touched.
    expect((await deliveries(other.token))[0]).toMatchObject({ status: 'failed', attempts: 2 });
  });

  it('takes the list\'s search too: the deliveries that got HTTP 500, or one request\'s, and no others', async () => {
    const failing = await receiver({ status: 500 });
    const { token } = await server.createKey({ webhookUrl: failing.url });
    const got500 = await chat(token);
    await eventually(async () => (await deliveries(token, '?status=failed')).length === 1);
    failing.fallback = { status: 503 };
    const got503 = await chat(token);
    await eventually(async () => (await deliveries(token, '?status=failed')).length === 2);

    const count = async (filter: object) => (await api(token, 'POST', '/webhooks/deliveries/redeliver', { ...filter, dry_run: true })).body.matched;
    expect(await count({ last_status_code: '500' })).toBe(1);
    expect(await count({ last_status_code: '5xx', status: 'failed' })).toBe(2);
    expect(await count({ request_id: got503 })).toBe(1);
    expect(await count({ request_id: got503, last_status_code: '500' })).toBe(0);
    const bad = await api(token, 'POST', '/webhooks/deliveries/redeliver', { last_status_code: '5x' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_value', param: 'last_status_code', type: 'invalid_request_error' });

    failing.fallback = { status: 200 };
    const before = failing.received.length;
    const done = await api(token, 'POST', '/webhooks/deliveries/redeliver', { status: 'failed', last_status_code: '500' });
    expect(done.body).toMatchObject({ redelivered: 1, matched: 1 });
    const [resent] = (await failing.waitFor((list) => list.length > before)).slice(before);
    const [only500] = await deliveries(token, `?request_id=${got500}`);
    expect(resent!.headers['x-svc-delivery']).toBe(only500.id);
    await eventually(async () => (await deliveries(token, `?request_id=${got500}`))[0]?.status === 'delivered');
    expect((await deliveries(token, `?request_id=${got503}`))[0]).toMatchObject({ status: 'failed', last_status_code: 503 });
  });

  it('refuses a bad filter with 400 invalid_value naming it, and a key without a webhook URL with 400 invalid_request', async () => {
    const { token } = await server.createKey({ webhookUrl: (await receiver()).url });
    const badStatus = await api(token, 'POST', '/webhooks/deliveries/redeliver', { status: 'broken' });
    expect(badStatus.status).toBe(400);
    expect(badStatus.body.error).toMatchObject({ code: 'invalid_value', param: 'status', type: 'invalid_request_error' });
    const badSince = await api(token, 'POST', '/webhooks/deliveries/redeliver', { since: '2 hours ago' });
    expect(badSince.status).toBe(400);
    expect(badSince.body.error).toMatchObject({ code: 'invalid_value', param: 'since' });

    const noUrl = await server.createKey();
    const refused = await api(noUrl.token, 'POST', '/webhooks/deliveries/redeliver', { status: 'failed' });
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('invalid_request');
  });
});

describe('a delivery view that tells the truth', () => {
  it("the request's own status beside the delivery's; a delivery with a retry left is pending, then failed with the receiver's answer", async () => {
    const failing = await receiver({ status: 503, body: 'maintenance until 12:00' });
    const { token } = await server.createKey({ webhookUrl: failing.url });
    await chat(token);
    const [first] = await eventually(async () => {
      const list = await deliveries(token);
      return list[0]?.attempts === 1 ? list : undefined;
    });
    // Failed once, one retry left: pending, with its next attempt (the dashboard says Retrying).
    if (first.status === 'pending') expect(first.next_attempt_at).not.toBeNull();
    expect(first.request_status_code).toBe(200);

    const failed = await eventually(async () => (await deliveries(token, '?status=failed'))[0]);
    const detail = (await api(token, 'GET', `/webhooks/deliveries/${failed.id}`)).body;
    expect(detail.request_status_code).toBe(200);
    // The headers each attempt sent.
    expect(detail.attempt_log[1].request_headers).toMatchObject({ 'content-type': 'application/json', 'x-svc-delivery': failed.id, 'x-svc-event': 'llm.request.completed' });
    expect(failing.received.at(-1)!.headers['x-svc-delivery']).toBe(detail.attempt_log[1].request_headers['x-svc-delivery']);
    expect(detail.attempt_log.map((a: any) => [a.status_code, a.response_body])).toEqual([
      [503, 'maintenance until 12:00'],
      [503, 'maintenance until 12:00'],
    ]);
  });

  it('the dashboard key list says the key is retrying, not just failed, while retries remain', async () => {
    const failing = await receiver({ status: 500 });
    const slow = await startTestServer({ env: { SVC_WEBHOOK_RETRY_SCHEDULE: '1h' } });
    try {
      const { token, user } = await slow.createKey({ webhookUrl: failing.url });
      const res = await fetch(`${slow.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      const client = new DashboardClient(slow.url);
      await client.login(user.email);
      const key = await eventually(async () => {
        const list = await client.request('GET', '/keys');
        const k = list.body.data[0];
        return k?.last_delivery?.outcome === 'failure' ? k : undefined;
      });
      expect(key.retrying).toMatchObject({ deliveries: 1 });
      expect(Date.now() - Date.parse(key.failing_since)).toBeLessThan(60_000);
      expect(Date.parse(key.retrying.next_attempt_at)).toBeGreaterThan(Date.now() + 30 * 60_000);

      // The dashboard's bulk action: a count first, then the redelivery.
      const count = await client.request('POST', `/keys/${key.id}/deliveries/redeliver`, { status: 'pending', dry_run: true });
      expect(count.body).toMatchObject({ matched: 1, redelivered: 0 });
      failing.fallback = { status: 200 };
      const done = await client.request('POST', `/keys/${key.id}/deliveries/redeliver`, { status: 'pending' });
      expect(done.body).toMatchObject({ matched: 1, redelivered: 1 });
      const after = await eventually(async () => {
        const k = (await client.request('GET', '/keys')).body.data[0];
        return k.last_delivery.outcome === 'success' ? k : undefined;
      });
      expect(after.retrying).toBeNull();
      expect(after.failing_since).toBeNull();
      // Without the CSRF token the bulk action is refused, like every dashboard write.
      expect((await client.request('POST', `/keys/${key.id}/deliveries/redeliver`, {}, { csrf: false })).status).toBe(403);
    } finally {
      await slow.close();
    }
  });
});

describe('test samples: POST /v1/webhooks/test with { sample }', () => {
  it.each(['ok', 'failed', 'ungrounded', 'streamed'] as const)('%s: a valid test payload of that shape', async (sample) => {
    const r = await receiver();
    const { token } = await server.createKey({ webhookUrl: r.url });
    const res = await api(token, 'POST', '/webhooks/test', { sample });
    expect(res.body).toMatchObject({ success: true, delivered_to: r.url });
    const payload = AuditPayloadSchema.parse(JSON.parse(r.received.at(-1)!.raw.toString('utf8')));
    expect(payload.test).toBe(true);
    const expected = {
      ok: { status_code: 200, streaming: false, grounded: true },
      failed: { status_code: 502, response_text: '', grounding_checked: false },
      ungrounded: { status_code: 200, grounded: false, grounding_checked: true },
      streamed: { status_code: 200, streaming: true },
    }[sample];
    expect(payload).toMatchObject(expected);
    if (sample === 'ungrounded') {
      const [span] = payload.flagged_spans!;
      expect(payload.response_text.slice(span!.start, span!.end)).toBe(span!.text);
    }
    const [delivery] = await deliveries(token);
    expect(delivery.request_status_code).toBe(payload.status_code);
  });

  it('no body is the ok sample; an unknown sample is 400 invalid_value with param sample', async () => {
    const r = await receiver();
    const { token } = await server.createKey({ webhookUrl: r.url });
    expect((await api(token, 'POST', '/webhooks/test')).body.success).toBe(true);
    expect(JSON.parse(r.received.at(-1)!.raw.toString('utf8')).status_code).toBe(200);
    const bad = await api(token, 'POST', '/webhooks/test', { sample: 'weird' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_value', param: 'sample' });
  });
});

describe('the deliveries API is not blocked by the chat rate limit', () => {
  it('a key at its chat limit can still list, show and redeliver its deliveries', async () => {
    const { token } = await server.createKey({ webhookUrl: (await receiver()).url, rateLimitRpm: 2 });
    await chat(token);
    await chat(token);
    const limited = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(limited.status).toBe(429);
    await limited.body?.cancel();
    expect((await api(token, 'GET', '/models')).status).toBe(429);

    const list = await api(token, 'GET', '/webhooks/deliveries');
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(2);
    // Its own bucket, reported in the same headers.
    expect(Number(list.headers.get('x-ratelimit-limit-requests'))).toBeGreaterThanOrEqual(600);
    expect((await api(token, 'GET', `/webhooks/deliveries/${list.body.data[0].id}`)).status).toBe(200);
    expect((await api(token, 'POST', '/webhooks/deliveries/redeliver', { status: 'delivered', dry_run: true })).status).toBe(200);
    // An unknown route under /v1/webhooks is still a 404.
    expect((await api(token, 'GET', '/webhooks/nope')).body.error.code).toBe('not_found');
  });
});
