import { describe, expect, it } from 'vitest';
import { setTimeout as delay } from 'node:timers/promises';
import { chatMany, useWebhookRig } from './support/webhook-rig.js';
import { DashboardClient } from './support/dashboard-client.js';

/**
 * A receiver that never answers holds its 64 attempts in flight, and up to 64 more claimed rows wait in
 * memory for its slots. Those waiting rows follow the key's settings as they are when their turn comes, not as
 * they were when claimed: a URL removed or changed meanwhile (the dashboard, `svc-server keys update`)
 * gets nothing more. (Found by a review: 58–64 deliveries still reached the removed or replaced URL.)
 */

const IN_FLIGHT = 64;
const REQUESTS = 100;

const rig = useWebhookRig();

async function setUp() {
  const server = await rig.start({ SVC_WEBHOOK_TIMEOUT_MS: '2000', SVC_WEBHOOK_RETRY_SCHEDULE: '1s,1h', SVC_RATE_LIMIT_RPM: '100000' });
  const hanging = await rig.receiver({ hang: true });
  const { token, user, key } = await server.createKey({ webhookUrl: hanging.url });
  // Signed in first: a password hash on a loaded host may take longer than the attempts' 2 s timeout, and the
  // URL must change while every slot is still taken.
  const client = new DashboardClient(server.url);
  await client.login(user.email);
  await chatMany(server, token, REQUESTS);
  // Every slot of the hanging receiver is taken; the other rows wait (in memory or in the outbox).
  await hanging.waitFor((r) => r.length >= IN_FLIGHT);
  return { hanging, client, key };
}

describe('rows waiting for a receiver that never answers', () => {
  it('a changed URL: none of them reaches the old receiver; all go to the new one', { timeout: 60_000 }, async () => {
    const { hanging, client, key } = await setUp();
    const next = await rig.receiver({ status: 200 });
    const saved = await client.request('PATCH', `/keys/${key.id}`, { webhook_url: next.url });
    expect(saved.status).toBe(200);
    // 64, unless on a loaded host an attempt timed out before the change and its slot took a waiting row.
    const atChange = hanging.received.length;
    // The 64 in flight time out (2 s) and are retried at the new URL; the waiting ones go there at their turn.
    await next.waitFor((r) => new Set(r.map((d) => d.headers['x-svc-delivery'])).size === REQUESTS, 30_000);
    expect(hanging.received.length).toBe(atChange);
  });

  it('a removed URL: none of them is sent anywhere; all are cancelled', { timeout: 60_000 }, async () => {
    const { hanging, client, key } = await setUp();
    const cleared = await client.request('PATCH', `/keys/${key.id}`, { webhook_url: '' });
    expect(cleared.status).toBe(200);
    const atChange = hanging.received.length;
    // Past the in-flight attempts' timeout, when the waiting rows' turn has come and gone.
    await delay(4000);
    expect(hanging.received.length).toBe(atChange);
    const list = await client.request('GET', `/keys/${key.id}/deliveries?limit=100`);
    expect(list.body.data.every((d: { status: string }) => d.status === 'cancelled')).toBe(true);
  });
});
