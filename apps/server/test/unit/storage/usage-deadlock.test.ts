import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/storage/store.js';
import { createTestPostgres } from '../../support/databases.js';

const pgDb = await createTestPostgres('usage deadlock');

// Each process (and instance) flushes its usage counters every second, the rows of each key in the order its
// requests came. Two flushes holding each other's rows deadlocked on Postgres: one failed (40P01) after
// `deadlock_timeout`, hundreds of times in a few minutes of a two-process soak.
describe.skipIf(!pgDb)('usage counters on Postgres', () => {
  let store: Store;
  let other: Store;
  const gate = new pg.Client({ connectionString: pgDb?.url });
  // Outside the gate's transaction: pg_stat_activity is read once per transaction.
  const watcher = new pg.Client({ connectionString: pgDb?.url });
  beforeAll(async () => {
    store = await openStore(pgDb!.url);
    other = await openStore(pgDb!.url); // another process
    await gate.connect();
    await watcher.connect();
  });
  afterAll(async () => {
    await gate.end();
    await watcher.end();
    await store?.close();
    await other?.close();
    await pgDb?.drop();
  });

  const waitingForLocks = async (n: number) => {
    for (;;) {
      const { rows } = await watcher.query<{ n: number }>(
        "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
      );
      if (rows[0]!.n >= n) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
  };

  it('two flushes of the same keys in different orders both land', async () => {
    const user = await store.users.create({ email: 'usage-deadlock@example.com', passwordHash: 'h', now: 1 });
    const inc = (keyId: string) => ({ keyId, userId: user.id, day: '2026-11-30', requests: 1, inputTokens: 1, outputTokens: 1 });
    // a < b < gates: each flush takes one of a, b, then waits at its gate (held below) while the other takes the
    // other one, so that without an order both then wait for each other.
    await gate.query('begin');
    await gate.query("insert into usage_daily (key_id, user_id, day, requests, input_tokens, output_tokens) values ('key_c1', $1, '2026-11-30', 0, 0, 0), ('key_c2', $1, '2026-11-30', 0, 0, 0)", [user.id]);
    const first = store.usage.add([inc('key_b'), inc('key_c1'), inc('key_a')]);
    const second = other.usage.add([inc('key_a'), inc('key_c2'), inc('key_b')]);
    await waitingForLocks(2);
    await gate.query('rollback');
    const outcomes = await Promise.allSettled([first, second]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : 'ok'))).toEqual(['ok', 'ok']);
    const rows = await store.usage.byDay(user.id, '2026-11-30');
    expect(rows.map((r) => [r.key_id, r.requests])).toEqual([
      ['key_a', 2],
      ['key_b', 2],
      ['key_c1', 1],
      ['key_c2', 1],
    ]);
  });
});
