// An operator's outbox after a long receiver outage: 20,000 deliveries due at once beside the delivered ones.
// The worker's statements (each claim, the look for the next wake-up, the start's release of leases) must find
// their few rows by index, not read every due row: on SQLite each statement holds the event loop, and at
// 100,000 due rows each such read held it 60–200 ms, several times a second.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPostgres } from '../../support/databases.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { claimSql } from '../../../src/storage/sqlite-outbox-store.js';
import { NEXT_DUE, RELEASE_LEASES, RETRYING_OF_USER_SQLITE } from '../../../src/storage/outbox-sql.js';
import { IN_ID_ORDER, nextDueSql } from '../../../src/storage/postgres-outbox-store.js';

const NOW = 1_800_000_000_000;
const DUE = 20_000;

/** `n` rows numbered 1..n, as a FROM clause. */
const series = (n: number) => `(with recursive s(n) as (select 1 union all select n + 1 from s where n < ${n}) select n from s)`;

/** The backlog (parameter: the FROM clause of 1..DUE): delivered rows of a day ago, then the due rows since the outage, every 1,000th leased. */
const SEED = (from: string) => [
  `insert into users (id, email, password_hash, created_at) select 'user_' || (n - 1), 'ops' || n || '@example.test', 'x', ${NOW} from ${from} where n <= 5`,
  `insert into api_keys (id, user_id, name, prefix, key_hash, created_at, updated_at) select 'key_' || (n - 1), 'user_' || ((n - 1) % 5), 'k', 'svc_k', 'hash' || n, ${NOW}, ${NOW} from ${from} where n <= 20`,
  // Another user's key retrying too.
  `insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at, created_at, updated_at)
   select 'whd_other_' || n, 'key_1', 'user_1', 'llm.request.completed', 'chatcmpl-' || n, 'https://other.example/hook', '{}', 'pending', 1, ${NOW + 60_000} + n, ${NOW} + n, ${NOW} + n
   from ${from} where n <= 30`,
  `insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at, created_at, updated_at)
   select 'whd_old_' || n, 'key_' || (n % 20), 'user_' || (n % 5), 'llm.request.completed', 'chatcmpl-' || n, 'https://example.com/hook', '{}', 'delivered', 1, null, ${NOW - 86_400_000} + n, ${NOW - 86_400_000} + n
   from ${from}`,
  `insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at, lease_until, leased_by, created_at, updated_at)
   select 'whd_due_' || n, 'key_0', 'user_0', 'llm.request.completed', 'chatcmpl-' || n, 'https://down.example/hook', '{}', 'pending', 3, ${NOW - 3_600_000} + n,
     case when n % 1000 = 0 then ${NOW + 60_000} + n end, case when n % 1000 = 0 then 'worker-1' end, ${NOW - 7_200_000} + n, ${NOW - 7_200_000} + n
   from ${from}`,
];

