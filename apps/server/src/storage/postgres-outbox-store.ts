import { CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import type { Database } from './schema.js';
import {
  byDue,
  missingDelivery,
  originPattern,
  type AttemptRecord,
  type AttemptRow,
  type Backlog,
  type ClaimedDelivery,
  type LeftOut,
  NOTHING_LEFT_OUT,
  type DeliveryRow,
  type PayloadToSend,
  type DeliverySummaryRow,
  type ListOptions,
  type RedeliveryFilter,
  type Retrying,
  type NewDelivery,
  type OutboxStore,
  countByKey,
  deliveriesAsKeysSay,
  type KeyWebhook,
  numberDeliveries,
  onceSpan,
  type SequencedDelivery,
} from './outbox-store.js';
import {
  attemptParams,
  attemptUpdate,
  BACKLOG,
  type BacklogRow,
  BY_ID,
  PAYLOAD_OF,
  STATE_OF,
  CANCEL,
  CANCELLED,
  RETRYING,
  RETRYING_OF_USER,
  toRetryingByKey,
  type RetryingRow,
  toRetrying,
  countMatchingQuery,
  CLAIM_RETURNING,
  DUE_AND_UNLEASED,
  earliest,
  excludingOrigins,
  excludingUsers,
  GET_ATTEMPTS,
  GET_DELIVERY,
  GET_DELIVERY_SUMMARY,
  insertAttemptsSql,
  insertDeliveriesSql,
  insertParams,
  keptApart,
  NEW_DELIVERY,
  type NewDeliveryColumn,
  withColumn,
  LIST_CURSOR,
  listQuery,
  oldestOf,
  REDELIVER_BATCH,
  redeliverBatchQuery,
  type RedeliveryCursor,
  LEASED,
  NEXT_DUE,
  numbered,
  page,
  PURGE_BATCH,
  REDELIVER,
  TEST_SEND_LEASE,
  TEST_SENDS_IN_FLIGHT,
  toBacklog,
} from './outbox-sql.js';

/**
 * Rows per statement when recording attempts: a batch is cut into chunks of these sizes, largest first
 * (37 = 32 + 4 + 1), so there are at most 7 statement texts of each kind.
 */
const CHUNK_SIZES = [64, 32, 16, 8, 4, 2, 1];

/** The Postgres text of `build(n)`, numbered once per `n`. */
function perChunkSize(build: (n: number) => string): (n: number) => string {
  const texts = new Map<number, string>();
  return (n) => {
    let text = texts.get(n);
    if (text === undefined) {
      text = numbered(build(n));
      texts.set(n, text);
    }
    return text;
  };
}

/** `items` in chunks of CHUNK_SIZES; one item per chunk when `distinct` is false. */
function chunks<T>(items: readonly T[], distinct = true): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < items.length; ) {
    const left = items.length - start;
    const size = distinct ? CHUNK_SIZES.find((n) => n <= left)! : 1;
    out.push(items.slice(start, start + size));
    start += size;
  }
  return out;
}

/**
 * Which clock a lease is measured on. `database` (what the server runs): every lease deadline is computed and
 * compared by Postgres (`statement_timestamp()`, in epoch ms), so instances whose own clocks disagree still
 * agree on whose lease is live: an instance 60 s ahead does not take a row another is still sending (a second
 * delivery with the same webhook-id). Only the lease is on the database's clock: next attempt times, due checks
 * and `updated_at` stay on the caller's injected clock, so retry scheduling remains testable (a skew there only
 * moves a retry, it never sends a row twice at once). `caller`: leases on the `now` the caller passes, as on
 * SQLite (one host, one clock); tests that pin times use it.
 */
export type LeaseClock = 'database' | 'caller';

/** The database's time in epoch ms, as lease deadlines are stored. */
export const DB_NOW_MS = '(floor(extract(epoch from statement_timestamp()) * 1000))::bigint';

/** The lease texts of one clock: `?` parameters where the caller's time is passed. */
interface LeaseSql {
  /** Due and unleased (parameters: now, [now with `caller`]). */
  dueAndUnleased: string;
  /** The new deadline (parameters: [now with `caller`,] lease ms). */
  until: string;
}

