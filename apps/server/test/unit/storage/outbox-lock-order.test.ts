import { afterAll, describe, expect, it } from 'vitest';
import { deadlockTestPostgres, otherSession, waitingForLock } from '../../support/row-locks.js';
import { testDelivery } from '../../support/outbox-rows.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { newDeliveryId, type AttemptRecord, type NewDelivery } from '../../../src/storage/outbox-store.js';

// After 843c1dc (a bulk redelivery's batch locks its rows in id order), the other statements over several deliveries
// still locked theirs in the order Postgres met them: the worker's record of a batch of attempts, its release of
// leases and claims, and the cancel or retarget of a key's pending deliveries when its webhook URL is cleared or
// changed (the dashboard's Save: a 500 on "deadlock detected"). Each now takes them in id order too.

const postgres = await deadlockTestPostgres('outbox-lock-order');
afterAll(async () => {
  await postgres?.drop();
});

const T0 = 1_700_000_000_000;
const WORKER = 'worker-1';

/** A leased pending delivery of key_a; `rank` orders it (first created, first request id, first lease to end) apart from its id. */
function delivery(id: string, rank: number): NewDelivery {
  return testDelivery({
    id,
    requestId: `chatcmpl-${rank}`,
    payload: `{"request_id":"chatcmpl-${rank}"}`,
    now: T0 + rank,
    lease: { until: T0 + 60_000 + rank, by: WORKER },
  });
}

function attempt(deliveryId: string): AttemptRecord {
  return {
    deliveryId,
    result: { attemptedAt: T0 + 5, statusCode: 500, durationMs: 3, outcome: 'failure', error: 'HTTP 500', responseBody: null },
    next: { status: 'pending', nextAttemptAt: T0 + 1_000 },
    leasedBy: WORKER,
  };
}

interface Pair {
  low: NewDelivery;
  high: NewDelivery;
}

type Statement<T> = (store: Store, rows: Pair) => Promise<T>;

/**
 * Two leased pending deliveries, the higher id first in the table and in every index but the primary key's (so that
 * a scan of the table, of the key's indexes or of the leases' meets it first), and another session that holds one
 * of them while `statement` runs and, once the statement waits, updates the other.
 *
 * `lower` held (the session locks in id order, as every statement here now does): a statement that took the higher
 * row first waits for the lower while the session waits for it, and Postgres fails the statement (it waited first, so
 * its check finds the cycle first). One that locks in id order waits for the lower row holding nothing, and goes on.
 *
 * `higher` held (a session out of that order, e.g. an older server's during a rolling upgrade): a statement in id
 * order holds the lower row and waits for the higher, and meets the deadlock; a user's request sends it again.
 */
async function whileHeld<T>(url: string, held: 'lower' | 'higher', statement: Statement<T>): Promise<{ result: T; store: Store; rows: Pair; close: () => Promise<void> }> {
  const store = await openStore(url, { poolSize: 4, leaseClock: 'caller' });
  const other = await otherSession(url);
  try {
    // Emptied pages: the rows lie in the order they are inserted.
    await other.query('truncate webhook_deliveries, webhook_attempts, webhook_payloads');
    const [lowId, highId] = [newDeliveryId(), newDeliveryId()].sort() as [string, string];
    const [high, low] = [delivery(highId, 1), delivery(lowId, 2)];
    await store.deliveries.insert(high);
    await store.deliveries.insert(low);
    const rows = { low, high };
    await other.query('begin');
    const [holding, wanted] = held === 'lower' ? [low, high] : [high, low];
    await other.query('select id from webhook_deliveries where id = $1 for update', [holding.id]);
    const running = statement(store, rows);
    running.catch(() => undefined); // awaited below, once the other session is done
    await waitingForLock(url, '%webhook_deliveries%');
    await other.query('update webhook_deliveries set updated_at = updated_at where id = $1', [wanted.id]);
    await other.query('commit');
    const result = await running;
    return { result, store, rows, close: () => store.close() };
  } catch (err) {
    await store.close();
    throw err;
  } finally {
    await other.end();
  }
}

describe.skipIf(!postgres)('statements over several deliveries on Postgres lock them in id order', () => {
  // The worker's statements too: a record of attempts failed is a delivery sent again once its lease lapses, a release failed
  // one held until then.
  it.each(['lower', 'higher'] as const)("the worker's record of a batch of attempts (listed higher id first), the %s row held", async (held) => {
    const { result, store, rows, close } = await whileHeld(postgres!.url, held, (s, { low, high }) => s.deliveries.recordAttempts([attempt(high.id), attempt(low.id)]));
    try {
      expect(result).toEqual([1, 1]);
      for (const d of [rows.low, rows.high]) expect(await store.deliveries.byId(d.id)).toMatchObject({ attempts: 1, lease_until: null, next_attempt_at: T0 + 1_000 });
    } finally {
      await close();
    }
  });

  it.each(['lower', 'higher'] as const)('the release of all leases, and of one worker, the %s row held', async (held) => {
    for (const leasedBy of [undefined, WORKER]) {
      const { result, store, rows, close } = await whileHeld(postgres!.url, held, (s) => s.deliveries.releaseLeases(T0 + 10, leasedBy));
      try {
        expect(result).toBe(2);
        for (const d of [rows.low, rows.high]) expect(await store.deliveries.byId(d.id)).toMatchObject({ lease_until: null, leased_by: null });
      } finally {
        await close();
      }
    }
  });

  it.each(['lower', 'higher'] as const)("the worker's release of its claims (listed higher id first), the %s row held", async (held) => {
    const { store, rows, close } = await whileHeld(postgres!.url, held, (s, { low, high }) => s.deliveries.releaseClaims([high.id, low.id], WORKER, T0 + 10));
    try {
      for (const d of [rows.low, rows.high]) expect(await store.deliveries.byId(d.id)).toMatchObject({ lease_until: null, leased_by: null, updated_at: T0 + 10 });
    } finally {
      await close();
    }
  });

  // A user's request (the dashboard's Save, `svc-server keys update`): whichever row the other session holds, it goes on.
  it.each(['lower', 'higher'] as const)("the cancel of a key's pending deliveries (its webhook URL cleared), the %s row held", async (held) => {
    const { result, store, rows, close } = await whileHeld(postgres!.url, held, (s) => s.deliveries.cancelPending('key_a', T0 + 10, 'url removed'));
    try {
      expect(result).toBe(2);
      for (const d of [rows.low, rows.high]) expect(await store.deliveries.byId(d.id)).toMatchObject({ status: 'cancelled', last_error: 'url removed' });
    } finally {
      await close();
    }
  });

  it.each(['lower', 'higher'] as const)("the retarget of a key's pending deliveries (its webhook URL changed), the %s row held", async (held) => {
    const { result, store, rows, close } = await whileHeld(postgres!.url, held, (s) => s.deliveries.retargetPending('key_a', 'https://example.org/new', T0 + 10));
    try {
      expect(result).toBe(2);
      for (const d of [rows.low, rows.high]) expect(await store.deliveries.byId(d.id)).toMatchObject({ status: 'pending', url: 'https://example.org/new' });
    } finally {
      await close();
    }
  });
});
