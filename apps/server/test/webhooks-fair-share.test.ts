import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

/**
 * One user's receivers that never answer do not hold every attempt slot: each user has a share of the worker
 * (128 attempts in flight), as each receiver has (64). Four such receivers of one user, on four
 * ports, held all 256 slots before, and another user's first delivery waited until their attempts timed out
 * (28 s with the default 10 s timeout; found by a review).
 */

const TIMEOUT_MS = 20_000;
let upstream: FakeUpstream | undefined;
let server: TestServer | undefined;
const receivers: Receiver[] = [];

afterEach(async () => {
  // Receivers first: their sockets closed, the hanging attempts end at once rather than at their timeout.
  await Promise.all(receivers.splice(0).map((r) => r.close()));
  await server?.close();
  await upstream?.close();
});

describe("one user's receivers that never answer", () => {
  it("leave room for another user's deliveries: all of theirs arrive before any hanging attempt times out", { timeout: 60_000 }, async () => {
    upstream = await startFakeUpstream({ answer: 'Hello.' });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), SVC_RATE_LIMIT_RPM: '100000' } });
    const chat = (token: string) =>
      fetch(`${server!.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
      }).then((res) => res.status);

    const hanging = await Promise.all([0, 1, 2, 3].map(() => startReceiver({ hang: true })));
    receivers.push(...hanging);
    const first = await server.createKey({ webhookUrl: hanging[0]!.url });
    const keys = [first, ...(await Promise.all(hanging.slice(1).map((r) => server!.createKey({ userId: first.user.id, webhookUrl: r.url }))))];
    const sent = await Promise.all(keys.flatMap((k) => Array.from({ length: 130 }, () => chat(k.token))));
    expect(sent.every((s) => s === 200)).toBe(true);
    const started = Date.now();
    // The hanging user's share is in flight before the other user sends anything.
    await expect.poll(() => hanging.reduce((n, r) => n + r.received.length, 0), { timeout: 15_000 }).toBeGreaterThanOrEqual(128);

    const healthy = await startReceiver({ status: 204 });
    receivers.push(healthy);
    const other = await server.createKey({ webhookUrl: healthy.url });
    expect(other.user.id).not.toBe(first.user.id);
    const mine = await Promise.all(Array.from({ length: 20 }, () => chat(other.token)));
    expect(mine.every((s) => s === 200)).toBe(true);
    await healthy.waitFor((r) => r.length === 20, TIMEOUT_MS);
    // Before the first hanging attempt could have timed out and freed its slot.
    expect(Math.max(...healthy.received.map((d) => d.receivedAt))).toBeLessThan(started + TIMEOUT_MS);
    // The hanging user held its share, not every slot.
    expect(hanging.reduce((n, r) => n + r.received.length, 0)).toBeLessThanOrEqual(128);
  });
});