// svc never runs ANALYZE: the planner guesses from the schema alone; an operator may have run it.
describe.each([
  ['as svc leaves it, without statistics', false],
  ['after ANALYZE', true],
])('the outbox with a backlog of due deliveries, on SQLite %s (EXPLAIN QUERY PLAN)', (_name, analyze) => {
  let store: Store;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-backlog-'));
    store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
    const db = store.handle.sqlite!;
    for (const text of SEED(series(DUE))) db.exec(text);
    if (analyze) db.exec('analyze');
  });

  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function plan(text: string, params: unknown[]): string {
    const rows = store.handle.sqlite!.prepare(`explain query plan ${text}`).all(...params) as Array<{ detail: string }>;
    return rows.map((r) => r.detail).join(' | ');
  }

  it('a claim updates the rows it picked by id, not every due row', async () => {
    const claim = plan(claimSql(0, 0), [NOW + 60_000, 'w', NOW, NOW, NOW, 64, NOW, NOW]);
    // The sub-select walks the due index in order up to its LIMIT; the UPDATE finds those rows by id.
    expect(claim).toMatch(/^SEARCH webhook_deliveries USING (COVERING )?INDEX sqlite_autoindex_webhook_deliveries_1 \(id=\?\)/);
    expect(claim.match(/deliveries_due_idx/g)).toHaveLength(1);
    const rows = await store.deliveries.claimDue(NOW, 64, 60_000, 'worker-2');
    expect(rows).toHaveLength(64);
    expect(rows[0]!.id).toBe('whd_due_1');
  });

  it("the worker's look for its next wake-up reads only the leased rows (deliveries_leased_idx), as does the release of leases at start", async () => {
    const next = plan(NEXT_DUE, [NOW, NOW]);
    expect(next).toMatch(/USING (COVERING )?INDEX deliveries_leased_idx \(status=\? AND lease_until>\?\)/);
    expect(next).not.toMatch(/deliveries_due_idx \(status=\? AND next_attempt_at<\?\)/);
    expect(plan(RELEASE_LEASES, [NOW])).toMatch(/^SEARCH webhook_deliveries USING INDEX deliveries_leased_idx/);
    // The first lease to lapse: the claim's above (the seeded ones end a second or more after it).
    expect(await store.deliveries.nextDueAfter(NOW)).toBe(NOW + 60_000);
  });

  it("the key list's retrying counts read each of the user's keys from deliveries_retrying_idx alone, and only that user's", async () => {
    const retrying = plan(RETRYING_OF_USER_SQLITE, ['user_0']);
    expect(retrying).toMatch(/SEARCH webhook_deliveries USING COVERING INDEX deliveries_retrying_idx \(key_id=\? AND status=\?\)/);
    expect(retrying).not.toMatch(/deliveries_due_idx/);
    expect(await store.deliveries.retryingOfUser('user_0')).toEqual(new Map([['key_0', { deliveries: DUE, nextAttemptAt: NOW - 3_600_000 + 1 }]]));
    expect(await store.deliveries.retryingOfUser('user_1')).toEqual(new Map([['key_1', { deliveries: 30, nextAttemptAt: NOW + 60_001 }]]));
  });
});

const postgres = await createTestPostgres('outbox-backlog');

describe.skipIf(!postgres)('the outbox with a backlog of due deliveries, on Postgres (EXPLAIN)', () => {
  let store: Store;

  beforeAll(async () => {
    store = await openStore(postgres!.url, { poolSize: 2 });
    for (const text of SEED(`generate_series(1, ${DUE}) as s(n)`)) await sql.raw(text).execute(store.handle.db);
    // As autovacuum leaves it after a bulk of changes.
    await sql`analyze webhook_deliveries`.execute(store.handle.db);
  });

  afterAll(async () => {
    await store?.close();
    await postgres?.drop();
  });

  it("the worker's look for its next wake-up reads only the leased rows (deliveries_leased_idx), on either lease clock", async () => {
    for (const clock of ['database', 'caller'] as const) {
      const text = nextDueSql(clock).replace(/\$(\d)/g, String(NOW));
      const { rows } = await sql.raw<{ 'QUERY PLAN': string }>(`explain ${text}`).execute(store.handle.db);
      const shown = rows.map((r) => r['QUERY PLAN']).join('\n');
      // The next attempt time is the first row of a range of the due index; the leases are only the leased rows'.
      expect(shown).toMatch(/Index (Only )?Scan.* using deliveries_leased_idx/);
      expect(shown).not.toMatch(/Seq Scan|Bitmap/);
      expect(shown.match(/deliveries_due_idx/g) ?? []).toHaveLength(1);
    }
  });

  it('the statements that lock their rows in id order find and update them by index, not by reading the table', async () => {
    const statements: Array<[string, string, unknown[]]> = [
      ['release of leases', IN_ID_ORDER.releaseLeases, [NOW]],
      ["release of one worker's leases", IN_ID_ORDER.releaseLeasesOf, [NOW, 'worker-1']],
      ['release of claims', IN_ID_ORDER.releaseClaims, [NOW, ['whd_due_1000', 'whd_due_2000'], 'worker-1']],
      ["a batch of attempts' lock", IN_ID_ORDER.lockAttempted, [['whd_due_1000', 'whd_due_2000']]],
      ["cancel of a key's pending deliveries", IN_ID_ORDER.cancelPending, ['r', NOW, 'key_1']],
      ["retarget of a key's pending deliveries", IN_ID_ORDER.retargetPending, ['https://example.com/', NOW, 'key_1']],
    ];
    for (const [name, text, params] of statements) {
      const { rows } = await store.handle.db.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain ${text}`, params));
      const shown = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(shown, name).not.toMatch(/Seq Scan/);
      expect(shown, name).toMatch(/(Scan using|Index Scan on) (deliveries_\w+|webhook_deliveries_pkey)/);
    }
  });
});