function leaseSql(clock: LeaseClock): LeaseSql {
  if (clock === 'caller') return { dueAndUnleased: DUE_AND_UNLEASED, until: '(cast(? as bigint) + cast(? as bigint))' };
  return {
    dueAndUnleased: `status = 'pending' and next_attempt_at <= ? and (lease_until is null or lease_until <= ${DB_NOW_MS})`,
    until: `(${DB_NOW_MS} + cast(? as bigint))`,
  };
}

/**
 * A claim leaving out `n` receivers and `m` users. The candidates are a materialised CTE locked with SKIP LOCKED: Postgres
 * may re-run an `IN (… LIMIT n)` sub-select per row and exceed the limit, and concurrent claimers skip each
 * other's rows instead of waiting. The row is checked again in the UPDATE: it may have changed meanwhile.
 */
const claimTexts = new Map<string, string>();
function claimSql(clock: LeaseClock, n: number, m: number): string {
  const key = `${clock},${n},${m}`;
  let text = claimTexts.get(key);
  if (text === undefined) {
    const lease = leaseSql(clock);
    text = numbered(`with due as materialized (select id from webhook_deliveries where ${lease.dueAndUnleased}${excludingOrigins(n)}${excludingUsers(m)}
  order by next_attempt_at asc limit ? for update skip locked)
  update webhook_deliveries set lease_until = ${lease.until}, leased_by = ?, updated_at = ?
  where id in (select id from due) and ${lease.dueAndUnleased} ${CLAIM_RETURNING}`);
    claimTexts.set(key, text);
  }
  return text;
}

/** A claim's parameters in claimSql's order. */
function claimParams(clock: LeaseClock, now: number, patterns: readonly string[], users: readonly string[], limit: number, leaseMs: number, workerId: string): unknown[] {
  const due = clock === 'caller' ? [now, now] : [now];
  const until = clock === 'caller' ? [now, leaseMs] : [leaseMs];
  return [...due, ...patterns, ...users, limit, ...until, workerId, now, ...due];
}

/**
 * A new delivery's columns under each lease clock. With the database's, a row inserted leased (a hand-over, a
 * test send) gets its lease as a duration from now on the database's clock (`until - now` of the caller's
 * clock, null for none): the same deadline a claim would give it.
 */
const NEW_DELIVERY_COLUMNS: Record<LeaseClock, readonly NewDeliveryColumn[]> = {
  caller: NEW_DELIVERY,
  database: withColumn(NEW_DELIVERY, {
    column: 'lease_until',
    sql: `(cast(? as bigint) + ${DB_NOW_MS})`,
    param: (d) => (d.lease === undefined ? null : d.lease.until - d.now),
  }),
};

/**
 * Inserts `n` deliveries in one statement (one round trip, whatever the batch), with the payloads kept apart
 * (parameters: their delivery ids and payloads as two arrays, then each delivery's).
 */
const insertTexts = new Map<string, string>();
function insertSql(clock: LeaseClock, n: number): string {
  const key = `${clock},${n}`;
  let text = insertTexts.get(key);
  if (text === undefined) {
    text = numbered(`with payloads as (insert into webhook_payloads (delivery_id, payload) select * from unnest(cast(? as text[]), cast(? as text[])))
  ${insertDeliveriesSql(n, NEW_DELIVERY_COLUMNS[clock])}`);
    insertTexts.set(key, text);
  }
  return text;
}

/**
 * Moves `n` distinct deliveries on in one UPDATE … FROM (VALUES …), as the SQLite store's one-row statement
 * does (a cancelled delivery stays cancelled); returns their ids and attempt numbers.
 */
const recordSql = perChunkSize((n) => {
  // The casts type the VALUES columns: Postgres infers nothing from a NULL parameter. `held`: the row is still
  // leased as it was when the attempt was sent (see AttemptRecord.leasedBy).
  const row = '(cast(? as text), cast(? as text), cast(? as text), cast(? as bigint), cast(? as integer), cast(? as text), cast(? as bigint), cast(? as bigint))';
  const held = `coalesce(webhook_deliveries.leased_by, '') = v.leased_by`;
  return `with v(id, leased_by, status, next_attempt_at, status_code, error, attempted_at, delivered_at) as (values ${Array.from({ length: n }, () => row).join(', ')})
  update webhook_deliveries set attempts = webhook_deliveries.attempts + 1,
  status = case when ${held} and webhook_deliveries.status <> 'cancelled' then v.status else webhook_deliveries.status end,
  next_attempt_at = case when ${held} and webhook_deliveries.status <> 'cancelled' then v.next_attempt_at else webhook_deliveries.next_attempt_at end,
  lease_until = case when ${held} then null else webhook_deliveries.lease_until end,
  leased_by = case when ${held} then null else webhook_deliveries.leased_by end,
  last_status_code = v.status_code,
  last_error = case when webhook_deliveries.status = 'cancelled' then webhook_deliveries.last_error else v.error end, updated_at = v.attempted_at,
  delivered_at = coalesce(v.delivered_at, webhook_deliveries.delivered_at)
  from v where webhook_deliveries.id = v.id returning webhook_deliveries.id, webhook_deliveries.attempts`;
});
const insertAttemptsPg = perChunkSize(insertAttemptsSql);

