// The worker queries the outbox only when rows may be waiting for it: a finishing attempt with nothing
// possibly due makes no query at all, while rows it was not handed (beyond its free slots) and retries still
// go out. Real SQLite store, real sender, real receiver.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventually, startReceiver, type Receiver } from '../../support/webhooks.js';
import { SecretBox } from '../../../src/crypto/secret-box.js';
import { newDeliveryId, newDeliveryRow, type DeliveryRow, type NewDelivery } from '../../../src/storage/outbox-store.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { createSender, type Sender } from '../../../src/webhooks/sender.js';
import { DeliveryWorker } from '../../../src/webhooks/worker.js';

let dir: string;
let store: Store;
let receiver: Receiver;
let sender: Sender;
let worker: DeliveryWorker | undefined;
let keyId: string;
let userId: string;
const queries = { claimDue: 0, nextDueAfter: 0 };
/** Claims that left a receiver or user out and found nothing. */
let emptyLeftOutClaims = 0;
/** The worker's wakes (a timer, a finished attempt, the outbox) counted when each such claim was made. */
let emptyClaimWakes: number[] = [];
let wakes = 0;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-worker-'));
  store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
  receiver = await startReceiver();
  sender = createSender({ timeoutMs: 2_000, allowPrivate: true });
  const user = await store.users.create({ email: 'worker@example.test', passwordHash: 'x', now: Date.now() });
  const key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: randomBytes(8).toString('hex'), now: Date.now(), webhookUrl: receiver.url });
  keyId = key.id;
  userId = user.id;
  queries.claimDue = 0;
  queries.nextDueAfter = 0;
  emptyLeftOutClaims = 0;
  emptyClaimWakes = [];
  wakes = 0;
  const { deliveries } = store;
  const claimDue = deliveries.claimDue.bind(deliveries);
  const nextDueAfter = deliveries.nextDueAfter.bind(deliveries);
  deliveries.claimDue = async (...args: Parameters<typeof claimDue>) => {
    queries.claimDue += 1;
    // Counted when the claim is made: a wake that comes while it runs is what allows the next one.
    const wakesBefore = wakes;
    const rows = await claimDue(...args);
    const leftOut = args[4];
    if (rows.length === 0 && leftOut !== undefined && leftOut.origins.length + leftOut.users.length > 0) {
      emptyLeftOutClaims += 1;
      emptyClaimWakes.push(wakesBefore);
    }
    return rows;
  };
  deliveries.nextDueAfter = (...args: Parameters<typeof nextDueAfter>) => {
    queries.nextDueAfter += 1;
    return nextDueAfter(...args);
  };
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await sender.close();
  await receiver.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function startWorker(options: { concurrency?: number; perReceiver?: number; retryScheduleMs?: number[] } = {}): DeliveryWorker {
  worker = new DeliveryWorker({
    deliveries: store.deliveries,
    keys: store.keys,
    sender,
    secretBox: new SecretBox(randomBytes(32)),
    logger: pino({ level: 'silent' }),
    clock: Date.now,
    timeoutMs: 2_000,
    retryScheduleMs: options.retryScheduleMs ?? [50, 50],
    concurrency: options.concurrency,
    perReceiver: options.perReceiver,
  });
  worker.start();
  return worker;
}

function newDeliveries(count: number): NewDelivery[] {
  return Array.from({ length: count }, () => {
    const id = newDeliveryId();
    return { id, keyId, userId, event: 'llm.request.completed', requestId: `chatcmpl-${id}`, url: receiver.url, payload: `{"id":"${id}"}`, now: Date.now() };
  });
}

/** What the outbox does with new deliveries: as many inserted leased and handed over as slots are free, the rest left to claim. */
async function handOver(w: DeliveryWorker, batch: NewDelivery[]): Promise<void> {
  const { take, lease } = w.reserve(batch.length);
  for (const d of batch.slice(0, take)) d.lease = lease;
  await store.deliveries.insertMany(batch);
  w.adopt(batch.slice(0, take).map(newDeliveryRow));
  if (take < batch.length) w.wake();
}

const delivered = async (ids: string[]) => {
  const statuses = await Promise.all(ids.map(async (id) => (await store.deliveries.byId(id))?.status));
  return statuses.every((s) => s === 'delivered');
};

