// Two instances' delivery workers on one Postgres, their clocks 60 s apart, the receiver slow: every row is
// delivered exactly once. Leases are on the database's clock; with each instance's own, the instance ahead saw
// the other's live leases (its clock + 19 s) as lapsed and sent the same webhook-id a second time.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestPostgres } from './support/databases.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';
import { SecretBox } from '../src/crypto/secret-box.js';
import { newDeliveryId, type NewDelivery } from '../src/storage/outbox-store.js';
import { openStore, type Store } from '../src/storage/store.js';
import { createSender, type Sender } from '../src/webhooks/sender.js';
import { WakeTimer } from '../src/webhooks/wake-timer.js';
import { DeliveryWorker } from '../src/webhooks/worker.js';

const postgres = await createTestPostgres('clock-skew');
// The lease test's own database: the first test's workers, still running, would claim its row.
const leasePostgres = await createTestPostgres('clock-skew-lease');
const SKEW_MS = 60_000;
const ROWS = 12;

let receiver: Receiver;
let stores: Store[] = [];
let senders: Sender[] = [];
let workers: DeliveryWorker[] = [];

afterAll(async () => {
  for (const w of workers) await w.stop();
  for (const s of senders) await s.close();
  await receiver?.close();
  for (const s of stores) await s.close();
  await postgres?.drop();
  await leasePostgres?.drop();
});

/** One instance: its own pool and its own clock. */
async function instance(clock: () => number, url = postgres!.url): Promise<{ store: Store; worker: DeliveryWorker }> {
  const store = await openStore(url, { poolSize: 4 });
  const sender = createSender({ timeoutMs: 5_000, allowPrivate: true });
  const worker = new DeliveryWorker({
    deliveries: store.deliveries,
    keys: store.keys,
    sender,
    secretBox: new SecretBox(randomBytes(32)),
    logger: pino({ level: 'silent' }),
    clock,
    timeoutMs: 5_000,
    retryScheduleMs: [1_000],
  });
  stores.push(store);
  senders.push(sender);
  workers.push(worker);
  return { store, worker };
}

describe.skipIf(!postgres)('webhook leases across instances with skewed clocks', () => {
  let release: () => void;
  const answered = new Promise<void>((resolve) => (release = resolve));

  beforeAll(async () => {
    // Slow: no attempt is answered until the test says so; each is in flight, its row leased, meanwhile.
    receiver = await startReceiver({ until: answered });
  });

  it('delivers each row once: the instance 60 s ahead does not take rows the other is still sending', async () => {
    const behind = await instance(Date.now);
    const user = await behind.store.users.create({ email: 'skew@example.test', passwordHash: 'x', now: Date.now() });
    const key = await behind.store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: randomBytes(8).toString('hex'), now: Date.now(), webhookUrl: receiver.url });
    const rows: NewDelivery[] = Array.from({ length: ROWS }, () => {
      const id = newDeliveryId();
      return { id, keyId: key.id, userId: user.id, event: 'llm.request.completed', requestId: `chatcmpl-${id}`, url: receiver.url, payload: `{"id":"${id}"}`, now: Date.now() };
    });
    await behind.store.deliveries.insertMany(rows);

    // The instance on time claims every row and sends it; the receiver holds every attempt.
    behind.worker.start();
    await receiver.waitFor((r) => r.length >= ROWS);

    // The instance 60 s ahead starts and claims while those attempts are in flight.
    const ahead = await instance(() => Date.now() + SKEW_MS);
    let claimed = 0;
    let claims = 0;
    const claimDue = ahead.store.deliveries.claimDue.bind(ahead.store.deliveries);
    ahead.store.deliveries.claimDue = async (...args: Parameters<typeof claimDue>) => {
      const got = await claimDue(...args);
      claimed += got.length;
      claims += 1;
      return got;
    };
    ahead.worker.start();
    await eventually(() => claims >= 1);
    expect(claimed).toBe(0);

    release();
    await eventually(async () => (await behind.store.deliveries.backlog(Date.now())).pending === 0);
    const ids = receiver.received.map((d) => d.headers['webhook-id'] ?? d.headers['x-svc-delivery']);
    expect(ids).toHaveLength(ROWS);
    expect(new Set(ids).size).toBe(ROWS);
  });
});

describe.skipIf(!leasePostgres)('a failed record on a database whose clock differs from the worker\'s', () => {
  it('arms the timer for the lease end on the worker\'s clock: no later than a lease from now', async () => {
    // The worker's clock 60 s behind the database's: the lease's end as the database stores it is 60 s after
    // the same instant on the worker's clock.
    const clock = () => Date.now() - SKEW_MS;
    const { store, worker } = await instance(clock, leasePostgres!.url);
    const user = await store.users.create({ email: 'lease@example.test', passwordHash: 'x', now: clock() });
    const key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: randomBytes(8).toString('hex'), now: clock(), webhookUrl: receiver.url });
    const id = newDeliveryId();
    await store.deliveries.insert({ id, keyId: key.id, userId: user.id, event: 'llm.request.completed', requestId: `chatcmpl-${id}`, url: receiver.url, payload: '{}', now: clock() });

    // The attempt is sent, but its record fails: the row stays leased, and the worker must look again when
    // the lease lapses.
    const within = vi.spyOn(WakeTimer.prototype, 'within');
    let callsBeforeFailure: number | undefined;
    store.deliveries.recordAttempts = async () => {
      callsBeforeFailure = within.mock.calls.length;
      throw new Error('database unavailable');
    };
    worker.start();
    await eventually(() => callsBeforeFailure !== undefined && within.mock.calls.length > callsBeforeFailure);
    // Only this worker's timer: the other describe's workers may still be running.
    const timer = worker['timer'];
    const asked = within.mock.calls.slice(callsBeforeFailure).filter((_, i) => within.mock.contexts[callsBeforeFailure! + i] === timer);
    within.mockRestore();
    expect(asked.length).toBeGreaterThan(0);
    const leaseMs = worker['leaseMs'];
    expect(asked[0]![0]).toBeGreaterThan(0);
    expect(asked[0]![0]).toBeLessThanOrEqual(leaseMs);
    expect(await store.deliveries.byId(id)).toMatchObject({ status: 'pending', attempts: 0, leased_by: worker.id });
  });
});