/**
 * Takes `counts[i]` sequence numbers of key `keys[i]` and returns each key's last one. The rows stay locked until
 * the transaction ends, so a concurrent instance waits and continues after these numbers; they are taken in key
 * order, so two instances' batches never wait on each other in a cycle.
 */
const NEXT_SEQUENCES = `insert into delivery_sequences (key_id, last)
  select key_id, n from unnest($1::text[], $2::bigint[]) as t(key_id, n) order by key_id
  on conflict (key_id) do update set last = delivery_sequences.last + excluded.last returning key_id, last`;

/** Transaction-scoped locks on delivery ids recorded `once` (parameter: the ids), taken in id order: no two batches wait on each other in a cycle. */
const LOCK_DELIVERY_IDS = 'select pg_advisory_xact_lock(hashtextextended(id, 0)) from unnest($1::text[]) as t(id) order by id';

/** The webhook settings of the keys of a batch of audit deliveries, as they are now (`deliveriesAsKeysSay`; parameter: the key ids). */
const KEY_WEBHOOKS = `select id, webhook_url, signing_secret_enc, previous_signing_secret_enc, previous_signing_secret_expires_at
  from api_keys where id = any($1::text[])`;

/** Which of these deliveries recorded `once` are stored, under their id or another of their `onceSpan` (parameters: the spans' ids, froms, tos, tails). */
const STORED_DELIVERY_IDS = `select t.id from unnest($1::text[], $2::text[], $3::text[], $4::text[]) as t(id, lo, hi, tail)
  where exists (select 1 from webhook_deliveries d where d.id = t.id)
  or exists (select 1 from webhook_deliveries d where d.id >= t.lo and d.id < t.hi and right(d.id, 20) = t.tail)`;

/** An arbitrary constant: the class of the advisory locks that serialise one key's test-send checks. */
const TEST_SENDS_LOCK_CLASS = 741_539;

/**
 * `update webhook_deliveries <set> where <where>` (Postgres' numbered parameters) with its rows locked first in id order,
 * as a bulk redelivery's batch takes them (see redeliverBatchQuery), not in whatever order the scan meets them: two
 * statements (or a statement and the worker's record of attempts) over the same rows then take them in one order and
 * never each hold a row the other waits for. `where` is checked again in the UPDATE, as a row may have changed before its lock.
 */
function updateInIdOrder(set: string, where: string): string {
  return `with locked as materialized (select id from webhook_deliveries where ${where} order by id for update)
  update webhook_deliveries ${set} where id in (select id from locked) and ${where}`;
}

/** A release of leases or claims (parameter $1: now). */
const RELEASED = 'set lease_until = null, leased_by = null, updated_at = $1';

/** Locks a batch of attempts' deliveries in id order, before their updates take them in the batch's (parameter: the ids). */
const LOCK_ATTEMPTED = 'select id from webhook_deliveries where id = any($1::text[]) order by id for update';

