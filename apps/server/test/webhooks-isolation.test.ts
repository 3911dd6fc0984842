import { describe, expect, it } from 'vitest';
import { chatMany, useWebhookRig } from './support/webhook-rig.js';
import { eventually } from './support/webhooks.js';

/**
 * Deliveries isolated per receiver (issue #26 §6): a receiver that never answers holds its own share of the
 * worker's attempts and connections (SVC_WEBHOOK_RECEIVER_CONCURRENCY), never all of them; test sends use
 * connections of their own. Ordering, not timing: the hanging receiver's attempts are still unanswered when
 * the other receiver has everything (its attempts time out only after 60 s).
 */

const rig = useWebhookRig();

async function setUp() {
  const srv = await rig.start({
    SVC_WEBHOOK_TIMEOUT_MS: '60000',
    SVC_WEBHOOK_RETRY_SCHEDULE: '1h',
    SVC_WEBHOOK_CONCURRENCY: '16',
    SVC_WEBHOOK_RECEIVER_CONCURRENCY: '4',
  });
  const hanging = await rig.receiver({ hang: true });
  const healthy = await rig.receiver();
  return { srv, hanging, healthy };
}

const chat = chatMany;

describe('a share per receiver', () => {
  it('a backlog far beyond one receiver’s share is all delivered (rows given back are claimed again), never more than the share at once', async () => {
    const { srv, healthy } = await setUp();
    let open = 0;
    let most = 0;
    // Each answer waits a turn, so attempts overlap and the share is what limits them.
    healthy.fallback = { delayMs: 20 };
    const { token } = await srv.createKey({ webhookUrl: healthy.url });
    const tick = setInterval(() => {
      open = healthy.received.filter((r) => r.replied === undefined).length;
      most = Math.max(most, open);
    }, 5);
    try {
      await chat(srv, token, 150);
      await eventually(() => healthy.received.length >= 150 && healthy.received.every((x) => x.replied !== undefined), 60_000);
    } finally {
      clearInterval(tick);
    }
    expect(healthy.received).toHaveLength(150);
    expect(new Set(healthy.received.map((r) => r.headers['x-svc-delivery'])).size).toBe(150);
    expect(most).toBeLessThanOrEqual(4);
  });
});

describe('one receiver that never answers', () => {
  it('holds only its share: another key’s 60 deliveries all arrive while its attempts still hang', async () => {
    const { srv, hanging, healthy } = await setUp();
    const a = await srv.createKey({ webhookUrl: hanging.url });
    const b = await srv.createKey({ webhookUrl: healthy.url });
    // 60 for A first: more than the whole worker's 16 slots.
    await chat(srv, a.token, 60);
    await hanging.waitFor((r) => r.length >= 4);
    await chat(srv, b.token, 60);
    await healthy.waitFor((r) => r.length >= 60, 30_000);
    expect(healthy.received).toHaveLength(60);
    // Still hanging, and never more than its share of 4 at once.
    expect(hanging.received).toHaveLength(4);
    expect(hanging.received.every((r) => r.replied === undefined)).toBe(true);
    // A's deliveries are still pending (not failed, not lost).
    const list = (await (await fetch(`${srv.url}/v1/webhooks/deliveries?limit=100`, { headers: { authorization: `Bearer ${a.token}` } })).json()) as {
      data: Array<{ status: string }>;
    };
    expect(list.data).toHaveLength(60);
    expect(list.data.every((d) => d.status === 'pending')).toBe(true);
  });

  it('a test send to the same receiver does not wait for a pooled connection behind the hung attempts', async () => {
    const { srv, hanging } = await setUp();
    const a = await srv.createKey({ webhookUrl: hanging.url });
    await chat(srv, a.token, 10);
    await hanging.waitFor((r) => r.length >= 4);
    // From now on the receiver answers; the 4 hung attempts stay hung (and fill the worker's pool for it).
    hanging.fallback = { status: 200 };
    const res = await fetch(`${srv.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${a.token}` } });
    expect(await res.json()).toMatchObject({ success: true });
    expect(hanging.received.filter((r) => r.replied === undefined)).toHaveLength(4);
    expect(hanging.received.at(-1)?.replied).toBe(200);
  });
});
