import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { DeliveryDetailSchema, DeliveryListSchema } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';
import { DashboardClient } from './support/dashboard-client.js';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let port: number;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Hello.' });
  receiver = await startReceiver();
  port = Number(new URL(receiver.url).port);
  server = await startTestServer({
    env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'false', SVC_WEBHOOK_RETRY_SCHEDULE: '50ms' },
  });
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

// Stored as-is (as a key created before the guard, or by another instance, would be): the guard must act at send time.
const targets = () => [
  [`http://127.0.0.1:${port}/hooks`, /refused to connect to 127\.0\.0\.1: loopback/],
  ['http://10.0.0.1/hooks', /refused to connect to 10\.0\.0\.1: private/],
  ['http://169.254.169.254/latest/meta-data', /refused to connect to 169\.254\.169\.254: link-local/],
  [`http://[::1]:${port}/hooks`, /refused to connect to ::1: loopback/],
  [`http://[::ffff:127.0.0.1]:${port}/hooks`, /refused to connect to ::ffff:7f00:1: loopback/],
  [`http://2130706433:${port}/hooks`, /refused to connect to 127\.0\.0\.1: loopback/],
  [`http://0x7f.1:${port}/hooks`, /refused to connect to 127\.0\.0\.1: loopback/],
  [`http://localhost:${port}/hooks`, /refused to connect to localhost: it resolves to (127\.0\.0\.1|::1), a loopback address/],
] as const;

