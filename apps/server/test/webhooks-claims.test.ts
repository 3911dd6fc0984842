// New deliveries reach the worker already leased (no claim query each); the worker queries the outbox only
// when rows may be waiting: at start, for unleased or retried rows, on its timer. Counted on a real server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let claims = 0;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Paris.' });
  receiver = await startReceiver();
  // Retries after 50 ms, then 100 ms: a failed attempt comes back within the test.
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_RETRY_SCHEDULE: '50ms,100ms' } });
  const deliveries = server.running.store.deliveries;
  const claimDue = deliveries.claimDue.bind(deliveries);
  deliveries.claimDue = (...args: Parameters<typeof claimDue>) => {
    claims += 1;
    return claimDue(...args);
  };
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

async function client() {
  const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: 'whsec_claims-test-secret' });
  return new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
}

const ask = (openai: OpenAI, i: number) => openai.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: `q${i}` }] });

describe('delivery worker claims', () => {
  it('sends 40 deliveries of sequential requests with (almost) no claim query', async () => {
    const openai = await client();
    const before = receiver.received.length;
    const claimsBefore = claims;
    for (let i = 0; i < 40; i++) await ask(openai, i);
    await receiver.waitFor((r) => r.length >= before + 40);
    // One claim per delivery was the old behaviour (40+); a timer may still look once or twice.
    expect(claims - claimsBefore).toBeLessThanOrEqual(3);
  });

  it('still retries a failed attempt on time, and delivers concurrent requests', async () => {
    const openai = await client();
    const before = receiver.received.length;
    receiver.queue.push({ status: 500 }, { status: 503 });
    await Promise.all(Array.from({ length: 20 }, (_, i) => ask(openai, i)));
    // 20 deliveries, two of whose first attempts failed: 22 requests reach the receiver, 20 answered 200.
    await receiver.waitFor((r) => r.length >= before + 22, 10_000);
    const received = await eventually(() => (receiver.received.slice(before).every((d) => d.replied !== undefined) ? receiver.received : undefined));
    expect(received.slice(before).filter((d) => d.replied !== 200)).toHaveLength(2);
    const ids = new Set(received.slice(before).filter((d) => d.replied === 200).map((d) => d.headers['x-svc-delivery']));
    expect(ids.size).toBe(20);
    // Every delivery recorded as delivered (the record follows the receiver's answer).
    await eventually(async () => (await server.running.store.deliveries.backlog(Date.now())).pending === 0);
  });
});
