import { describe, expect, it } from 'vitest';
import { setTimeout as delay } from 'node:timers/promises';
import { chatMany, useWebhookRig } from './support/webhook-rig.js';
import { DashboardClient } from './support/dashboard-client.js';
import { eventually, type Receiver } from './support/webhooks.js';

/**
 * A receiver that never answers holds its 64 attempts in flight, and up to 64 more claimed rows wait in
 * memory for its slots. Those waiting rows follow the key's settings as they are when their turn comes, not as
 * they were when claimed: a URL removed or changed meanwhile (the dashboard, `svc-server keys update`)
 * gets nothing more. (Found by a review: 58–64 deliveries still reached the removed or replaced URL.)
 *
 * What counts is when svc started an attempt (its attempt log), not when the receiver read it: on a loaded
 * host a request sent before the change may be read by the receiver after the change has been answered.
 */

const IN_FLIGHT = 64;
const REQUESTS = 100;

const rig = useWebhookRig();

interface LoggedAttempt {
  attempted_at: string;
  status_code: number | null;
}

async function setUp() {
  // Retries every second for a while: a delivery tried at the old receiver more than once before the change
  // (a slow host) still has retries left for the new one.
  const schedule = Array.from({ length: 30 }, () => '1s').join(',');
  const server = await rig.start({ SVC_WEBHOOK_TIMEOUT_MS: '2000', SVC_WEBHOOK_RETRY_SCHEDULE: schedule, SVC_RATE_LIMIT_RPM: '100000' });
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

/** Every logged attempt of the key's deliveries, once each request the hanging receiver read has been logged. */
async function attemptLog(client: DashboardClient, keyId: string, hanging: Receiver): Promise<LoggedAttempt[]> {
  return eventually(async () => {
    const list = await client.request('GET', `/keys/${keyId}/deliveries?limit=${REQUESTS}`);
    const attempts: LoggedAttempt[] = [];
    for (const d of list.body.data as Array<{ id: string }>) {
      attempts.push(...((await client.request('GET', `/keys/${keyId}/deliveries/${d.id}`)).body.attempt_log as LoggedAttempt[]));
    }
    const failed = attempts.filter((a) => a.status_code !== 200).length;
    return failed >= hanging.received.length ? attempts : undefined;
  }, 30_000);
}

describe('rows waiting for a receiver that never answers', () => {
  it('a changed URL: none of them reaches the old receiver; all go to the new one', async () => {
    const { hanging, client, key } = await setUp();
    const next = await rig.receiver({ status: 200 });
    const saved = await client.request('PATCH', `/keys/${key.id}`, { webhook_url: next.url });
    const changedAt = Date.now();
    expect(saved.status).toBe(200);
    // The 64 in flight time out (2 s) and are retried at the new URL; the waiting ones go there at their turn.
    await next.waitFor((r) => new Set(r.map((d) => d.headers['x-svc-delivery'])).size === REQUESTS, 30_000);
    // Every attempt started after the change went to the new receiver (which answers 200; the old one never does).
    const log = await attemptLog(client, key.id, hanging);
    expect(log.filter((a) => Date.parse(a.attempted_at) > changedAt && a.status_code !== 200)).toEqual([]);
  });

  it('a removed URL: none of them is sent anywhere; all are cancelled', async () => {
    const { hanging, client, key } = await setUp();
    const cleared = await client.request('PATCH', `/keys/${key.id}`, { webhook_url: '' });
    const clearedAt = Date.now();
    expect(cleared.status).toBe(200);
    // Past the in-flight attempts' timeout, when the waiting rows' turn has come and gone.
    await delay(4000);
    const log = await attemptLog(client, key.id, hanging);
    expect(log.filter((a) => Date.parse(a.attempted_at) > clearedAt)).toEqual([]);
    const list = await client.request('GET', `/keys/${key.id}/deliveries?limit=100`);
    expect(list.body.data.every((d: { status: string }) => d.status === 'cancelled')).toBe(true);
  });
});