const pg = {
  RELEASE_LEASES: updateInIdOrder(RELEASED, LEASED),
  RELEASE_LEASES_OF: updateInIdOrder(RELEASED, `${LEASED} and leased_by = $2`),
  RELEASE_CLAIMS: updateInIdOrder(RELEASED, "id = any($2) and leased_by = $3 and status = 'pending'"),
  NEXT_DUE: numbered(NEXT_DUE),
  // NEXT_DUE with leases on the database's clock (parameters: now, now): a lease's end comes back on the
  // caller's clock (its time left, from the caller's now), as the worker arms its timer with it.
  NEXT_DUE_DB: `select
  (select next_attempt_at from webhook_deliveries where status = 'pending' and next_attempt_at > $1 order by next_attempt_at asc limit 1) as next_attempt_at,
  (select min(lease_until) - ${DB_NOW_MS} + $2 from webhook_deliveries where ${LEASED} and lease_until > ${DB_NOW_MS}) as lease_until`,
  // One statement per batch: the rows are locked as picked (a redeliver meanwhile waits, then finds them gone).
  PURGE: `with batch as (select id from webhook_deliveries where created_at < $1 and status != 'pending' limit $2 for update skip locked),
  attempts as (delete from webhook_attempts where delivery_id in (select id from batch)),
  payloads as (delete from webhook_payloads where delivery_id in (select id from batch))
  delete from webhook_deliveries where id in (select id from batch)`,
  BACKLOG: numbered(BACKLOG),
  BY_ID: numbered(BY_ID),
  PAYLOAD_OF: numbered(PAYLOAD_OF),
  STATE_OF: numbered(STATE_OF),
  LIST_CURSOR: numbered(LIST_CURSOR),
  GET_DELIVERY: numbered(GET_DELIVERY),
  GET_DELIVERY_SUMMARY: numbered(GET_DELIVERY_SUMMARY),
  GET_ATTEMPTS: numbered(GET_ATTEMPTS),
  REDELIVER: numbered(REDELIVER),
  RETRYING: numbered(RETRYING),
  RETRYING_OF_USER: numbered(RETRYING_OF_USER),
  CANCEL: numbered(CANCEL),
  CANCEL_PENDING: updateInIdOrder(numbered(CANCELLED), "key_id = $3 and status = 'pending'"),
  RETARGET_PENDING: updateInIdOrder('set url = $1, updated_at = $2', "key_id = $3 and status = 'pending'"),
  TEST_SENDS_IN_FLIGHT: numbered(TEST_SENDS_IN_FLIGHT),
  TEST_SENDS_IN_FLIGHT_DB: `select count(*) as n from webhook_deliveries
  where leased_by = '${TEST_SEND_LEASE}' and key_id = $1 and lease_until > ${DB_NOW_MS}`,
  // Per key, until the transaction ends: two instances' test sends of one key count one after the other.
  LOCK_TEST_SENDS: `select pg_advisory_xact_lock(${TEST_SENDS_LOCK_CLASS}, hashtext($1))`,
};

/** The statements that lock several deliveries in id order (see updateInIdOrder), as tests check their plans. */
export const IN_ID_ORDER = {
  releaseLeases: pg.RELEASE_LEASES,
  releaseLeasesOf: pg.RELEASE_LEASES_OF,
  releaseClaims: pg.RELEASE_CLAIMS,
  lockAttempted: LOCK_ATTEMPTED,
  cancelPending: pg.CANCEL_PENDING,
  retargetPending: pg.RETARGET_PENDING,
};

/** `nextDueAfter`'s statement under each lease clock (parameters: now, now). */
export function nextDueSql(clock: LeaseClock): string {
  return clock === 'caller' ? pg.NEXT_DUE : pg.NEXT_DUE_DB;
}

/** `numbered(text)`, worked out once per text. */
const numberedTexts = new Map<string, string>();
function numberedOnce(text: string): string {
  let pgText = numberedTexts.get(text);
  if (pgText === undefined) {
    pgText = numbered(text);
    numberedTexts.set(text, pgText);
  }
  return pgText;
}

type Executor = Pick<Kysely<Database>, 'executeQuery'>;

function run<R>(db: Executor, sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
  return db.executeQuery<R>(CompiledQuery.raw(sql, [...params]));
}

/** The rows `sql` changed, sent by `send` (`run`, or `runPastDeadlocks` for a statement over many deliveries). */
async function affected(db: Executor, sql: string, params: readonly unknown[], send: typeof run = run): Promise<number> {
  return Number((await send(db, sql, params)).numAffectedRows ?? 0);
}

/** Postgres' SQLSTATE for the statement it failed to break a deadlock. */
const DEADLOCK_DETECTED = '40P01';
/** Tries of a statement that keeps meeting deadlocks: each costs the victim deadlock_timeout (1 s by default). */
const DEADLOCK_TRIES = 3;

