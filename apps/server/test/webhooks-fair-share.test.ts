import { describe, expect, it } from 'vitest';
import { chatMany, useWebhookRig } from './support/webhook-rig.js';

/**
 * One user's receivers that never answer do not hold every attempt slot: each user has a share of the worker
 * (128 attempts in flight), as each receiver has (64). Four such receivers of one user, on four
 * ports, held all 256 slots before, and another user's first delivery waited until their attempts timed out
 * (28 s with the default 10 s timeout; found by a review).
 */

const TIMEOUT_MS = 20_000;
const rig = useWebhookRig();

describe("one user's receivers that never answer", () => {
  it("leave room for another user's deliveries: all of theirs arrive before any hanging attempt times out", async () => {
    const server = await rig.start({ SVC_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), SVC_RATE_LIMIT_RPM: '100000' });
    const hanging = await Promise.all([0, 1, 2, 3].map(() => rig.receiver({ hang: true })));
    const first = await server.createKey({ webhookUrl: hanging[0]!.url });
    const keys = [first, ...(await Promise.all(hanging.slice(1).map((r) => server.createKey({ userId: first.user.id, webhookUrl: r.url }))))];
    await Promise.all(keys.map((k) => chatMany(server, k.token, 130)));
    // The hanging user's share is in flight before the other user sends anything.
    await expect.poll(() => hanging.reduce((n, r) => n + r.received.length, 0), { timeout: 30_000 }).toBeGreaterThanOrEqual(128);

    const healthy = await rig.receiver({ status: 204 });
    const other = await server.createKey({ webhookUrl: healthy.url });
    expect(other.user.id).not.toBe(first.user.id);
    await chatMany(server, other.token, 20);
    await healthy.waitFor((r) => r.length === 20, TIMEOUT_MS);
    // Before the first hanging attempt could have timed out and freed its slot.
    const firstHung = Math.min(...hanging.flatMap((r) => r.received.map((d) => d.receivedAt)));
    expect(Math.max(...healthy.received.map((d) => d.receivedAt))).toBeLessThan(firstHung + TIMEOUT_MS);
    // The hanging user held its share, not every slot.
    expect(hanging.reduce((n, r) => n + r.received.length, 0)).toBeLessThanOrEqual(128);
  });
});
