import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompiledQuery } from 'kysely';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createTestPostgres } from '../../support/databases.js';
import { testDelivery } from '../../support/outbox-rows.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { DB_NOW_MS, type LeaseClock } from '../../../src/storage/postgres-outbox-store.js';
import {
  BACKLOG,
  BY_ID,
  CANCEL,
  CANCEL_PENDING,
  GET_ATTEMPTS,
  GET_DELIVERY,
  GET_DELIVERY_SUMMARY,
  LIST_CURSOR,
  listQuery,
  NEXT_DUE,
  PAYLOAD_HEAD_CHARS,
  PURGE_ATTEMPTS_OF,
  PURGE_BATCH,
  PURGE_DELIVERIES_OF,
  PURGE_NEXT_SIZED,
  PURGE_PAYLOADS_OF,
  REDELIVER,
  RELEASE_LEASES,
  RETARGET_PENDING,
  RETRYING_OF_USER_SQLITE,
  TEST_SEND_LEASE,
  TEST_SENDS_IN_FLIGHT,
  REDELIVER_BATCH,
  RETRYING_SQLITE,
  countMatchingQuery,
  redeliverBatchQuery,
} from '../../../src/storage/outbox-sql.js';
import { claimSql } from '../../../src/storage/sqlite-outbox-store.js';
import { deliveryView } from '../../../src/webhooks/delivery-shapes.js';
import { SqliteStatements } from '../../../src/storage/sqlite-statements.js';
import { newDeliveryId, type AttemptNext, type AttemptRecord, type AttemptResult, type NewDelivery, type SequencedDelivery } from '../../../src/storage/outbox-store.js';

const postgres = await createTestPostgres('outbox-store');
const variants: Array<[string, LeaseClock, () => Promise<{ url: string; cleanup(): Promise<void> }>]> = [
  [
    'sqlite',
    'caller',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'svc-deliveries-'));
      return { url: `sqlite:${join(dir, 'svc.db')}`, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  ],
];
if (postgres) {
  // One database per run; each test empties the tables it uses.
  const open = async () => ({ url: postgres.url, cleanup: async () => {} });
  // The database's clock is what the server runs with.
  variants.push(['postgres, leases on the database clock', 'database', open], ['postgres, leases on the caller clock', 'caller', open]);
}
afterAll(async () => {
  await postgres?.drop();
});

const T0 = 1_700_000_000_000;