/**
 * `write` (a statement of its own, or a transaction) over many deliveries, sent again when Postgres failed it to break
 * a deadlock: it did nothing then. Such writes lock their rows in id order, as every statement over several deliveries
 * does, but a session that does not (another version of the server during a rolling upgrade, an operator's
 * transaction) can still hold one row and wait for another, and Postgres fails one of the two (40P01): a 500 to whoever
 * clicked a bulk redelivery or saved a key's webhook URL; for the worker, an attempt made but not recorded (its
 * delivery sent again once its lease lapses) or leases kept until they lapse.
 */
async function pastDeadlocks<T>(write: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await write();
    } catch (err) {
      if (tries >= DEADLOCK_TRIES || (err as { code?: unknown } | null)?.code !== DEADLOCK_DETECTED) throw err;
    }
  }
}

/** `run` past deadlocks (`pastDeadlocks`). */
function runPastDeadlocks<R>(db: Executor, sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
  return pastDeadlocks(() => run<R>(db, sql, params));
}

/**
 * The outbox on Postgres, through Kysely's pool: several statements' worth of rows in one (chunks of
 * CHUNK_SIZES) where the SQLite store loops over prepared statements, since here every statement is a round trip.
 */
export class PostgresOutboxStore implements OutboxStore {
  private readonly insertParams: (deliveries: readonly NewDelivery[]) => unknown[];

  constructor(
    private readonly db: Kysely<Database>,
    private readonly leaseClock: LeaseClock = 'database',
  ) {
    const columns = NEW_DELIVERY_COLUMNS[leaseClock];
    this.insertParams = (deliveries) => {
      const apart = deliveries.filter((d) => keptApart(d.payload));
      return [apart.map((d) => d.id), apart.map((d) => d.payload), ...deliveries.flatMap((d) => insertParams(d, columns))];
    };
  }

  async insert(delivery: NewDelivery): Promise<void> {
    return this.insertMany([delivery]);
  }

  async insertMany(deliveries: NewDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await run(this.db, insertSql(this.leaseClock, deliveries.length), this.insertParams(deliveries));
  }

  async insertSequenced(all: readonly SequencedDelivery[]): Promise<NewDelivery[]> {
    if (all.length === 0) return [];
    return this.db.transaction().execute(async (trx) => {
      let deliveries = all;
      const once = all.filter((d) => d.once).map((d) => onceSpan(d.id));
      if (once.length > 0) {
        // Two instances recording the same delivery at once (under one id, or two of one `onceSpan`: both lock the id of
        // its second): the second waits here for the first's commit, then its look (a statement of its own, so reading
        // what was committed meanwhile) finds the row.
        await run(trx, LOCK_DELIVERY_IDS, [[...new Set(once.flatMap((span) => span.lockIds))]]);
        const { rows: present } = await run<{ id: string }>(trx, STORED_DELIVERY_IDS, [once.map((s) => s.id), once.map((s) => s.from), once.map((s) => s.to), once.map((s) => s.tail)]);
        const stored = new Set(present.map((row) => row.id));
        deliveries = all.filter((d) => !stored.has(d.id));
        if (deliveries.length === 0) return [];
      }
      const { rows: keys } = await run<KeyWebhook>(trx, KEY_WEBHOOKS, [[...new Set(deliveries.map((d) => d.keyId))]]);
      deliveries = deliveriesAsKeysSay(deliveries, keys);
      if (deliveries.length === 0) return [];
      const counts = countByKey(deliveries);
      const { rows } = await run<{ key_id: string; last: number | string }>(trx, NEXT_SEQUENCES, [[...counts.keys()], [...counts.values()]]);
      const inserted = numberDeliveries(deliveries, counts, new Map(rows.map((r) => [r.key_id, Number(r.last)])));
      await run(trx, insertSql(this.leaseClock, inserted.length), this.insertParams(inserted));
      return inserted;
    });
  }

  async insertTestSend(delivery: NewDelivery, max: number): Promise<{ inFlight: number; inserted: boolean }> {
    return this.db.transaction().execute(async (trx) => {
      await run(trx, pg.LOCK_TEST_SENDS, [delivery.keyId]);
      const { rows } =
        this.leaseClock === 'caller'
          ? await run<{ n: string | number }>(trx, pg.TEST_SENDS_IN_FLIGHT, [delivery.keyId, delivery.now])
          : await run<{ n: string | number }>(trx, pg.TEST_SENDS_IN_FLIGHT_DB, [delivery.keyId]);
      const inFlight = Number(rows[0]?.n ?? 0);
      if (inFlight >= max) return { inFlight, inserted: false };
      await run(trx, insertSql(this.leaseClock, 1), this.insertParams([delivery]));
      return { inFlight, inserted: true };
    });
  }