describe('DeliveryWorker', () => {
  it('makes no query when attempts finish with nothing possibly due', async () => {
    const w = startWorker();
    // Start: one claim (nothing waiting) and one look for the next due time.
    await eventually(() => queries.nextDueAfter >= 1);
    const atStart = { ...queries };
    const ids: string[] = [];
    for (let round = 0; round < 5; round++) {
      const batch = newDeliveries(8);
      ids.push(...batch.map((d) => d.id));
      await handOver(w, batch);
      await receiver.waitFor((r) => r.length >= ids.length);
      await eventually(() => delivered(ids));
    }
    expect(new Set(receiver.received.map((r) => r.headers['x-svc-delivery']))).toEqual(new Set(ids));
    expect(queries).toEqual(atStart);
  });

  it('a claim still running when stop() is called is given back, not sent after the stop (the store closes next)', async () => {
    const batch = newDeliveries(3);
    await store.deliveries.insertMany(batch);
    // The claim takes its rows, then its answer is held until the stop has begun (a slow database round trip).
    let claimStarted = false;
    let answer!: () => void;
    const held = new Promise<void>((resolve) => (answer = resolve));
    const claimDue = store.deliveries.claimDue.bind(store.deliveries);
    store.deliveries.claimDue = async (...args: Parameters<typeof claimDue>) => {
      claimStarted = true;
      const rows = await claimDue(...args);
      await held;
      return rows;
    };
    const w = startWorker();
    await eventually(() => claimStarted);
    const stopping = w.stop();
    setImmediate(answer);
    await stopping;
    worker = undefined;
    // Stopped: nothing of this worker's runs on; the rows are claimable at once by the other instances.
    for (const d of batch) expect(await store.deliveries.byId(d.id)).toMatchObject({ status: 'pending', attempts: 0, leased_by: null });
    expect(receiver.received).toHaveLength(0);
  });

  it('claims and delivers the rows beyond its free slots', async () => {
    const w = startWorker({ concurrency: 2 });
    const batch = newDeliveries(7);
    await handOver(w, batch);
    await eventually(() => delivered(batch.map((d) => d.id)));
    expect(receiver.received).toHaveLength(7);
    expect(queries.claimDue).toBeGreaterThan(1);
  });

  it("works through one receiver's backlog without claiming again and again what it leaves out", async () => {
    // A receiver back after an outage, its deliveries all due. Each time its share is full the next claim leaves
    // it out, and that claim reads every due row of it to find nothing: with 100,000 waiting it held SQLite's
    // loop 100–200 ms, and came back at every turn of its slots. Once one found nothing, no later one is made
    // until something wakes the worker.
    const batch = newDeliveries(240);
    await store.deliveries.insertMany(batch);
    const w = startWorker({ perReceiver: 4 });
    const wake = w.wake.bind(w);
    w.wake = () => {
      wakes += 1;
      wake();
    };
    await receiver.waitFor((r) => r.length >= batch.length, 30_000);
    await eventually(() => delivered(batch.map((d) => d.id)), 30_000);
    // Claims of 8 (two shares) took the 240 rows: 30 claims or more, and a wasted claim only after a wake (on a
    // loaded host the idle timer and finishing attempts wake it more often): never two without one between.
    expect(queries.claimDue).toBeGreaterThanOrEqual(30);
    expect(new Set(emptyClaimWakes).size).toBe(emptyClaimWakes.length);
    expect(emptyLeftOutClaims).toBeLessThanOrEqual(1 + wakes);
  });

  it('a waiting row whose key was pointed at another receiver goes there at once, not after its old receiver drains', async () => {
    // A receiver answering only when told: its slots stay taken while the key's webhook URL changes.
    await sender.close();
    sender = createSender({ timeoutMs: 60_000, allowPrivate: true });
    let answerFirst!: () => void;
    let answerRest!: () => void;
    receiver.queue.push({ until: new Promise<void>((resolve) => (answerFirst = resolve)) });
    receiver.fallback = { until: new Promise<void>((resolve) => (answerRest = resolve)) };
    const moved = await startReceiver();
    try {
      const other = await store.keys.create({ userId, name: 'k2', prefix: 'svc_k2', keyHash: randomBytes(8).toString('hex'), now: Date.now(), webhookUrl: receiver.url });
      const w = startWorker({ perReceiver: 2 });
      await eventually(() => queries.nextDueAfter >= 1);
      // Two of each key to the same receiver: two are sent, two wait for their slots.
      const [a1, a2] = newDeliveries(2);
      const [b1, b2] = newDeliveries(2).map((d) => ({ ...d, keyId: other.id }));
      await handOver(w, [a1!, b1!, a2!, b2!]);
      await receiver.waitFor((r) => r.length >= 2);
      await store.deliveries.retargetPending(keyId, moved.url, Date.now());
      // The first answer frees a slot: the first key's waiting row is found retargeted and given back, the other
      // key's takes the slot, and the receiver is full again.
      answerFirst();
      const [arrived] = await moved.waitFor((r) => r.length >= 1);
      expect(arrived!.headers['x-svc-delivery']).toBe(a2!.id);
      expect(receiver.received.map((r) => r.headers['x-svc-delivery'])).toEqual([a1!.id, b1!.id, b2!.id]);
    } finally {
      answerRest();
      await moved.close();
    }
  });

  it('sends a failed attempt again per the retry schedule, with nothing else waking it', async () => {
    const w = startWorker({ retryScheduleMs: [50, 50] });
    await eventually(() => queries.nextDueAfter >= 1);
    receiver.queue.push({ status: 500 }, { status: 503 });
    const batch = newDeliveries(1);
    await handOver(w, batch);
    await eventually(() => delivered([batch[0]!.id]));
    expect(receiver.received.map((r) => r.replied)).toEqual([500, 503, 200]);
    expect((await store.deliveries.byId(batch[0]!.id))?.attempts).toBe(3);
  });

  it('sends a redelivered row again once woken', async () => {
    const w = startWorker();
    const batch = newDeliveries(1);
    await handOver(w, batch);
    await eventually(() => delivered([batch[0]!.id]));
    await store.deliveries.redeliver(keyId, batch[0]!.id, Date.now());
    w.wake();
    await receiver.waitFor((r) => r.length >= 2);
    await eventually(() => delivered([batch[0]!.id]));
    expect(receiver.received.map((r) => r.headers['x-svc-delivery'])).toEqual([batch[0]!.id, batch[0]!.id]);
  });

  it("claims rows without their payloads and reads each one just before its send, one of a megabyte per turn of the event loop, waiting rows' too", async () => {
    // Prompts of megabytes: read in the claim, a receiver's 64 of 9.6 MB were 600 MB in one statement on SQLite's
    // event loop (another user's chat completion waited 14 s); read back to back after the claim, as long.
    // Over a megabyte each: a turn of the event loop each (see PayloadReads).
    const batch = newDeliveries(10).map((d) => ({ ...d, payload: JSON.stringify({ id: d.id, prompt: d.id.repeat(32_000) }) }));
    await store.deliveries.insertMany(batch);
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn += 1;
      if (ticking) setImmediate(tick);
    };
    tick();
    const { deliveries } = store;
    /** The longest row a claim returned, as JSON: a few hundred characters without its payload. */
    let longestClaimed = 0;
    const reads: Array<{ id: string; turn: number }> = [];
    let wholeRowReads = 0;
    const claimDue = deliveries.claimDue.bind(deliveries);
    deliveries.claimDue = async (...args: Parameters<typeof claimDue>) => {
      const rows = await claimDue(...args);
      for (const row of rows) longestClaimed = Math.max(longestClaimed, JSON.stringify(row).length);
      return rows;
    };
    const payloadOf = deliveries.payloadOf.bind(deliveries);
    deliveries.payloadOf = (id: string) => {
      reads.push({ id, turn });
      return payloadOf(id);
    };
    const byId = deliveries.byId.bind(deliveries);
    deliveries.byId = (id: string) => {
      wholeRowReads += 1;
      return byId(id);
    };
    // Two attempts at a time: each claim of four leaves two rows waiting in memory for a slot.
    startWorker({ perReceiver: 2 });
    await receiver.waitFor((r) => r.length >= batch.length);
    ticking = false;
    const workerRowReads = wholeRowReads;
    await eventually(() => delivered(batch.map((d) => d.id)));

    expect(longestClaimed).toBeGreaterThan(0);
    expect(longestClaimed).toBeLessThan(2_000);
    // Each payload read once, by its own send, each read in a turn of its own; no whole row read for a waiting row's check.
    expect(reads.map((r) => r.id).sort()).toEqual(batch.map((d) => d.id).sort());
    expect(new Set(reads.map((r) => r.turn)).size).toBe(reads.length);
    expect(workerRowReads).toBe(0);
    const sent = new Map(receiver.received.map((r) => [r.headers['x-svc-delivery'], r.raw.toString()]));
    expect(sent).toEqual(new Map(batch.map((d) => [d.id, d.payload])));
  });

  it('lets go of the row and its payload once sent, while the attempt waits for its record', async () => {
    const w = startWorker();
    // Recording waits at this gate: the attempt has been sent but has not finished.
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    let recording = false;
    const recordAttempts = store.deliveries.recordAttempts.bind(store.deliveries);
    store.deliveries.recordAttempts = async (...args: Parameters<typeof recordAttempts>) => {
      recording = true;
      await gate;
      return recordAttempts(...args);
    };
    const [delivery] = newDeliveries(1);
    delivery!.payload = JSON.stringify({ text: 'x'.repeat(4000) });
    const { take, lease } = w.reserve(1);
    expect(take).toBe(1);
    delivery!.lease = lease;
    await store.deliveries.insertMany([delivery!]);
    // The row is made, handed over and forgotten in a function of its own: no reference stays in this scope.
    const launch = (): { attempt: Promise<unknown>; row: WeakRef<DeliveryRow> } => {
      const row = newDeliveryRow(delivery!);
      delivery!.payload = '';
      return { attempt: w.attempt(row), row: new WeakRef(row) };
    };
    const { attempt, row } = launch();
    await receiver.waitFor((r) => r.length === 1);
    await eventually(() => recording);
    await new Promise((resolve) => setTimeout(resolve, 10));
    collectGarbage();
    expect(row.deref()).toBeUndefined();
    openGate();
    await attempt;
    expect((await store.deliveries.byId(delivery!.id))?.status).toBe('delivered');
  });
});

function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}