describe.each(variants)('OutboxStore on %s', (_name, leaseClock, open) => {
  let store: Store;
  let cleanup: () => Promise<void>;

  beforeEach(async () => {
    const db = await open();
    cleanup = db.cleanup;
    store = await openStore(db.url, { poolSize: 8, leaseClock });
    await store.handle.db.deleteFrom('webhook_attempts').execute();
    await store.handle.db.deleteFrom('webhook_deliveries').execute();
    await store.handle.db.deleteFrom('webhook_payloads').execute();
    await store.handle.db.deleteFrom('delivery_sequences').execute();
  });

  afterEach(async () => {
    await store.close();
    await cleanup();
  });

  function delivery(overrides: Partial<NewDelivery> = {}): NewDelivery {
    const id = overrides.id ?? newDeliveryId();
    return testDelivery({ id, payload: `{"request_id":"chatcmpl-${id}","x":"é"}`, now: T0, ...overrides });
  }

  it('claimDue leaves out the receivers it is told to (by URL origin, wildcards taken literally); releaseClaims gives rows back', async () => {
    const full = delivery({ url: 'https://busy.example:8443/hooks' });
    const underscore = delivery({ url: 'https://a_b.example/x' });
    const other = delivery({ url: 'https://busy.example/hooks' }); // another port: another origin
    await store.deliveries.insertMany([full, underscore, other]);
    const claimed = await store.deliveries.claimDue(T0, 10, 60_000, 'w1', { origins: ['https://busy.example:8443', 'https://aXb.example'], users: [] });
    expect(claimed.map((r) => r.id).sort()).toEqual([underscore.id, other.id].sort());
    await store.deliveries.releaseClaims([underscore.id, other.id], 'someone-else', T0);
    expect(await store.deliveries.claimDue(T0, 10, 60_000, 'w1')).toHaveLength(1);
    await store.deliveries.releaseClaims([underscore.id, other.id, full.id], 'w1', T0);
    expect(await store.deliveries.claimDue(T0, 10, 60_000, 'w2')).toHaveLength(3);
  });

  it('claimDue leaves out the users it is told to (at their share of the worker), whatever their receivers', async () => {
    const busy = delivery({ userId: 'user-busy', url: 'https://one.example/hooks' });
    const busyElsewhere = delivery({ userId: 'user-busy', url: 'https://two.example/hooks' });
    const other = delivery({ userId: 'user-other', url: 'https://one.example/hooks' });
    await store.deliveries.insertMany([busy, busyElsewhere, other]);
    const claimed = await store.deliveries.claimDue(T0, 10, 60_000, 'w1', { origins: [], users: ['user-busy'] });
    expect(claimed.map((r) => r.id)).toEqual([other.id]);
    expect((await store.deliveries.claimDue(T0, 10, 60_000, 'w1')).map((r) => r.id).sort()).toEqual([busy.id, busyElsewhere.id].sort());
  });

  /**
   * Lets every live lease lapse. On the caller's clock a later `now` does that (and the tests pass one); on
   * the database's, no `now` a test passes moves a lease's end, so its end is moved into the past.
   */
  async function leasesLapse(): Promise<void> {
    if (leaseClock === 'database') await store.handle.db.updateTable('webhook_deliveries').set({ lease_until: 0 }).where('lease_until', 'is not', null).execute();
  }

  /**
   * A lease's end as the store reports it, `ms` after `from` on the caller's clock. On the database's clock the
   * lease ran from the database's now a moment ago, so asked at `from` it ends a little before `from + ms`.
   */
  function expectLeaseEnd(actual: number | string | null | undefined, from: number, ms: number): void {
    if (leaseClock === 'caller') return void expect(Number(actual)).toBe(from + ms);
    expect(Number(actual)).toBeLessThanOrEqual(from + ms);
    expect(Number(actual)).toBeGreaterThan(from + ms - 10_000);
  }

  /** Attempts as the worker records them: made under the row's lease as it is now. */
  async function held(records: Array<Omit<AttemptRecord, 'leasedBy'>>): Promise<AttemptRecord[]> {
    return Promise.all(records.map(async (r) => ({ ...r, leasedBy: (await store.deliveries.byId(r.deliveryId))?.leased_by ?? null })));
  }

  /** One attempt, recorded on its own. */
  async function recordAttempt(deliveryId: string, result: AttemptResult, next: AttemptNext): Promise<number> {
    const [attempt] = await store.deliveries.recordAttempts(await held([{ deliveryId, result, next }]));
    return attempt!;
  }

  const success = { attemptedAt: T0 + 1, statusCode: 200, durationMs: 12.4, outcome: 'success' as const, error: null, responseBody: 'ok' };
  const failure = { attemptedAt: T0 + 1, statusCode: 500, durationMs: 30, outcome: 'failure' as const, error: 'HTTP 500', responseBody: 'boom' };

  it('claims only due, unleased rows, oldest due first, up to the limit, without their payloads; stores the exact bytes', async () => {
    const a = delivery({ nextAttemptAt: T0 - 10 });
    const b = delivery({ nextAttemptAt: T0 - 20 });
    const later = delivery({ nextAttemptAt: T0 + 60_000 });
    await store.deliveries.insertMany([a, b, later]);
    const claimed = await store.deliveries.claimDue(T0, 10, 30_000, 'w1');
    expect(claimed.map((r) => r.id)).toEqual([b.id, a.id]);
    expect(claimed[0]).toMatchObject({ status: 'pending', leased_by: 'w1', attempts: 0, url: b.url, user_id: b.userId });
    // Each send reads its own, just before it goes (the worker's PayloadReads).
    expect(claimed[0]).not.toHaveProperty('payload');
    expect(claimed[0]!.payload_bytes).toBe(Buffer.byteLength(b.payload));
    expect(await store.deliveries.payloadOf(b.id)).toEqual({ payload: b.payload, status: 'pending', url: b.url });
    expect(await store.deliveries.stateOf(b.id)).toEqual({ status: 'pending', url: b.url });
    expect(await store.deliveries.payloadOf('whd_missing')).toBeUndefined();
    expect(await store.deliveries.stateOf('whd_missing')).toBeUndefined();
    if (leaseClock === 'caller') expect(claimed[0]!.lease_until).toBe(T0 + 30_000);
    else expect(Number(claimed[0]!.lease_until)).toBeGreaterThan(Date.now());
    // Leased: nobody else gets them until the lease lapses.
    expect(await store.deliveries.claimDue(T0 + 1, 10, 30_000, 'w2')).toEqual([]);
    await leasesLapse();
    const reclaimed = await store.deliveries.claimDue(T0 + 30_000, 1, 30_000, 'w2');
    expect(reclaimed.map((r) => r.id)).toEqual([b.id]);
  });

  it('stores each value of a new delivery under its own column, a hand-over with its lease', async () => {
    const handed = delivery({ now: T0 + 3, nextAttemptAt: T0 + 7, lease: { until: T0 + 45_000, by: 'w-hand' } });
    const plain = delivery({ now: T0 + 4 });
    await store.deliveries.insertMany([handed, plain]);
    const row = await store.deliveries.byId(handed.id);
    expect(row).toEqual({
      id: handed.id,
      key_id: handed.keyId,
      user_id: handed.userId,
      event: handed.event,
      request_id: handed.requestId,
      url: handed.url,
      payload: handed.payload,
      status: 'pending',
      attempts: 0,
      next_attempt_at: T0 + 7,
      lease_until: row!.lease_until,
      leased_by: 'w-hand',
      last_status_code: null,
      last_error: null,
      created_at: T0 + 3,
      updated_at: T0 + 3,
      delivered_at: null,
    });
    if (leaseClock === 'caller') expect(row!.lease_until).toBe(T0 + 45_000);
    else {
      // The lease's length (until - now) from the database's now.
      const { rows } = await store.handle.db.executeQuery<{ left: string }>(CompiledQuery.raw(`select lease_until - ${DB_NOW_MS} as left from webhook_deliveries where id = $1`, [handed.id]));
      expect(Number(rows[0]!.left)).toBeLessThanOrEqual(44_997);
      expect(Number(rows[0]!.left)).toBeGreaterThan(34_997);
    }
    expect(await store.deliveries.byId(plain.id)).toMatchObject({ next_attempt_at: T0 + 4, lease_until: null, leased_by: null, created_at: T0 + 4 });
  });

  it('never hands the same row to two concurrent claimers', async () => {
    const rows = Array.from({ length: 40 }, () => delivery());
    await store.deliveries.insertMany(rows);
    const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => store.deliveries.claimDue(T0, 10, 30_000, `w${i}`)));
    const ids = claims.flat().map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBeLessThanOrEqual(40);
    // Whatever the first round left is claimable next.
    const rest = await store.deliveries.claimDue(T0, 100, 30_000, 'w9');
    expect(ids.length + rest.length).toBe(40);
  });

  it('insertTestSend: at most `max` of a key in flight, counted over concurrent callers; ended or lapsed ones and other keys do not count', async () => {
    const testSend = (keyId = 'key_a', now = T0) => delivery({ keyId, now, lease: { until: now + 60_000, by: TEST_SEND_LEASE } });
    const results = await Promise.all(Array.from({ length: 10 }, () => store.deliveries.insertTestSend(testSend(), 4)));
    expect(results.filter((r) => r.inserted)).toHaveLength(4);
    expect(results.filter((r) => !r.inserted).every((r) => r.inFlight === 4)).toBe(true);
    expect(await store.deliveries.insertTestSend(testSend('key_b'), 4)).toEqual({ inFlight: 0, inserted: true });
    // Their leases lapsed (a process that died mid-send): they no longer count.
    await leasesLapse();
    expect(await store.deliveries.insertTestSend(testSend('key_a', T0 + 60_000), 4)).toEqual({ inFlight: 0, inserted: true });
  });

  it('records attempts in order, moves the status on and releases the lease', async () => {
    const d = delivery();
    await store.deliveries.insert(d);
    await store.deliveries.claimDue(T0, 1, 30_000, 'w1');
    expect(await recordAttempt(d.id, failure, { status: 'pending', nextAttemptAt: T0 + 5_000 })).toBe(1);
    let row = await store.deliveries.byId(d.id);
    expect(row).toMatchObject({ status: 'pending', attempts: 1, next_attempt_at: T0 + 5_000, lease_until: null, leased_by: null, last_status_code: 500, last_error: 'HTTP 500' });
    await store.deliveries.claimDue(T0 + 5_000, 1, 30_000, 'w1');
    expect(await recordAttempt(d.id, { ...success, attemptedAt: T0 + 5_001 }, { status: 'delivered' })).toBe(2);
    row = await store.deliveries.byId(d.id);
    expect(row).toMatchObject({ status: 'delivered', attempts: 2, next_attempt_at: null, delivered_at: T0 + 5_001, last_status_code: 200, last_error: null });
    const found = await store.deliveries.get('key_a', d.id);
    expect(found?.attempts.map((a) => [a.attempt, a.status_code, a.outcome, a.error, a.response_body, a.duration_ms])).toEqual([
      [1, 500, 'failure', 'HTTP 500', 'boom', 30],
      [2, 200, 'success', null, 'ok', 12],
    ]);
    expect(found?.delivery.payload).toBe(d.payload);
  });

  it('records a batch of 70 mixed attempts in one call (chunks of 64 + 4 + 2), each delivery moved on by its own result', async () => {
    const rows = Array.from({ length: 70 }, () => delivery());
    await store.deliveries.insertMany(rows);
    await recordAttempt(rows[5]!.id, failure, { status: 'pending', nextAttemptAt: T0 });
    const batch = rows.map((d, i) => {
      const attemptedAt = T0 + 10 + i;
      if (i % 3 === 0) return { deliveryId: d.id, result: { ...failure, attemptedAt, error: `HTTP 5${i}` }, next: { status: 'pending' as const, nextAttemptAt: T0 + 1_000 + i } };
      if (i % 7 === 0) return { deliveryId: d.id, result: { ...failure, attemptedAt, statusCode: null }, next: { status: 'failed' as const } };
      return { deliveryId: d.id, result: { ...success, attemptedAt, statusCode: 200 + (i % 5), responseBody: `ok ${i}` }, next: { status: 'delivered' as const } };
    });
    const numbers = await store.deliveries.recordAttempts(await held(batch));
    expect(numbers).toEqual(rows.map((_, i) => (i === 5 ? 2 : 1)));
    for (const [i, d] of rows.entries()) {
      const found = await store.deliveries.get('key_a', d.id);
      const { result, next } = batch[i]!;
      expect(found?.delivery).toMatchObject({
        status: next.status,
        attempts: i === 5 ? 2 : 1,
        next_attempt_at: next.status === 'pending' ? next.nextAttemptAt : null,
        lease_until: null,
        last_status_code: result.statusCode,
        last_error: result.error,
        updated_at: result.attemptedAt,
        delivered_at: next.status === 'delivered' ? result.attemptedAt : null,
      });
      expect(found?.attempts.at(-1)).toMatchObject({ attempt: i === 5 ? 2 : 1, attempted_at: result.attemptedAt, status_code: result.statusCode, error: result.error, response_body: result.responseBody });
    }
  });

  it('counts each attempt when a batch holds one delivery twice', async () => {
    const d = delivery();
    await store.deliveries.insert(d);
    const numbers = await store.deliveries.recordAttempts([
      { deliveryId: d.id, result: failure, next: { status: 'pending', nextAttemptAt: T0 + 10 }, leasedBy: null },
      { deliveryId: d.id, result: { ...success, attemptedAt: T0 + 20 }, next: { status: 'delivered' }, leasedBy: null },
    ]);
    expect(numbers).toEqual([1, 2]);
    const found = await store.deliveries.get('key_a', d.id);
    expect(found?.delivery).toMatchObject({ status: 'delivered', attempts: 2, delivered_at: T0 + 20, last_status_code: 200 });
    expect(found?.attempts.map((a) => a.attempt)).toEqual([1, 2]);
  });

  it('records nothing of a batch naming a delivery that does not exist', async () => {
    const d = delivery();
    await store.deliveries.insert(d);
    await expect(
      store.deliveries.recordAttempts([
        { deliveryId: d.id, result: success, next: { status: 'delivered' }, leasedBy: null },
        { deliveryId: 'whd_missing', result: success, next: { status: 'delivered' }, leasedBy: null },
      ]),
    ).rejects.toThrow('delivery whd_missing does not exist');
    expect(await store.deliveries.get('key_a', d.id)).toMatchObject({ delivery: { status: 'pending', attempts: 0 }, attempts: [] });
  });

  it('records while another transaction holds the connection (SQLite: the statements wait for it)', async () => {
    const rows = Array.from({ length: 3 }, () => delivery());
    await store.deliveries.insertMany(rows);
    let recorded: Promise<number[]> | undefined;
    await store.handle.db.transaction().execute(async (trx) => {
      await trx.selectFrom('webhook_deliveries').select('id').execute();
      recorded = store.deliveries.recordAttempts(rows.map((d) => ({ deliveryId: d.id, result: success, next: { status: 'delivered' as const }, leasedBy: null })));
    });
    expect(await recorded).toEqual([1, 1, 1]);
    expect((await store.deliveries.list('key_a', { limit: 10, status: 'delivered' })).rows).toHaveLength(3);
  });

  it('lists one key newest first with a cursor and a status filter; get is scoped to the key', async () => {
    const rows = [0, 1, 2, 3, 4].map((i) => delivery({ now: T0 + i }));
    await store.deliveries.insertMany([...rows, delivery({ keyId: 'key_b' })]);
    await recordAttempt(rows[1]!.id, failure, { status: 'failed' });
    const page1 = await store.deliveries.list('key_a', { limit: 2 });
    expect(page1.rows.map((r) => r.id)).toEqual([rows[4]!.id, rows[3]!.id]);
    expect(page1.hasMore).toBe(true);
    const page2 = await store.deliveries.list('key_a', { limit: 2, before: rows[3]!.id });
    expect(page2.rows.map((r) => r.id)).toEqual([rows[2]!.id, rows[1]!.id]);
    const page3 = await store.deliveries.list('key_a', { limit: 2, before: rows[1]!.id });
    expect(page3).toMatchObject({ hasMore: false });
    expect(page3.rows.map((r) => r.id)).toEqual([rows[0]!.id]);
    expect((await store.deliveries.list('key_a', { limit: 10, status: 'failed' })).rows.map((r) => r.id)).toEqual([rows[1]!.id]);
    expect(await store.deliveries.list('key_b', { limit: 10, before: rows[3]!.id })).toEqual({ rows: [], hasMore: false });
    expect(await store.deliveries.get('key_b', rows[0]!.id)).toBeUndefined();
  });

  it('a page holds no payload, only its head with the request status the list shows (9 MB prompts: a page of 100 read 1 GB)', async () => {
    const prompt = 'x'.repeat(2 * 1024 * 1024);
    const big = delivery({ payload: JSON.stringify({ event: 'llm.request.completed', request_id: 'chatcmpl-big', status_code: 502, prompt }) });
    await store.deliveries.insertMany([big]);
    const { rows } = await store.deliveries.list('key_a', { limit: 10 });
    expect(rows).toHaveLength(1);
    expect(rows[0]).not.toHaveProperty('payload');
    expect(rows[0]!.payload_head.length).toBe(PAYLOAD_HEAD_CHARS);
    expect(deliveryView(rows[0]!).request_status_code).toBe(502);
    // The delivery itself still has every byte.
    expect((await store.deliveries.get('key_a', big.id))?.delivery.payload).toBe(big.payload);
  });

  it('lists by request, creation time and the last attempt\'s HTTP status, with the cursor, one key only', async () => {
    const rows = [0, 1, 2, 3, 4].map((i) => delivery({ now: T0 + i * 1000 }));
    await store.deliveries.insertMany([...rows, delivery({ keyId: 'key_b', requestId: rows[2]!.requestId })]);
    await recordAttempt(rows[1]!.id, failure, { status: 'failed' });
    await recordAttempt(rows[3]!.id, { ...failure, statusCode: 503, error: 'HTTP 503' }, { status: 'pending', nextAttemptAt: T0 + 60_000 });
    await recordAttempt(rows[4]!.id, success, { status: 'delivered' });
    const ids = async (options: Parameters<Store['deliveries']['list']>[1]) => (await store.deliveries.list('key_a', options)).rows.map((r) => r.id);
    expect(await ids({ limit: 10, requestId: rows[2]!.requestId })).toEqual([rows[2]!.id]);
    expect(await ids({ limit: 10, requestId: 'chatcmpl-none' })).toEqual([]);
    expect(await ids({ limit: 10, since: T0 + 1000, until: T0 + 3000 })).toEqual([rows[2]!.id, rows[1]!.id]);
    expect(await ids({ limit: 10, lastStatusCode: { min: 500, max: 599 } })).toEqual([rows[3]!.id, rows[1]!.id]);
    expect(await ids({ limit: 10, lastStatusCode: { min: 503, max: 503 } })).toEqual([rows[3]!.id]);
    expect(await ids({ limit: 10, lastStatusCode: { min: 500, max: 599 }, status: 'failed' })).toEqual([rows[1]!.id]);
    const first = await store.deliveries.list('key_a', { limit: 1, lastStatusCode: { min: 500, max: 599 } });
    expect(first.hasMore).toBe(true);
    expect(await ids({ limit: 10, lastStatusCode: { min: 500, max: 599 }, before: first.rows[0]!.id })).toEqual([rows[1]!.id]);
  });

  it("a payload longer than a page's head is stored once beside its row, which holds the head: claims read none of it, reads give it whole, a purge takes it", async () => {
    // The head ends inside a surrogate pair (an emoji at characters 1023-1024): cut before it, never in half.
    const apart = (requestId: string, statusCode: number) => {
      const start = `{"event":"llm.request.completed","request_id":"${requestId}","status_code":${statusCode},"prompt":"`;
      return `${start}${'p'.repeat(PAYLOAD_HEAD_CHARS - 1 - start.length)}😀${'é'.repeat(3 * 1024 * 1024)}"}`;
    };
    const big = delivery({ payload: apart('chatcmpl-big', 502) });
    expect(big.payload.charCodeAt(PAYLOAD_HEAD_CHARS - 1)).toBe('😀'.charCodeAt(0));
    const small = delivery();
    await store.deliveries.insertMany([big, small]);
    const { payload: _payload, ...sequencedFields } = delivery({ keyId: 'key_b' });
    const [numbered] = await store.deliveries.insertSequenced([{ ...sequencedFields, serialise: (n) => apart(`chatcmpl-seq-${n}`, 200) }]);
    const test = delivery({ keyId: 'key_c', payload: apart('test-1', 200), lease: { until: T0 + 60_000, by: TEST_SEND_LEASE } });
    expect(await store.deliveries.insertTestSend(test, 5)).toEqual({ inFlight: 0, inserted: true });
    // A row stored before 017: the payload whole in the row, nothing beside it.
    const legacy = delivery({ payload: apart('chatcmpl-legacy', 400) });
    await store.handle.db
      .insertInto('webhook_deliveries')
      .values({ id: legacy.id, key_id: 'key_a', user_id: legacy.userId, event: legacy.event, request_id: legacy.requestId, url: legacy.url, payload: legacy.payload, status: 'pending', attempts: 0, next_attempt_at: T0, created_at: T0 - 1, updated_at: T0 - 1 })
      .execute();

    const apartIds = [big.id, numbered!.id, test.id].sort();
    expect((await store.handle.db.selectFrom('webhook_payloads').select('delivery_id').execute()).map((r) => r.delivery_id).sort()).toEqual(apartIds);
    const inRows = await store.handle.db.selectFrom('webhook_deliveries').select(['id', 'payload']).execute();
    for (const { id, payload } of inRows) {
      const whole = [big, small, numbered!, test, legacy].find((d) => d.id === id)!.payload;
      expect(payload).toBe(apartIds.includes(id) ? whole.slice(0, PAYLOAD_HEAD_CHARS - 1) : whole);
    }

    const claimed = await store.deliveries.claimDue(T0, 10, 1_000, 'w');
    expect(claimed.map((r) => r.id).sort()).toEqual([big, small, numbered!, legacy].map((d) => d.id).sort());
    for (const row of claimed) expect(row).not.toHaveProperty('payload');
    expect(new Map(claimed.map((r) => [r.id, r.payload_bytes]))).toEqual(new Map([big, small, numbered!, legacy].map((d) => [d.id, Buffer.byteLength(d.payload)])));
    for (const d of [big, small, numbered!, legacy, test]) expect((await store.deliveries.payloadOf(d.id))?.payload).toBe(d.payload);
    expect((await store.deliveries.byId(test.id))?.payload).toBe(test.payload);
    expect((await store.deliveries.get('key_a', big.id))?.delivery.payload).toBe(big.payload);
    expect((await store.deliveries.get('key_a', legacy.id))?.delivery.payload).toBe(legacy.payload);
    const page = await store.deliveries.list('key_a', { limit: 10 });
    expect(new Map(page.rows.map((r) => [r.id, deliveryView(r).request_status_code]))).toEqual(new Map([[big.id, 502], [small.id, null], [legacy.id, 400]]));

    await recordAttempt(big.id, failure, { status: 'failed' });
    const redelivered = await store.deliveries.redeliver('key_a', big.id, T0 + 10);
    expect(redelivered).toMatchObject({ status: 'pending', payload_head: big.payload.slice(0, PAYLOAD_HEAD_CHARS - 1) });
    expect(deliveryView(redelivered!).request_status_code).toBe(502);
    expect(await store.deliveries.cancel('key_a', big.id, T0 + 20, 'stop')).toMatchObject({ status: 'cancelled', payload_head: big.payload.slice(0, PAYLOAD_HEAD_CHARS - 1) });
    expect((await store.deliveries.byId(big.id))?.payload).toBe(big.payload);

    // The cancelled delivery goes with its payload; the pending ones keep theirs.
    expect(await store.deliveries.purgeOlderThan(T0 + 1)).toBe(1);
    expect((await store.handle.db.selectFrom('webhook_payloads').select('delivery_id').execute()).map((r) => r.delivery_id).sort()).toEqual([numbered!.id, test.id].sort());
    expect((await store.deliveries.byId(numbered!.id))?.payload).toBe(numbered!.payload);
  });

  it('redelivers with the same id and bytes, due now, for the owning key only', async () => {
    const d = delivery();
    await store.deliveries.insert(d);
    await recordAttempt(d.id, failure, { status: 'failed' });
    expect(await store.deliveries.redeliver('key_b', d.id, T0 + 100)).toBeUndefined();
    const row = await store.deliveries.redeliver('key_a', d.id, T0 + 100, 'https://example.org/new');
    expect(row).toMatchObject({ id: d.id, status: 'pending', next_attempt_at: T0 + 100, payload_head: d.payload, url: 'https://example.org/new', attempts: 1 });
    expect((await store.deliveries.claimDue(T0 + 100, 5, 1_000, 'w')).map((r) => [r.id, r.url])).toEqual([[d.id, 'https://example.org/new']]);
    expect((await store.deliveries.payloadOf(d.id))?.payload).toBe(d.payload);
  });

  it('a redeliver during an attempt stands: the attempt is logged but does not move the row on; a lapsed lease is the newer attempt\'s', async () => {
    const d = delivery();
    await store.deliveries.insert(d);
    await store.deliveries.claimDue(T0, 1, 30_000, 'w1');
    await store.deliveries.redeliver('key_a', d.id, T0 + 5);
    await store.deliveries.recordAttempts([{ deliveryId: d.id, result: success, next: { status: 'delivered' }, leasedBy: 'w1' }]);
    expect(await store.deliveries.byId(d.id)).toMatchObject({ status: 'pending', attempts: 1, next_attempt_at: T0 + 5, leased_by: null });
    expect((await store.deliveries.claimDue(T0 + 5, 5, 30_000, 'w2')).map((r) => r.id)).toEqual([d.id]);

    // w2's lease lapses and w3 takes the row; w2's late failure leaves w3's attempt in charge, w3's success moves it on.
    await leasesLapse();
    const [again] = await store.deliveries.claimDue(T0 + 40_000, 5, 30_000, 'w3');
    expect(again?.id).toBe(d.id);
    await store.deliveries.recordAttempts([{ deliveryId: d.id, result: failure, next: { status: 'pending', nextAttemptAt: T0 + 99_000 }, leasedBy: 'w2' }]);
    expect(await store.deliveries.byId(d.id)).toMatchObject({ status: 'pending', attempts: 2, leased_by: 'w3', next_attempt_at: T0 + 5 });
    await store.deliveries.recordAttempts([{ deliveryId: d.id, result: success, next: { status: 'delivered' }, leasedBy: 'w3' }]);
    expect(await store.deliveries.byId(d.id)).toMatchObject({ status: 'delivered', attempts: 3, leased_by: null, lease_until: null });
  });

  it('redeliverMatching: by status and creation time, newest first up to the limit, one key only; countMatching agrees', async () => {
    const old = delivery({ now: T0 - 10_000 });
    const a = delivery({ now: T0 });
    const b = delivery({ now: T0 + 1 });
    const delivered = delivery({ now: T0 + 2 });
    const otherKey = delivery({ now: T0, keyId: 'key_b' });
    await store.deliveries.insertMany([old, a, b, delivered, otherKey]);
    for (const d of [old, a, b, otherKey]) await recordAttempt(d.id, failure, { status: 'failed' });
    await recordAttempt(delivered.id, success, { status: 'delivered' });

    const failedSince = { status: 'failed' as const, since: T0, limit: 1000 };
    expect(await store.deliveries.countMatching('key_a', failedSince)).toBe(2);
    expect(await store.deliveries.countMatching('key_a', { status: 'failed', limit: 1000 })).toBe(3);
    expect(await store.deliveries.countMatching('key_a', { status: 'failed', until: T0, limit: 1000 })).toBe(1);
    expect(await store.deliveries.countMatching('key_a', { limit: 1000 })).toBe(4);
    expect(await store.deliveries.countMatching('key_a', { status: 'failed', limit: 1 })).toBe(1);

    // The cap takes the newest.
    expect(await store.deliveries.redeliverMatching('key_a', { ...failedSince, limit: 1 }, T0 + 100)).toBe(1);
    expect((await store.deliveries.byId(b.id))!).toMatchObject({ status: 'pending', next_attempt_at: T0 + 100, payload: b.payload, attempts: 1 });
    expect((await store.deliveries.byId(a.id))!.status).toBe('failed');
    expect(await store.deliveries.redeliverMatching('key_a', failedSince, T0 + 200, 'https://example.org/new')).toBe(1);
    expect((await store.deliveries.byId(a.id))!).toMatchObject({ status: 'pending', url: 'https://example.org/new' });
    expect((await store.deliveries.byId(old.id))!.status).toBe('failed');
    expect((await store.deliveries.byId(otherKey.id))!.status).toBe('failed');
    expect((await store.deliveries.byId(delivered.id))!.status).toBe('delivered');
  });

  it('redeliverMatching and countMatching take the list\'s search too: a request, the last attempt\'s HTTP code, with the status', async () => {
    const rows = [0, 1, 2, 3].map((i) => delivery({ now: T0 + i }));
    const otherKey = delivery({ now: T0, keyId: 'key_b' });
    await store.deliveries.insertMany([...rows, otherKey]);
    await recordAttempt(rows[0]!.id, failure, { status: 'failed' });
    await recordAttempt(rows[1]!.id, { ...failure, statusCode: 503, error: 'HTTP 503' }, { status: 'failed' });
    await recordAttempt(rows[2]!.id, failure, { status: 'pending', nextAttemptAt: T0 + 60_000 });
    await recordAttempt(rows[3]!.id, success, { status: 'delivered' });
    await recordAttempt(otherKey.id, failure, { status: 'failed' });
    const code500 = { min: 500, max: 500 };
    // What each filter lists is what it counts and redelivers.
    for (const filter of [{ lastStatusCode: code500 }, { lastStatusCode: { min: 500, max: 599 }, status: 'failed' as const }, { requestId: rows[1]!.requestId }]) {
      const listed = (await store.deliveries.list('key_a', { ...filter, limit: 100 })).rows.length;
      expect(await store.deliveries.countMatching('key_a', { ...filter, limit: 1000 }), JSON.stringify(filter)).toBe(listed);
    }
    expect(await store.deliveries.countMatching('key_a', { lastStatusCode: code500, limit: 1000 })).toBe(2);
    expect(await store.deliveries.redeliverMatching('key_a', { lastStatusCode: code500, status: 'failed', limit: 1000 }, T0 + 100)).toBe(1);
    expect((await store.deliveries.byId(rows[0]!.id))!).toMatchObject({ status: 'pending', next_attempt_at: T0 + 100 });
    expect((await store.deliveries.byId(rows[1]!.id))!.status).toBe('failed');
    expect((await store.deliveries.byId(otherKey.id))!.status).toBe('failed');
    expect(await store.deliveries.redeliverMatching('key_a', { requestId: rows[1]!.requestId, limit: 1000 }, T0 + 200)).toBe(1);
    expect((await store.deliveries.byId(rows[1]!.id))!).toMatchObject({ status: 'pending', next_attempt_at: T0 + 200 });
    expect((await store.deliveries.byId(rows[3]!.id))!.status).toBe('delivered');
  });

  it('progress: a delivery and its attempts without its payload, scoped to the key', async () => {
    const big = delivery({ payload: JSON.stringify({ event: 'llm.request.completed', request_id: 'chatcmpl-big', status_code: 200, prompt: 'x'.repeat(PAYLOAD_HEAD_CHARS * 4) }) });
    await store.deliveries.insertMany([big]);
    await recordAttempt(big.id, failure, { status: 'pending', nextAttemptAt: T0 + 60_000 });
    const found = await store.deliveries.progress('key_a', big.id);
    expect(found?.delivery).not.toHaveProperty('payload');
    expect(found?.delivery).toMatchObject({ id: big.id, status: 'pending', attempts: 1 });
    expect(found?.attempts.map((a) => a.status_code)).toEqual([failure.statusCode]);
    expect(await store.deliveries.progress('key_b', big.id)).toBeUndefined();
  });

  it('redeliverMatching in batches of REDELIVER_BATCH: every matching row once, the count right, a read answered between batches', async () => {
    const n = 2 * REDELIVER_BATCH + 300;
    // Several rows per millisecond: the cursor between batches goes by (created_at, id).
    const failedRows = Array.from({ length: n }, (_, i) => delivery({ now: T0 + Math.floor(i / 7) }));
    const delivered = delivery({ now: T0 + 5 });
    const otherKey = delivery({ now: T0, keyId: 'key_b' });
    await store.deliveries.insertMany([...failedRows, delivered, otherKey]);
    await store.deliveries.recordAttempts([...failedRows, otherKey].map((d) => ({ deliveryId: d.id, result: failure, next: { status: 'failed' as const }, leasedBy: null })));
    await recordAttempt(delivered.id, success, { status: 'delivered' });
    const answered: string[] = [];
    const bulk = store.deliveries.redeliverMatching('key_a', { status: 'failed', limit: 20_000 }, T0 + 100).then((count) => {
      answered.push('redeliver');
      return count;
    });
    const read = new Promise((resolve) => setImmediate(resolve)).then(() => store.deliveries.byId(delivered.id)).then(() => answered.push('read'));
    expect(await bulk).toBe(n);
    await read;
    // SQLite has one writer: a read waits for the write transaction, so only batches let it in between. Postgres
    // reads never wait for row locks (MVCC), so there the order only says which finished first on a busy machine.
    if (store.handle.sqlite) expect(answered).toEqual(['read', 'redeliver']);
    else expect(answered.sort()).toEqual(['read', 'redeliver']);
    const rows = await store.handle.db.selectFrom('webhook_deliveries').select(['id', 'status', 'next_attempt_at']).where('key_id', '=', 'key_a').execute();
    expect(rows.filter((r) => r.status === 'pending').map((r) => r.id).sort()).toEqual(failedRows.map((d) => d.id).sort());
    expect(rows.filter((r) => r.status === 'pending').every((r) => Number(r.next_attempt_at) === T0 + 100)).toBe(true);
    expect((await store.deliveries.byId(delivered.id))!.status).toBe('delivered');
    expect((await store.deliveries.byId(otherKey.id))!.status).toBe('failed');
    // Nothing failed is left: a second call finds none.
    expect(await store.deliveries.redeliverMatching('key_a', { status: 'failed', limit: 20_000 }, T0 + 200)).toBe(0);
  });

  it('redeliverMatching: two concurrent bulk redeliveries take each row once between them; without a status filter the limit takes the newest across batches', async () => {
    const n = 2 * REDELIVER_BATCH + 10;
    const rows = Array.from({ length: n }, (_, i) => delivery({ now: T0 + Math.floor(i / 3) }));
    await store.deliveries.insertMany(rows);
    await store.deliveries.recordAttempts(rows.map((d) => ({ deliveryId: d.id, result: failure, next: { status: 'failed' as const }, leasedBy: null })));
    const filter = { status: 'failed' as const, limit: 20_000 };
    const [a, b] = await Promise.all([store.deliveries.redeliverMatching('key_a', filter, T0 + 100), store.deliveries.redeliverMatching('key_a', filter, T0 + 100)]);
    expect(a + b).toBe(n);
    expect(await store.deliveries.countMatching('key_a', filter)).toBe(0);

    // Any status, limit past one batch: the newest `limit` rows, each once.
    const limit = REDELIVER_BATCH + 5;
    expect(await store.deliveries.countMatching('key_a', { limit })).toBe(limit);
    expect(await store.deliveries.redeliverMatching('key_a', { limit }, T0 + 300)).toBe(limit);
    const touched = await store.handle.db.selectFrom('webhook_deliveries').select('id').where('next_attempt_at', '=', T0 + 300).execute();
    const newest = [...rows].sort((x, y) => y.now - x.now || (y.id < x.id ? -1 : 1)).slice(0, limit);
    expect(touched.map((r) => r.id).sort()).toEqual(newest.map((d) => d.id).sort());
  });

  it('retrying: the pending deliveries of a key that have failed at least once, and the earliest next attempt', async () => {
    expect(await store.deliveries.retrying('key_a')).toEqual({ deliveries: 0, nextAttemptAt: null });
    const a = delivery();
    const b = delivery();
    const fresh = delivery();
    await store.deliveries.insertMany([a, b, fresh]);
    await recordAttempt(a.id, failure, { status: 'pending', nextAttemptAt: T0 + 5_000 });
    await recordAttempt(b.id, failure, { status: 'pending', nextAttemptAt: T0 + 3_000 });
    expect(await store.deliveries.retrying('key_a')).toEqual({ deliveries: 2, nextAttemptAt: T0 + 3_000 });
    expect(await store.deliveries.retrying('key_b')).toEqual({ deliveries: 0, nextAttemptAt: null });
    // The key list's one query: every key of the user at once, the same counts; another user's are not there.
    for (const [keyId, userId] of [['key_a', a.userId], ['key_b', a.userId], ['key_c', 'user-elsewhere']] as const) {
      await store.handle.db.insertInto('users').values({ id: userId, email: `${userId}@example.test`, password_hash: 'x', created_at: T0 }).onConflict((oc) => oc.doNothing()).execute();
      await store.handle.db
        .insertInto('api_keys')
        // With the URL their deliveries go to: on Postgres (one database for the file) the keys outlive this test, and an
        // audit delivery of a key without a URL is not inserted.
        .values({ id: keyId, user_id: userId, name: keyId, prefix: 'svc_k', key_hash: `hash-${keyId}`, webhook_url: 'https://example.com/hooks', created_at: T0, updated_at: T0 })
        .onConflict((oc) => oc.doNothing())
        .execute();
    }
    const onB = delivery({ keyId: 'key_b' });
    const elsewhere = delivery({ keyId: 'key_c', userId: 'user-elsewhere' });
    await store.deliveries.insertMany([onB, elsewhere]);
    await recordAttempt(onB.id, failure, { status: 'pending', nextAttemptAt: T0 + 9_000 });
    await recordAttempt(elsewhere.id, failure, { status: 'pending', nextAttemptAt: T0 + 1_000 });
    expect(await store.deliveries.retryingOfUser(a.userId)).toEqual(
      new Map([
        ['key_a', { deliveries: 2, nextAttemptAt: T0 + 3_000 }],
        ['key_b', { deliveries: 1, nextAttemptAt: T0 + 9_000 }],
      ]),
    );
  });

  it('reports the next future due time and the backlog', async () => {
    expect(await store.deliveries.nextDueAfter(T0)).toBeUndefined();
    const a = delivery({ nextAttemptAt: T0 + 500 });
    const b = delivery({ nextAttemptAt: T0 + 200 });
    const due = delivery({ nextAttemptAt: T0 - 1 });
    const c = delivery();
    await store.deliveries.insertMany([a, b, due, c]);
    await recordAttempt(c.id, failure, { status: 'failed' });
    expect(await store.deliveries.nextDueAfter(T0)).toBe(T0 + 200);
    expect(await store.deliveries.nextDueAfter(T0 + 200)).toBe(T0 + 500);
    expect(await store.deliveries.backlog(T0)).toEqual({ pending: 3, due: 1, failed: 1 });
  });

  it('nextDueAfter: the next retry, or when a live lease lapses, whichever is first', async () => {
    const leased = delivery();
    await store.deliveries.insert(leased);
    expect(await store.deliveries.claimDue(T0, 1, 30_000, 'w1')).toHaveLength(1);
    expectLeaseEnd(await store.deliveries.nextDueAfter(T0), T0, 30_000);
    const retry = delivery({ nextAttemptAt: T0 + 500 });
    await store.deliveries.insert(retry);
    expect(await store.deliveries.nextDueAfter(T0)).toBe(T0 + 500);
    expectLeaseEnd(await store.deliveries.nextDueAfter(T0 + 500), T0 + 500, leaseClock === 'caller' ? 29_500 : 30_000);
    // Recorded: the lease is gone with it.
    await recordAttempt(leased.id, success, { status: 'delivered' });
    expect(await store.deliveries.nextDueAfter(T0 + 500)).toBeUndefined();
  });

  it('claims carry the sealed signing secret of their key (null without one)', async () => {
    const user = await store.users.create({ email: `${newDeliveryId()}@example.test`, passwordHash: 'x', now: T0 });
    const key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: newDeliveryId(), now: T0, signingSecretEnc: 'sealed-secret' });
    const signed = delivery({ keyId: key.id });
    const unsigned = delivery();
    await store.deliveries.insertMany([signed, unsigned]);
    const claimed = await store.deliveries.claimDue(T0, 10, 30_000, 'w1');
    expect(Object.fromEntries(claimed.map((r) => [r.id, r.signing_secret_enc]))).toEqual({ [signed.id]: 'sealed-secret', [unsigned.id]: null });
  });

  it('writes made while a transaction is open on the connection commit on their own: a rollback of it keeps them', async () => {
    const recorded = delivery();
    await store.deliveries.insert(recorded);
    const inserted = delivery();
    let writes: Promise<unknown> | undefined;
    await expect(
      store.handle.db.transaction().execute(async (trx) => {
        await trx.selectFrom('webhook_deliveries').select('id').execute();
        // SQLite: the one connection is inside this transaction now, so the store cannot run its statements at once.
        if (store.handle.sqlite) expect(store.handle.sqlite.inTransaction).toBe(true);
        writes = Promise.all([
          store.deliveries.insertMany([inserted]),
          store.deliveries.recordAttempts([{ deliveryId: recorded.id, result: success, next: { status: 'delivered' }, leasedBy: null }]),
        ]);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await writes;
    expect(await store.deliveries.byId(inserted.id)).toMatchObject({ status: 'pending', payload: inserted.payload });
    expect(await store.deliveries.byId(recorded.id)).toMatchObject({ status: 'delivered', attempts: 1 });
  });

  function sequenced(keyId: string): SequencedDelivery {
    const { payload: _payload, ...rest } = delivery({ keyId });
    return { ...rest, serialise: (sequence) => JSON.stringify({ request_id: rest.requestId, sequence }) };
  }

  async function sequencesOf(keyId: string): Promise<number[]> {
    const rows = await store.handle.db.selectFrom('webhook_deliveries').select('payload').where('key_id', '=', keyId).execute();
    return rows.map((r) => (JSON.parse(r.payload) as { sequence?: number }).sequence ?? 0).sort((a, b) => a - b);
  }

  it('numbers audit deliveries per key in insert order, across batches; a rolled-back batch and test deliveries take no number', async () => {
    const first = await store.deliveries.insertSequenced([sequenced('key_a'), sequenced('key_b'), sequenced('key_a')]);
    expect(first.map((d) => JSON.parse(d.payload).sequence)).toEqual([1, 1, 2]);
    expect(await store.deliveries.byId(first[2]!.id)).toMatchObject({ payload: first[2]!.payload, key_id: 'key_a' });
    await store.deliveries.insert(delivery({ keyId: 'key_a' }));
    const failing: SequencedDelivery = {
      ...sequenced('key_a'),
      serialise: () => {
        throw new Error('cannot serialise');
      },
    };
    const rolledBack = sequenced('key_a');
    await expect(store.deliveries.insertSequenced([rolledBack, failing])).rejects.toThrow('cannot serialise');
    expect(await store.deliveries.byId(rolledBack.id)).toBeUndefined();
    const next = await store.deliveries.insertSequenced([sequenced('key_a'), sequenced('key_b')]);
    expect(next.map((d) => JSON.parse(d.payload).sequence)).toEqual([3, 2]);
    expect(await store.deliveries.insertSequenced([])).toEqual([]);
  });

  it("takes an audit delivery's URL and secrets from its key as it is at the insert: changed, the new ones; removed, no delivery and no number", async () => {
    const user = await store.users.create({ email: `u-${newDeliveryId()}@example.test`, passwordHash: 'x', now: T0 });
    const key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: newDeliveryId(), now: T0, webhookUrl: 'https://old.example/hook' });
    // As the request saw its key when it arrived: the old URL, and a secret since cleared.
    const seen = (): SequencedDelivery => ({ ...sequenced(key.id), url: 'https://old.example/hook', signingSecretEnc: 'sealed-old-secret' });
    await store.keys.update(key.id, { webhook_url: 'https://new.example/hook' }, T0 + 1);
    const [moved] = await store.deliveries.insertSequenced([seen()]);
    expect(moved).toMatchObject({ url: 'https://new.example/hook', signingSecretEnc: null });
    expect(await store.deliveries.byId(moved!.id)).toMatchObject({ url: 'https://new.example/hook' });
    await store.keys.update(key.id, { webhook_url: null }, T0 + 2);
    const dropped = seen();
    expect(await store.deliveries.insertSequenced([dropped])).toEqual([]);
    expect(await store.deliveries.byId(dropped.id)).toBeUndefined();
    await store.keys.update(key.id, { webhook_url: 'https://new.example/hook' }, T0 + 3);
    const [next] = await store.deliveries.insertSequenced([seen()]);
    expect(JSON.parse(next!.payload).sequence).toBe(2);
  });

  it('concurrent batches never share or skip a number: per key exactly 1..N', async () => {
    const keys = ['key_a', 'key_b', 'key_c'];
    const batches = Array.from({ length: 40 }, (_, i) => Array.from({ length: 1 + (i % 5) }, (_, j) => sequenced(keys[(i + j) % keys.length]!)));
    await Promise.all(batches.map((batch) => store.deliveries.insertSequenced(batch)));
    for (const key of keys) {
      const n = batches.flat().filter((d) => d.keyId === key).length;
      expect(await sequencesOf(key)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    }
  });

  it('releases every lease, or only those of one worker', async () => {
    const [a, b] = [delivery({ nextAttemptAt: T0 - 1 }), delivery()];
    await store.deliveries.insertMany([a!, b!]);
    expect(await store.deliveries.claimDue(T0, 1, 30_000, 'w1')).toMatchObject([{ id: a!.id }]);
    expect(await store.deliveries.claimDue(T0, 1, 30_000, 'w2')).toMatchObject([{ id: b!.id }]);
    expect(await store.deliveries.releaseLeases(T0 + 1, 'w1')).toBe(1);
    expect(await store.deliveries.byId(a!.id)).toMatchObject({ lease_until: null, leased_by: null, updated_at: T0 + 1 });
    expect(await store.deliveries.byId(b!.id)).toMatchObject({ leased_by: 'w2' });
    expect(await store.deliveries.releaseLeases(T0 + 2)).toBe(1);
    expect((await store.deliveries.claimDue(T0 + 2, 10, 30_000, 'w3')).map((r) => r.id)).toEqual([a!.id, b!.id]);
  });

  it('cancels one pending delivery or all of a key, retargets the pending ones; an attempt in flight leaves a cancelled one cancelled', async () => {
    const [inFlight, other, done, elsewhere] = [delivery(), delivery(), delivery(), delivery({ keyId: 'key_b' })];
    await store.deliveries.insertMany([inFlight!, other!, done!, elsewhere!]);
    await recordAttempt(done!.id, success, { status: 'delivered' });
    expect(await store.deliveries.retargetPending('key_a', 'https://example.org/moved', T0 + 1)).toBe(2);
    expect(await store.deliveries.byId(other!.id)).toMatchObject({ url: 'https://example.org/moved' });
    expect(await store.deliveries.byId(done!.id)).toMatchObject({ url: 'https://example.com/hooks' });
    expect(await store.deliveries.cancel('key_b', inFlight!.id, T0 + 2, 'nope')).toBeUndefined();
    expect(await store.deliveries.cancel('key_a', done!.id, T0 + 2, 'nope')).toBeUndefined();
    expect(await store.deliveries.cancel('key_a', inFlight!.id, T0 + 2, 'cancelled by request')).toMatchObject({ status: 'cancelled', last_error: 'cancelled by request', next_attempt_at: null });
    expect(await recordAttempt(inFlight!.id, failure, { status: 'pending', nextAttemptAt: T0 + 5_000 })).toBe(1);
    expect(await store.deliveries.byId(inFlight!.id)).toMatchObject({ status: 'cancelled', last_error: 'cancelled by request', next_attempt_at: null, attempts: 1, last_status_code: 500 });
    expect(await store.deliveries.cancelPending('key_a', T0 + 3, 'url removed')).toBe(1);
    expect(await store.deliveries.byId(other!.id)).toMatchObject({ status: 'cancelled', last_error: 'url removed' });
    expect(await store.deliveries.byId(elsewhere!.id)).toMatchObject({ status: 'pending' });
  });

  it('purges finished deliveries and their attempts past retention, keeping pending ones', async () => {
    const old = delivery({ now: T0 - 10_000 });
    const oldPending = delivery({ now: T0 - 10_000 });
    const recent = delivery({ now: T0 });
    await store.deliveries.insertMany([old, oldPending, recent]);
    await recordAttempt(old.id, success, { status: 'delivered' });
    await recordAttempt(recent.id, success, { status: 'delivered' });
    expect(await store.deliveries.purgeOlderThan(T0 - 1)).toBe(1);
    expect(await store.deliveries.byId(old.id)).toBeUndefined();
    expect(await store.deliveries.byId(oldPending.id)).toBeDefined();
    expect(await store.deliveries.get('key_a', recent.id)).toMatchObject({ attempts: [{ attempt: 1 }] });
    const orphans = await store.handle.db.selectFrom('webhook_attempts').select('id').where('delivery_id', '=', old.id).execute();
    expect(orphans).toEqual([]);
  });

  it('purges in batches of PURGE_BATCH: a read started meanwhile is answered before the purge ends', async () => {
    const old = Array.from({ length: 2 * PURGE_BATCH + 500 }, () => delivery({ now: T0 - 10_000 }));
    await store.deliveries.insertMany(old);
    await store.deliveries.recordAttempts(old.map((d) => ({ deliveryId: d.id, result: success, next: { status: 'delivered' }, leasedBy: null })));
    const kept = delivery({ now: T0 - 10_000 });
    await store.deliveries.insert(kept);
    const answered: string[] = [];
    const purge = store.deliveries.purgeOlderThan(T0 - 1).then((n) => {
      answered.push('purge');
      return n;
    });
    // A dashboard read arriving once the purge has begun: one transaction of every row would answer it last.
    const read = new Promise((resolve) => setImmediate(resolve)).then(() => store.deliveries.byId(kept.id)).then(() => answered.push('read'));
    expect(await purge).toBe(old.length);
    await read;
    // SQLite has one writer: a read waits for the write transaction, so only batches let it in between. Postgres
    // reads never wait for row locks (MVCC), so there the order only says which finished first on a busy machine.
    if (store.handle.sqlite) expect(answered).toEqual(['read', 'purge']);
    else expect(answered.sort()).toEqual(['purge', 'read']);
    const left = await store.handle.db.selectFrom('webhook_attempts').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
    expect(Number(left.n)).toBe(0);
    expect(await store.deliveries.byId(kept.id)).toBeDefined();
  });
});