describe('SSRF guard with SVC_WEBHOOK_ALLOW_PRIVATE=false', () => {
  it('refuses every non-public target at the test endpoint, and logs it', async () => {
    for (const [url, error] of targets()) {
      const { token } = await server.createKey({ webhookUrl: url });
      const res = await fetch(`${server.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      const body = (await res.json()) as { success: boolean; status_code: number | null; error: string };
      expect(body, url).toMatchObject({ success: false, delivered_to: url, status_code: null, error: expect.stringMatching(error) });
    }
    expect(receiver.received).toHaveLength(0);
    const refusals = server.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.outcome === 'refused');
    expect(refusals.length).toBeGreaterThanOrEqual(targets().length);
    expect(refusals[0]).toMatchObject({ level: 40, msg: 'webhook refused by the SSRF guard' });
  });

  it('refuses audit deliveries on every attempt and records the refusal in the attempt log', async () => {
    const { token } = await server.createKey({ webhookUrl: `http://localhost:${port}/hooks` });
    const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
    await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
    const api = async (path: string) =>
      (await fetch(`${server.url}/v1/webhooks${path}`, { headers: { authorization: `Bearer ${token}` } })).json();
    const failed = await eventually(async () => {
      const list = DeliveryListSchema.parse(await api('/deliveries'));
      return list.data[0]?.status === 'failed' ? list.data[0] : undefined;
    });
    const detail = DeliveryDetailSchema.parse(await api(`/deliveries/${failed.id}`));
    expect(detail.attempt_log).toHaveLength(2);
    for (const attempt of detail.attempt_log) expect(attempt.error).toMatch(/^refused to connect to localhost/);
    expect(receiver.received).toHaveLength(0);
    const logged = server.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.delivery_id === failed.id);
    expect(logged.map((l) => l.outcome)).toEqual(['refused', 'refused']);
    // Logs carry ids and outcomes, never the payload.
    expect(logged.some((l) => JSON.stringify(l).includes('"prompt"'))).toBe(false);
  });
});

describe('SVC_WEBHOOK_ALLOW_PRIVATE=loopback (the default on a loopback bind; design §2)', () => {
  let local: TestServer;
  beforeAll(async () => {
    // Bound to loopback and left unset: the default is `loopback`, not `true`.
    local = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
  });
  afterAll(async () => {
    await local?.close();
  });

  it('is the default when SVC_HOST is loopback', () => {
    expect(local.config.webhooks.allowPrivate).toBe('loopback');
  });

  it('delivers to loopback receivers (literal and localhost), refuses private, link-local and translated forms', async () => {
    const before = receiver.received.length;
    for (const url of [`http://127.0.0.1:${port}/ok`, `http://localhost:${port}/ok`, `http://[::ffff:127.0.0.1]:${port}/ok`]) {
      const { token } = await local.createKey({ webhookUrl: url });
      const res = await fetch(`${local.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      expect(await res.json(), url).toMatchObject({ success: true });
    }
    expect(receiver.received.length - before).toBe(3);
    const refused = [
      ['http://10.0.0.1/hooks', /10\.0\.0\.1: private address/],
      ['http://192.168.1.1/hooks', /private address/],
      ['http://169.254.169.254/latest/meta-data', /169\.254\.169\.254: link-local address \(SVC_WEBHOOK_ALLOW_PRIVATE is loopback on this server; only true, set by its operator, would allow it\)/],
      ['http://[fe80::1]/hooks', /link-local/],
      ['http://[fd00::1]/hooks', /unique local/],
      [`http://[::ffff:0:127.0.0.1]:${port}/hooks`, /loopback via IPv6 translation/],
      [`http://[64:ff9b::7f00:1]:${port}/hooks`, /loopback via IPv6 translation/],
      [`http://[64:ff9b:1::7f00:1]:${port}/hooks`, /local-use NAT64/],
      [`http://[2002:7f00:1::1]:${port}/hooks`, /loopback via IPv6 translation/],
      [`http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]:${port}/hooks`, /Teredo/],
    ] as const;
    for (const [url, error] of refused) {
      const { token } = await local.createKey({ webhookUrl: url });
      const res = await fetch(`${local.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      expect(await res.json(), url).toMatchObject({ success: false, status_code: null, error: expect.stringMatching(error) });
    }
    expect(receiver.received.length - before).toBe(3);
  });

  it('refuses the metadata address when the URL is saved, too (dashboard: 400 with the reason)', async () => {
    const { user } = await local.createKey();
    const client = new DashboardClient(local.url);
    expect((await client.login(user.email)).status).toBe(200);
    const keys = await client.request('GET', '/keys');
    const id = keys.body.data[0].id as string;
    const res = await client.request('PATCH', `/keys/${id}`, { webhook_url: 'http://169.254.169.254/latest/meta-data' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_value', param: 'webhook_url', message: expect.stringMatching(/link-local/) });
  });
});

describe('operator caps: SVC_MAX_KEY_RATE_LIMIT_RPM and SVC_MAX_KEYS_PER_USER', () => {
  let capped: TestServer;
  beforeAll(async () => {
    capped = await startTestServer({ env: { SVC_MAX_KEY_RATE_LIMIT_RPM: '1000', SVC_MAX_KEYS_PER_USER: '3' } });
  });
  afterAll(async () => {
    await capped?.close();
  });

  it('a user cannot raise their key above the cap (400 naming the cap); at the cap is fine', async () => {
    const { user, key } = await capped.createKey();
    const client = new DashboardClient(capped.url);
    await client.login(user.email);
    const over = await client.request('PATCH', `/keys/${key.id}`, { rate_limit_rpm: 10_000_000 });
    expect(over.status).toBe(400);
    expect(over.body.error).toMatchObject({ code: 'invalid_value', param: 'rate_limit_rpm', message: expect.stringMatching(/1 to 1,000 .*SVC_MAX_KEY_RATE_LIMIT_RPM/) });
    expect((await client.request('PATCH', `/keys/${key.id}`, { rate_limit_rpm: 1000 })).body.key.rate_limit_rpm).toBe(1000);
    expect((await client.request('GET', '/me')).body.max_rate_limit_rpm).toBe(1000);
  });

  it('30 concurrent key creations stop at the cap (counting the existing key); revoking makes room', async () => {
    const { user } = await capped.createKey();
    const client = new DashboardClient(capped.url);
    await client.login(user.email);
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => client.request('POST', '/keys', { name: `k${i}` })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(2);
    const refused = results.filter((r) => r.status === 400);
    expect(refused).toHaveLength(28);
    expect(refused[0]!.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/SVC_MAX_KEYS_PER_USER=3/) });
    const keys = (await client.request('GET', '/keys')).body.data as Array<{ id: string }>;
    expect(keys).toHaveLength(3);
    await client.request('POST', `/keys/${keys[0]!.id}/revoke`);
    expect((await client.request('POST', '/keys', { name: 'after revoke' })).status).toBe(201);
  });
});
