import { afterAll, describe, expect, it } from 'vitest';
import { deadlockTestPostgres, otherSession, waitingForLock } from '../../support/row-locks.js';
import { openStore } from '../../../src/storage/store.js';
import type { NewDelivery } from '../../../src/storage/outbox-store.js';
import { testDelivery } from '../../support/outbox-rows.js';

// fuzz-routes.test.ts on Postgres (SVC_FUZZ_SEED=1): a bulk redelivery (POST /v1/webhooks/deliveries/redeliver, the
// dashboard's Redeliver all) while the worker recorded attempts of the same deliveries answered 500 internal_error.
// Postgres' log: "deadlock detected" between the redelivery's batch UPDATE and the worker's record of a batch of
// attempts (or its release of claims), each holding a row the other waited for.

const postgres = await deadlockTestPostgres('outbox-redelivery-deadlock');
afterAll(async () => {
  await postgres?.drop();
});

const T0 = 1_700_000_000_000;

function delivery(now: number): NewDelivery {
  return testDelivery({ now });
}

describe.skipIf(!postgres)('a bulk redelivery on Postgres', () => {
  /**
   * Another session holds one of two rows while the redelivery runs and, once the redelivery waits for it, updates the
   * other. When the redelivery took that other row first, each waits for the other, and Postgres fails the redelivery's
   * statement (it waited first, so its check finds the cycle first); the other session goes on.
   */
  async function redeliverWhileHeld(url: string, held: 'lower' | 'higher'): Promise<void> {
    const store = await openStore(url, { poolSize: 4 });
    const other = await otherSession(url);
    try {
      await store.handle.db.deleteFrom('webhook_deliveries').execute();
      const [low, high] = [delivery(T0), delivery(T0 + 1)].sort((a, b) => (a.id < b.id ? -1 : 1)) as [NewDelivery, NewDelivery];
      await store.deliveries.insertMany([low, high]);
      const [holding, wanted] = held === 'lower' ? [low, high] : [high, low];
      await other.query('begin');
      await other.query('select id from webhook_deliveries where id = $1 for update', [holding.id]);
      const redelivery = store.deliveries.redeliverMatching('key_a', { limit: 1000 }, T0 + 10);
      await waitingForLock(url, '%update webhook_deliveries set status = %');
      await other.query('update webhook_deliveries set updated_at = updated_at where id = $1', [wanted.id]);
      await other.query('commit');
      expect(await redelivery).toBe(2);
      for (const d of [low, high]) expect((await store.deliveries.byId(d.id))!).toMatchObject({ status: 'pending', next_attempt_at: T0 + 10 });
    } finally {
      await other.end();
      await store.close();
    }
  }

  // Whichever row the redelivery takes first, one of the two makes the cycle.
  it('meeting a deadlock with another statement over the same rows is sent again, not failed', async () => {
    await redeliverWhileHeld(postgres!.url, 'lower');
    await redeliverWhileHeld(postgres!.url, 'higher');
  });
});