describe('outbox queries on SQLite (EXPLAIN QUERY PLAN)', () => {
  let store: Store;
  let dir: string;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-plans-'));
    store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function plan(text: string, params: unknown[]): string {
    const rows = store.handle.sqlite!.prepare(`explain query plan ${text}`).all(...params) as Array<{ detail: string }>;
    return rows.map((r) => r.detail).join(' | ');
  }

  it("a key's retrying count reads only its retrying rows, from the index alone (the key list asks it of every key)", () => {
    expect(plan(RETRYING_SQLITE, ['key_a'])).toMatch(/USING COVERING INDEX deliveries_retrying_idx \(key_id=\? AND status=\?\)/);
    // Also where the statistics make the key's other index look narrower (one key with all the retrying rows).
    const db = store.handle.sqlite!;
    db.exec(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at, created_at, updated_at)
      select 'whd_' || value, 'key_' || (value % 50), 'u', 'e', 'r', 'https://example.com/', '{}', case when value % 50 = 1 then 'pending' else 'delivered' end, 2, value, value, value
      from (with recursive s(value) as (select 1 union all select value + 1 from s where value < 20000) select value from s)`);
    db.exec('analyze');
    expect(plan(RETRYING_SQLITE, ['key_1'])).toMatch(/USING COVERING INDEX deliveries_retrying_idx \(key_id=\? AND status=\?\)/);
  });

  it('a list filtered by status, and a bulk redelivery by status, search the (key_id, status, created_at) index', () => {
    const [list, listParams] = listQuery('key_a', { status: 'failed' }, undefined, 51);
    expect(plan(list, listParams)).toMatch(/USING INDEX deliveries_key_status_idx \(key_id=\? AND status=\?\)/);
    const [after, afterParams] = listQuery('key_a', { status: 'failed' }, { created_at: T0, id: 'whd_x' }, 51);
    expect(plan(after, afterParams)).toMatch(/USING INDEX deliveries_key_status_idx \(key_id=\? AND status=\? AND created_at<\?\)/);
    const [count, countParams] = countMatchingQuery('key_a', { status: 'failed', limit: 20_000 });
    expect(plan(count, countParams)).toMatch(/USING COVERING INDEX deliveries_key_status_idx \(key_id=\? AND status=\?\)/);
    const [batch, batchParams] = redeliverBatchQuery('key_a', { status: 'failed', limit: 20_000 }, T0, null, { createdAt: T0, id: 'whd_x' }, REDELIVER_BATCH);
    expect(plan(batch, batchParams)).toMatch(/USING (COVERING )?INDEX deliveries_key_status_idx \(key_id=\? AND status=\? AND created_at<\?\)/);
  });

  it('every outbox statement searches an index: none reads the deliveries or attempts table whole (a guard for index changes)', () => {
    const statements: Array<[string, string, unknown[]]> = [
      ['claim', claimSql(0, 0), [T0 + 60_000, 'w', T0, T0, T0, 16, T0, T0]],
      ['next wake-up', NEXT_DUE, [T0, T0]],
      ['release of leases', RELEASE_LEASES, [T0]],
      ['test sends in flight', TEST_SENDS_IN_FLIGHT, ['key_a', T0]],
      ['purge: the next batch', PURGE_NEXT_SIZED, [T0, PURGE_BATCH]],
      ['purge of attempts', PURGE_ATTEMPTS_OF, ['["whd_x"]']],
      ['purge of payloads', PURGE_PAYLOADS_OF, ['["whd_x"]']],
      ['purge of deliveries', PURGE_DELIVERIES_OF, ['["whd_x"]']],
      ['backlog', BACKLOG, [T0]],
      ['by id', BY_ID, ['whd_x']],
      ['list cursor', LIST_CURSOR, ['key_a', 'whd_x']],
      ['list', ...listQuery('key_a', {}, undefined, 51)],
      ['list after a cursor', ...listQuery('key_a', {}, { created_at: T0, id: 'whd_x' }, 51)],
      ['list by status', ...listQuery('key_a', { status: 'failed' }, undefined, 51)],
      ['one delivery', GET_DELIVERY, ['whd_x', 'key_a']],
      ['one delivery without its payload', GET_DELIVERY_SUMMARY, ['whd_x', 'key_a']],
      ['count to redeliver by HTTP code', ...countMatchingQuery('key_a', { lastStatusCode: { min: 500, max: 599 }, limit: 1000 })],
      ['count to redeliver by request', ...countMatchingQuery('key_a', { requestId: 'chatcmpl-x', limit: 1000 })],
      ['its attempts', GET_ATTEMPTS, ['whd_x']],
      ['redeliver', REDELIVER, [T0, T0, null, 'whd_x', 'key_a']],
      ['count to redeliver', ...countMatchingQuery('key_a', { since: T0, limit: 1000 })],
      ['bulk redelivery', ...redeliverBatchQuery('key_a', { limit: 1000 }, T0, null, undefined, REDELIVER_BATCH)],
      ['retrying', RETRYING_SQLITE, ['key_a']],
      ['retrying of a user', RETRYING_OF_USER_SQLITE, ['u']],
      ['cancel', CANCEL, ['r', T0, 'whd_x', 'key_a']],
      ['cancel pending', CANCEL_PENDING, ['r', T0, 'key_a']],
      ['retarget pending', RETARGET_PENDING, ['https://example.com/', T0, 'key_a']],
    ];
    for (const [name, text, params] of statements) {
      const shown = plan(text, params);
      expect(shown, name).not.toMatch(/SCAN webhook_(deliveries|attempts|payloads)/);
      expect(shown, name).toMatch(/SEARCH webhook_(deliveries|attempts|payloads) USING (COVERING )?INDEX/);
    }
  });

  it("no write in the store's transactions can fail alone, so none keeps a statement journal (an outbox insert's spilled to a temp file)", async () => {
    const inTransaction = new Set<string>();
    const get = SqliteStatements.prototype.get;
    const spy = vi.spyOn(SqliteStatements.prototype, 'get').mockImplementation(function (this: SqliteStatements, text: string) {
      if (this.db.inTransaction) inTransaction.add(text);
      return get.call(this, text);
    });
    try {
      const row = (id: string, lease?: NewDelivery['lease']): NewDelivery => ({ id, keyId: 'key_a', userId: 'u', event: 'e', requestId: `r_${id}`, url: 'https://example.com/h', payload: '{}', now: T0, lease });
      await store.deliveries.insertMany([row('whd_a')]);
      const [sequenced] = await store.deliveries.insertSequenced([{ ...row('whd_b', { until: T0 + 60_000, by: 'w' }), serialise: (n) => `{"sequence":${n}}` }]);
      await store.deliveries.insertTestSend(row('whd_t', { until: T0 + 60_000, by: TEST_SEND_LEASE }), 3);
      const result: AttemptResult = { attemptedAt: T0, statusCode: 200, durationMs: 1, outcome: 'success', error: null, responseBody: null };
      await store.deliveries.recordAttempts([{ deliveryId: sequenced!.id, result, next: { status: 'delivered' }, leasedBy: 'w' }]);
      const [claimed] = await store.deliveries.claimDue(T0, 1, 60_000, 'w');
      await store.deliveries.releaseClaims([claimed!.id], 'w', T0);
      // A constraint failure still undoes its whole transaction, and leaves the connection out of one.
      await expect(store.deliveries.insertMany([row('whd_c'), row('whd_c')])).rejects.toThrow(/UNIQUE/);
      expect(await store.deliveries.byId('whd_c')).toBeUndefined();
      expect(store.handle.sqlite!.inTransaction).toBe(false);
    } finally {
      spy.mockRestore();
    }
    // Not the sequence upsert: its DO UPDATE checks with ABORT whatever the statement says; it changes one small row.
    const writes = [...inTransaction].filter((text) => /^\s*(insert|update)/i.test(text) && !/delivery_sequences/.test(text));
    expect(writes.length).toBe(4);
    for (const text of writes) {
      // A constraint check that would end only its statement (OE_Abort, p2 = 2) is what makes SQLite journal the
      // statement's pages; `or rollback` (p2 = 1) ends the transaction instead.
      const halts = (store.handle.sqlite!.prepare(`explain ${text}`).all(...text.split('?').slice(1).map(() => null)) as Array<{ opcode: string; p1: number; p2: number }>).filter((op) => /^Halt/.test(op.opcode) && op.p1 !== 0);
      expect(halts.length, text).toBeGreaterThan(0);
      expect(halts.filter((op) => op.p2 === 2), text).toEqual([]);
    }
  });

  it('a list by request searches the (key_id, request_id, created_at) index; by time, the (key_id, created_at) one', () => {
    const [byRequest, requestParams] = listQuery('key_a', { requestId: 'chatcmpl-1' }, undefined, 51);
    expect(plan(byRequest, requestParams)).toMatch(/USING INDEX deliveries_key_request_idx \(key_id=\? AND request_id=\?\)/);
    const [byTime, timeParams] = listQuery('key_a', { since: T0, until: T0 + 1000 }, undefined, 51);
    expect(plan(byTime, timeParams)).toMatch(/USING INDEX deliveries_key_idx \(key_id=\? AND created_at>\? AND created_at<\?\)/);
  });

  it('the backlog gauges (every /metrics scrape) search the due index instead of scanning every delivery', () => {
    const backlog = plan(BACKLOG, [T0]);
    expect(backlog).not.toMatch(/SCAN webhook_deliveries/);
    expect(backlog).toMatch(/SEARCH webhook_deliveries USING COVERING INDEX deliveries_due_idx \(status=\?\)/);
  });
});

describe('delivery ids', () => {
  it('are whd_ + 32 hex digits, ordered by creation time across milliseconds, and distinct', async () => {
    const first = newDeliveryId();
    await new Promise((resolve) => setTimeout(resolve, 3));
    const ids = Array.from({ length: 1000 }, () => newDeliveryId());
    for (const id of [first, ...ids]) expect(id).toMatch(/^whd_[0-9a-f]{32}$/);
    expect(ids.every((id) => id > first)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    // The first 12 hex digits are the creation time in ms.
    expect(Math.abs(Number.parseInt(ids[0]!.slice(4, 16), 16) - Date.now())).toBeLessThan(60_000);
  });
});

// Instances with clocks that disagree share one Postgres: leases are on the database's clock, whatever `now`
// each caller passes (its own clock), so an instance ahead cannot take a row another instance is sending.
describe.skipIf(!postgres)('OutboxStore on postgres: leases on the database clock', () => {
  let store: Store;

  beforeEach(async () => {
    store = await openStore(postgres!.url, { poolSize: 4 });
    await store.handle.db.deleteFrom('webhook_attempts').execute();
    await store.handle.db.deleteFrom('webhook_deliveries').execute();
  });

  afterEach(async () => {
    await store.close();
  });

  const MINUTE = 60_000;
  function delivery(now: number, lease?: NewDelivery['lease']): NewDelivery {
    const id = newDeliveryId();
    return { id, keyId: 'key_a', userId: 'u', event: 'llm.request.completed', requestId: `chatcmpl-${id}`, url: 'https://example.com/h', payload: '{}', now, lease };
  }

  it('a claim made by a clock a minute behind is not lapsed for a claimer a minute ahead', async () => {
    const behind = Date.now() - MINUTE;
    const ahead = Date.now() + MINUTE;
    const d = delivery(behind);
    await store.deliveries.insert(d);
    expect(await store.deliveries.claimDue(behind, 1, 30_000, 'slow-clock')).toHaveLength(1);
    expect(await store.deliveries.claimDue(ahead, 10, 30_000, 'fast-clock')).toEqual([]);
    // The lease runs 30 s from the database's now, not from the claimer's clock.
    const { rows } = await store.handle.db.executeQuery<{ left: string }>(CompiledQuery.raw(`select lease_until - ${DB_NOW_MS} as left from webhook_deliveries where id = $1`, [d.id]));
    expect(Number(rows[0]!.left)).toBeGreaterThan(20_000);
    expect(Number(rows[0]!.left)).toBeLessThanOrEqual(30_000);
    // Its end, asked on either clock, is about 30 s from that clock's now.
    const end = await store.deliveries.nextDueAfter(ahead);
    expect(end! - ahead).toBeGreaterThan(20_000);
    expect(end! - ahead).toBeLessThanOrEqual(30_000);
  });

  it('a row inserted leased (a hand-over) keeps its lease against a clock ahead; a lapsed one is claimed again', async () => {
    const behind = Date.now() - MINUTE;
    const handed = delivery(behind, { until: behind + 30_000, by: 'slow-clock' });
    await store.deliveries.insert(handed);
    expect(await store.deliveries.claimDue(Date.now() + MINUTE, 10, 30_000, 'fast-clock')).toEqual([]);
    // A lease of 0 ms has lapsed by the next statement, whatever the claimer's clock says.
    const lapsed = delivery(behind, { until: behind, by: 'gone' });
    await store.deliveries.insert(lapsed);
    expect((await store.deliveries.claimDue(behind + 5_000, 10, 30_000, 'w')).map((r) => r.id)).toEqual([lapsed.id]);
  });

  it('test sends in flight are counted by the database clock', async () => {
    const behind = Date.now() - MINUTE;
    const send = (now: number) => ({ ...delivery(now, { until: now + 30_000, by: TEST_SEND_LEASE }) });
    expect(await store.deliveries.insertTestSend(send(behind), 1)).toEqual({ inFlight: 0, inserted: true });
    expect(await store.deliveries.insertTestSend(send(Date.now() + MINUTE), 1)).toEqual({ inFlight: 1, inserted: false });
  });
});