  async claimDue(now: number, limit: number, leaseMs: number, workerId: string, leftOut: LeftOut = NOTHING_LEFT_OUT): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    const patterns = leftOut.origins.map(originPattern);
    const users = leftOut.users;
    const sql = claimSql(this.leaseClock, patterns.length, users.length);
    const { rows } = await run<ClaimedDelivery>(this.db, sql, claimParams(this.leaseClock, now, patterns, users, limit, leaseMs, workerId));
    return rows.sort(byDue);
  }

  async recordAttempts(batch: readonly AttemptRecord[]): Promise<number[]> {
    if (batch.length === 0) return [];
    // A delivery twice in one batch is updated twice (each attempt counts): one row per chunk then.
    const distinct = new Set(batch.map((b) => b.deliveryId)).size === batch.length;
    return pastDeadlocks(() => this.db.transaction().execute(async (trx) => {
      // The chunks go in the batch's order: without this, a redelivery or a release of claims over the same rows
      // (in id order) could hold one of them while this transaction holds another and waits for it. One row alone
      // cannot make such a cycle, and saves the round trip.
      const ids = [...new Set(batch.map((b) => b.deliveryId))];
      if (ids.length > 1) await run(trx, LOCK_ATTEMPTED, [ids]);
      const numbers: number[] = [];
      for (const chunk of chunks(batch, distinct)) {
        const updated = await run<{ id: string; attempts: number }>(trx, recordSql(chunk.length), chunk.flatMap((r) => [r.deliveryId, ...attemptUpdate(r)]));
        const byId = new Map(updated.rows.map((row) => [row.id, Number(row.attempts)]));
        const chunkNumbers = chunk.map(({ deliveryId }) => {
          const attempt = byId.get(deliveryId);
          if (attempt === undefined) throw missingDelivery(deliveryId);
          return attempt;
        });
        await run(trx, insertAttemptsPg(chunk.length), attemptParams(chunk, chunkNumbers));
        numbers.push(...chunkNumbers);
      }
      return numbers;
    }));
  }

  async releaseLeases(now: number, leasedBy?: string): Promise<number> {
    return leasedBy === undefined ? affected(this.db, pg.RELEASE_LEASES, [now], runPastDeadlocks) : affected(this.db, pg.RELEASE_LEASES_OF, [now, leasedBy], runPastDeadlocks);
  }

  async releaseClaims(ids: readonly string[], workerId: string, now: number): Promise<void> {
    if (ids.length === 0) return;
    await runPastDeadlocks(this.db, pg.RELEASE_CLAIMS, [now, ids, workerId]);
  }

  async nextDueAfter(now: number): Promise<number | undefined> {
    const text = nextDueSql(this.leaseClock);
    const { rows } = await run<{ next_attempt_at: number | string | null; lease_until: number | string | null }>(this.db, text, [now, now]);
    const asNumber = (v: number | string | null | undefined) => (v === null || v === undefined ? null : Number(v));
    return earliest(asNumber(rows[0]?.next_attempt_at), asNumber(rows[0]?.lease_until));
  }

  async purgeOlderThan(ts: number): Promise<number> {
    let removed = 0;
    for (;;) {
      const batch = await affected(this.db, pg.PURGE, [ts, PURGE_BATCH]);
      removed += batch;
      if (batch < PURGE_BATCH) return removed;
    }
  }

  async backlog(now: number): Promise<Backlog> {
    const { rows } = await run<BacklogRow>(this.db, pg.BACKLOG, [now]);
    return toBacklog(rows[0]);
  }

  async payloadOf(id: string): Promise<PayloadToSend | undefined> {
    return (await run<PayloadToSend>(this.db, pg.PAYLOAD_OF, [id])).rows[0];
  }

  async stateOf(id: string): Promise<Pick<DeliveryRow, 'status' | 'url'> | undefined> {
    return (await run<Pick<DeliveryRow, 'status' | 'url'>>(this.db, pg.STATE_OF, [id])).rows[0];
  }

  async byId(id: string): Promise<DeliveryRow | undefined> {
    return (await run<DeliveryRow>(this.db, pg.BY_ID, [id])).rows[0];
  }

  async recordedOnce(id: string): Promise<boolean> {
    const { from, to, tail } = onceSpan(id);
    return (await run<{ id: string }>(this.db, STORED_DELIVERY_IDS, [[id], [from], [to], [tail]])).rows.length > 0;
  }

  async list(keyId: string, options: ListOptions): Promise<{ rows: DeliverySummaryRow[]; hasMore: boolean }> {
    let cursor: Pick<DeliveryRow, 'created_at' | 'id'> | undefined;
    if (options.before !== undefined) {
      cursor = (await run<Pick<DeliveryRow, 'created_at' | 'id'>>(this.db, pg.LIST_CURSOR, [keyId, options.before])).rows[0];
      if (!cursor) return { rows: [], hasMore: false };
    }
    const [text, params] = listQuery(keyId, options, cursor, options.limit + 1);
    return page((await run<DeliverySummaryRow>(this.db, numberedOnce(text), params)).rows, options.limit);
  }

  async get(keyId: string, id: string): Promise<{ delivery: DeliveryRow; attempts: AttemptRow[] } | undefined> {
    const delivery = (await run<DeliveryRow>(this.db, pg.GET_DELIVERY, [id, keyId])).rows[0];
    if (!delivery) return undefined;
    return { delivery, attempts: (await run<AttemptRow>(this.db, pg.GET_ATTEMPTS, [id])).rows };
  }

  async progress(keyId: string, id: string): Promise<{ delivery: DeliverySummaryRow; attempts: AttemptRow[] } | undefined> {
    const delivery = (await run<DeliverySummaryRow>(this.db, pg.GET_DELIVERY_SUMMARY, [id, keyId])).rows[0];
    if (!delivery) return undefined;
    return { delivery, attempts: (await run<AttemptRow>(this.db, pg.GET_ATTEMPTS, [id])).rows };
  }

  async redeliver(keyId: string, id: string, now: number, url?: string): Promise<DeliverySummaryRow | undefined> {
    return (await run<DeliverySummaryRow>(this.db, pg.REDELIVER, [now, now, url || null, id, keyId])).rows[0];
  }

  async retrying(keyId: string): Promise<Retrying> {
    return toRetrying((await run<RetryingRow>(this.db, pg.RETRYING, [keyId])).rows[0]);
  }

  async retryingOfUser(userId: string): Promise<Map<string, Retrying>> {
    return toRetryingByKey((await run<RetryingRow & { key_id: string }>(this.db, pg.RETRYING_OF_USER, [userId])).rows);
  }

  async countMatching(keyId: string, filter: RedeliveryFilter): Promise<number> {
    const [text, params] = countMatchingQuery(keyId, filter);
    return Number((await run<{ n: string | number }>(this.db, numberedOnce(text), params)).rows[0]?.n ?? 0);
  }

  async redeliverMatching(keyId: string, filter: RedeliveryFilter, now: number, url?: string): Promise<number> {
    // Batches as on SQLite: each statement holds its rows' locks (and a concurrent redelivery's wait) briefly.
    let cursor: RedeliveryCursor | undefined;
    let redelivered = 0;
    while (redelivered < filter.limit) {
      const size = Math.min(REDELIVER_BATCH, filter.limit - redelivered);
      const [text, params] = redeliverBatchQuery(keyId, filter, now, url || null, cursor, size, { lockInIdOrder: true });
      const { rows } = await runPastDeadlocks<{ created_at: number | string; id: string }>(this.db, numberedOnce(text), params);
      redelivered += rows.length;
      cursor = oldestOf(rows);
      if (rows.length < size || cursor === undefined) break;
    }
    return redelivered;
  }

  async cancel(keyId: string, id: string, now: number, reason: string): Promise<DeliverySummaryRow | undefined> {
    return (await run<DeliverySummaryRow>(this.db, pg.CANCEL, [reason, now, id, keyId])).rows[0];
  }

  async cancelPending(keyId: string, now: number, reason: string): Promise<number> {
    return affected(this.db, pg.CANCEL_PENDING, [reason, now, keyId], runPastDeadlocks);
  }

  async retargetPending(keyId: string, url: string, now: number): Promise<number> {
    return affected(this.db, pg.RETARGET_PENDING, [url, now, keyId], runPastDeadlocks);
  }
}
