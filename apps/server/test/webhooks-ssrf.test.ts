import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { DeliveryDetailSchema, DeliveryListSchema } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from '../src/test-support/fake-upstream.js';
import { startTestServer, type TestServer } from '../src/test-support/test-server.js';
import { eventually, startReceiver, type Receiver } from './webhooks-support.js';

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
