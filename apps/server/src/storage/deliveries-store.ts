import { CompiledQuery, type Kysely, sql } from 'kysely';
import { pooledRandom } from '../crypto/random-pool.js';
import type { Dialect } from './database.js';
import type { Database, WebhookAttemptsTable, WebhookDeliveriesTable } from './schema.js';
import type { SqliteStatements } from './sqlite-statements.js';

export type DeliveryRow = WebhookDeliveriesTable;
export type AttemptRow = WebhookAttemptsTable;
export type DeliveryRowStatus = DeliveryRow['status'];

export interface NewDelivery {
  id: string;
  keyId: string;
  userId: string;
  event: string;
  requestId: string;
  url: string;
  /** The exact serialised payload; every attempt sends and signs these bytes. */
  payload: string;
  now: number;
  /** Defaults to `now` (due at once). */
  nextAttemptAt?: number;
  /** Inserted already leased (a synchronous attempt by the caller), so no worker picks it up meanwhile. */
  lease?: { until: number; by: string };
}

export interface AttemptResult {
  attemptedAt: number;
  statusCode: number | null;
  durationMs: number;
  outcome: 'success' | 'failure';
  error: string | null;
  responseBody: string | null;
}

/** What the delivery becomes after an attempt. */
export type AttemptNext = { status: 'delivered' } | { status: 'failed' } | { status: 'pending'; nextAttemptAt: number };

export interface ListOptions {
  limit: number;
  status?: DeliveryRowStatus;
  /** A delivery id: return deliveries older than it (newest first). */
  before?: string;
}

export interface Backlog {
  /** Not yet delivered nor given up on. */
  pending: number;
  /** Pending and due now (includes ones leased and in flight). */
  due: number;
  failed: number;
}

type AttemptBatch = Array<{ deliveryId: string; result: AttemptResult; next: AttemptNext }>;

const INSERT_SQL = `insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts,
  next_attempt_at, lease_until, leased_by, last_status_code, last_error, created_at, updated_at, delivered_at)
  values (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, null, null, ?, ?, null)`;
// SQLite runs the uncorrelated sub-select once, so the LIMIT holds (Postgres needs the materialised CTE).
const CLAIM_SQL = `update webhook_deliveries set lease_until = ?, leased_by = ?, updated_at = ?
  where id in (select id from webhook_deliveries where status = 'pending' and next_attempt_at <= ?
    and (lease_until is null or lease_until <= ?) order by next_attempt_at asc limit ?)
  and status = 'pending' and (lease_until is null or lease_until <= ?)
  returning *`;
/** CLAIM_SQL leaving out the rows of `n` receivers (`url not like ?`, one per origin; see `claimDue`). */
function claimSqlExcluding(n: number): string {
  if (n === 0) return CLAIM_SQL;
  const clauses = Array.from({ length: n }, () => ` and url not like ? escape '\\'`).join('');
  return CLAIM_SQL.replace('and (lease_until is null or lease_until <= ?) order by', `and (lease_until is null or lease_until <= ?)${clauses} order by`);
}

/** The LIKE pattern of every URL under `origin` (`https://h:8443` → `https://h:8443/%`), wildcards escaped. */
export function originPattern(origin: string): string {
  return `${origin.replace(/[\\%_]/g, '\\$&')}/%`;
}

const NEXT_DUE_SQL = `select next_attempt_at from webhook_deliveries where status = 'pending' and next_attempt_at > ?
  order by next_attempt_at asc limit 1`;
// A delivery cancelled while its attempt was in flight stays cancelled (with its reason); the attempt is logged.
const RECORD_SQL = `update webhook_deliveries set attempts = attempts + 1,
  status = case when status = 'cancelled' then status else ? end,
  next_attempt_at = case when status = 'cancelled' then null else ? end, lease_until = null, leased_by = null,
  last_status_code = ?, last_error = case when status = 'cancelled' then last_error else ? end, updated_at = ?,
  delivered_at = coalesce(?, delivered_at)
  where id = ? returning attempts`;

/**
 * Rows per statement when recording attempts: a batch is cut into chunks of these sizes, largest first (37 =
 * 32 + 4 + 1), so there are at most 7 statement texts of each kind per dialect (SQLite prepares each once).
 */
const RECORD_CHUNK_SIZES = [64, 32, 16, 8, 4, 2, 1];
const recordSqlCache = new Map<string, string>();

function cachedSql(kind: 'update' | 'insert', dialect: Dialect, n: number, build: (param: () => string) => string): string {
  const cacheKey = `${kind}:${dialect}:${n}`;
  let text = recordSqlCache.get(cacheKey);
  if (text === undefined) {
    let count = 0;
    text = build(() => (dialect === 'postgres' ? `$${++count}` : '?'));
    recordSqlCache.set(cacheKey, text);
  }
  return text;
}

/** Moves `n` distinct deliveries on in one UPDATE … FROM (VALUES …) (`updateParams`); returns their ids and attempt numbers. */
function recordManySql(dialect: Dialect, n: number): string {
  return cachedSql('update', dialect, n, (p) => {
    // The casts type the VALUES columns (Postgres infers nothing from a NULL parameter); SQLite accepts them too.
    const row = () =>
      `(cast(${p()} as text), cast(${p()} as text), cast(${p()} as bigint), cast(${p()} as integer), cast(${p()} as text), cast(${p()} as bigint), cast(${p()} as bigint))`;
    return `with v(id, status, next_attempt_at, status_code, error, attempted_at, delivered_at) as (values ${Array.from({ length: n }, row).join(', ')})
  update webhook_deliveries set attempts = webhook_deliveries.attempts + 1,
  status = case when webhook_deliveries.status = 'cancelled' then webhook_deliveries.status else v.status end,
  next_attempt_at = case when webhook_deliveries.status = 'cancelled' then null else v.next_attempt_at end,
  lease_until = null, leased_by = null, last_status_code = v.status_code,
  last_error = case when webhook_deliveries.status = 'cancelled' then webhook_deliveries.last_error else v.error end, updated_at = v.attempted_at,
  delivered_at = coalesce(v.delivered_at, webhook_deliveries.delivered_at)
  from v where webhook_deliveries.id = v.id returning webhook_deliveries.id, webhook_deliveries.attempts`;
  });
}

/** Inserts `n` attempt rows (`attemptParams`). */
function insertAttemptsSql(dialect: Dialect, n: number): string {
  return cachedSql('insert', dialect, n, (p) => {
    const row = () => `(${p()}, ${p()}, ${p()}, ${p()}, ${p()}, ${p()}, ${p()}, ${p()}, ${p()})`;
    return `insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code, duration_ms, outcome, error, response_body)
  values ${Array.from({ length: n }, row).join(', ')}`;
  });
}

/** A batch cut into chunks of RECORD_CHUNK_SIZES; one row per chunk when `distinct` is false. */
function recordChunks(batch: AttemptBatch, distinct = true): AttemptBatch[] {
  const chunks: AttemptBatch[] = [];
  for (let start = 0; start < batch.length; ) {
    const left = batch.length - start;
    const size = distinct ? RECORD_CHUNK_SIZES.find((n) => n <= left)! : 1;
    chunks.push(batch.slice(start, start + size));
    start += size;
  }
  return chunks;
}

/** What an attempt sets on its delivery, in the column order of RECORD_SQL and the multi-row update. */
function attemptUpdate({ result, next }: AttemptBatch[number]): unknown[] {
  return [
    next.status,
    next.status === 'pending' ? next.nextAttemptAt : null,
    result.statusCode,
    result.error,
    result.attemptedAt,
    next.status === 'delivered' ? result.attemptedAt : null,
  ];
}

function updateParams(chunk: AttemptBatch): unknown[] {
  const params: unknown[] = [];
  for (const entry of chunk) params.push(entry.deliveryId, ...attemptUpdate(entry));
  return params;
}

/** The attempt rows of a chunk; `numbers[i]` is the attempt number of `chunk[i]`. */
function attemptParams(chunk: AttemptBatch, numbers: number[]): unknown[] {
  const params: unknown[] = [];
  for (const [i, { deliveryId, result }] of chunk.entries()) {
    params.push(attemptId(), deliveryId, numbers[i], result.attemptedAt, result.statusCode, Math.max(0, Math.round(result.durationMs)), result.outcome, result.error, result.responseBody);
  }
  return params;
}

function missingDelivery(deliveryId: string): Error {
  return new Error(`delivery ${deliveryId} does not exist`);
}

/**
 * `prefix` + 32 hex digits, UUIDv7's layout: the first 12 are the millisecond time, the other 20 random (80
 * bits). Time-ordered keys land on the last page of their indexes, which a batch of inserts then shares;
 * random keys dirtied a page of each index per row (SQLite writes every dirtied page to the WAL).
 */
function timeOrderedId(prefix: string): string {
  return `${prefix}${Date.now().toString(16).padStart(12, '0').slice(-12)}${pooledRandom(10, 'hex')}`;
}

function attemptId(): string {
  return timeOrderedId('wha_');
}

/** A fresh delivery id: `whd_` + 32 hex characters. */
export function newDeliveryId(): string {
  return timeOrderedId('whd_');
}

/** The row a new delivery is stored as — with its lease, it is also what a claim of it would return. */
export function newDeliveryRow(d: NewDelivery): DeliveryRow {
  return {
    id: d.id,
    key_id: d.keyId,
    user_id: d.userId,
    event: d.event,
    request_id: d.requestId,
    url: d.url,
    payload: d.payload,
    status: 'pending',
    attempts: 0,
    next_attempt_at: d.nextAttemptAt ?? d.now,
    lease_until: d.lease?.until ?? null,
    leased_by: d.lease?.by ?? null,
    last_status_code: null,
    last_error: null,
    created_at: d.now,
    updated_at: d.now,
    delivered_at: null,
  };
}

/**
 * The webhook outbox: every SQL statement about deliveries and their attempts. Works on SQLite (single writer:
 * one UPDATE … RETURNING claims rows atomically) and Postgres (FOR UPDATE SKIP LOCKED, so several instances can
 * run workers on one database). A claim is a lease: a worker that dies mid-attempt loses it when it expires
 * and the row becomes due again (at-least-once).
 *
 * @example
 * const [row] = await store.deliveries.claimDue(Date.now(), 16, 60_000, 'worker-1');
 */
export class DeliveriesStore {
  private readonly insertTx: ((deliveries: NewDelivery[]) => void) | undefined;
  private readonly recordTx: ((batch: AttemptBatch) => number[]) | undefined;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
    /** SQLite: the hot statements run synchronously, prepared once, each batch in one transaction. */
    private readonly fast?: SqliteStatements,
  ) {
    if (fast) {
      // IMMEDIATE: the write lock is taken at BEGIN, where the busy timeout waits for another process's
      // writer. A deferred transaction that reads first and upgrades later fails with SQLITE_BUSY_SNAPSHOT,
      // without waiting, when another process committed in between (several server processes, admin commands).
      this.insertTx = fast.db.transaction((deliveries: NewDelivery[]) => {
        const stmt = fast.get(INSERT_SQL);
        for (const d of deliveries) {
          stmt.run(d.id, d.keyId, d.userId, d.event, d.requestId, d.url, d.payload, d.nextAttemptAt ?? d.now, d.lease?.until ?? null, d.lease?.by ?? null, d.now, d.now);
        }
      }).immediate;
      // Per attempt: one UPDATE and one INSERT, prepared once. Measured against the multi-row statements of
      // the kysely path below: no faster on SQLite (an UPDATE … FROM materialises its join first; the time
      // goes to the pages written, not to the statements).
      this.recordTx = fast.db.transaction((batch: AttemptBatch) => {
        const update = fast.get(RECORD_SQL);
        const insert = fast.get(insertAttemptsSql('sqlite', 1));
        const numbers: number[] = [];
        for (const entry of batch) {
          const { deliveryId } = entry;
          const updated = update.get(...attemptUpdate(entry), deliveryId) as { attempts: number } | undefined;
          if (!updated) throw missingDelivery(deliveryId);
          const attempt = Number(updated.attempts);
          insert.run(attemptParams([entry], [attempt]));
          numbers.push(attempt);
        }
        return numbers;
      }).immediate;
    }
  }

  async insert(delivery: NewDelivery): Promise<void> {
    await this.insertMany([delivery]);
  }

  /** Inserts several deliveries in one statement (one transaction). */
  async insertMany(deliveries: NewDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    if (this.insertTx && this.fast!.usable) return this.insertTx(deliveries);
    await this.db
      .insertInto('webhook_deliveries')
      .values(
        deliveries.map(newDeliveryRow),
      )
      .execute();
  }

  /**
   * Leases up to `limit` due rows (pending, next attempt reached, no live lease) to `workerId` until
   * `now + leaseMs`, oldest due first, and returns them.
   */
  async claimDue(now: number, limit: number, leaseMs: number, workerId: string, excludeOrigins: readonly string[] = []): Promise<DeliveryRow[]> {
    if (limit <= 0) return [];
    const patterns = excludeOrigins.map(originPattern);
    if (this.fast?.usable) {
      const rows = this.fast.get(claimSqlExcluding(patterns.length)).all(now + leaseMs, workerId, now, now, now, ...patterns, limit, now) as DeliveryRow[];
      return rows.sort(byDue);
    }
    let candidates = this.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('status', '=', 'pending')
      .where('next_attempt_at', '<=', now)
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)]))
      .orderBy('next_attempt_at', 'asc')
      .limit(limit);
    for (const pattern of patterns) candidates = candidates.where(sql<boolean>`url not like ${pattern} escape '\\'`);
    if (this.dialect === 'postgres') candidates = candidates.forUpdate().skipLocked();
    // A materialised CTE: Postgres may re-run an `IN (… LIMIT n)` sub-select per row and exceed the limit.
    const rows = await this.db
      .with((cte) => cte('due').materialized(), () => candidates)
      .updateTable('webhook_deliveries')
      .set({ lease_until: now + leaseMs, leased_by: workerId, updated_at: now })
      .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
      // Re-checked on the row itself: on Postgres a row may have changed between the sub-select and the update.
      .where('status', '=', 'pending')
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)]))
      .returningAll()
      .execute();
    // RETURNING follows no particular order.
    return rows.sort(byDue);
  }

  /**
   * Stores one attempt and moves the delivery on (delivered / failed / pending with its next time), releasing
   * the lease, in one transaction. Returns the attempt number.
   */
  async recordAttempt(deliveryId: string, result: AttemptResult, next: AttemptNext): Promise<number> {
    const [attempt] = await this.recordAttempts([{ deliveryId, result, next }]);
    return attempt!;
  }

  /**
   * Several `recordAttempt`s in one transaction (the worker groups attempts that end together). On Postgres
   * two statements per chunk of up to 64 attempts (see RECORD_CHUNK_SIZES) instead of two round trips per attempt.
   */
  async recordAttempts(batch: AttemptBatch): Promise<number[]> {
    if (batch.length === 0) return [];
    if (this.recordTx && this.fast!.usable) return this.recordTx(batch);
    // A delivery twice in one batch is updated twice (each attempt counts): one row per chunk then.
    const distinct = new Set(batch.map((b) => b.deliveryId)).size === batch.length;
    return this.db.transaction().execute(async (trx) => {
      const numbers: number[] = [];
      for (const chunk of recordChunks(batch, distinct)) {
        const updated = await trx.executeQuery<{ id: string; attempts: number }>(
          CompiledQuery.raw(recordManySql(this.dialect, chunk.length), updateParams(chunk)),
        );
        const byId = new Map(updated.rows.map((row) => [row.id, Number(row.attempts)]));
        const chunkNumbers = chunk.map(({ deliveryId }) => {
          const attempt = byId.get(deliveryId);
          if (attempt === undefined) throw missingDelivery(deliveryId);
          return attempt;
        });
        await trx.executeQuery(CompiledQuery.raw(insertAttemptsSql(this.dialect, chunk.length), attemptParams(chunk, chunkNumbers)));
        numbers.push(...chunkNumbers);
      }
      return numbers;
    });
  }

  /** Deliveries of one key, newest first; `before` is the id of the last delivery of the previous page. */
  async list(keyId: string, options: ListOptions): Promise<{ rows: DeliveryRow[]; hasMore: boolean }> {
    let query = this.db.selectFrom('webhook_deliveries').selectAll().where('key_id', '=', keyId);
    if (options.status) query = query.where('status', '=', options.status);
    if (options.before !== undefined) {
      const cursor = await this.db
        .selectFrom('webhook_deliveries')
        .select(['created_at', 'id'])
        .where('key_id', '=', keyId)
        .where('id', '=', options.before)
        .executeTakeFirst();
      if (!cursor) return { rows: [], hasMore: false };
      query = query.where((eb) =>
        eb.or([
          eb('created_at', '<', cursor.created_at),
          eb.and([eb('created_at', '=', cursor.created_at), eb('id', '<', cursor.id)]),
        ]),
      );
    }
    const rows = await query
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(options.limit + 1)
      .execute();
    const hasMore = rows.length > options.limit;
    return { rows: rows.slice(0, options.limit), hasMore };
  }

  /** One delivery of one key with its attempts (oldest first); undefined for another key's id. */
  async get(keyId: string, id: string): Promise<{ delivery: DeliveryRow; attempts: AttemptRow[] } | undefined> {
    const delivery = await this.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .executeTakeFirst();
    if (!delivery) return undefined;
    const attempts = await this.db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('delivery_id', '=', id)
      .orderBy('attempt', 'asc')
      .execute();
    return { delivery, attempts };
  }

  /**
   * Ends every lease, or only those of worker `leasedBy` (a process known to be dead); pending rows become
   * due by their next attempt time. Returns how many were leased.
   */
  async releaseLeases(now: number, leasedBy?: string): Promise<number> {
    let query = this.db
      .updateTable('webhook_deliveries')
      .set({ lease_until: null, leased_by: null, updated_at: now })
      .where('status', '=', 'pending')
      .where('lease_until', 'is not', null);
    if (leasedBy !== undefined) query = query.where('leased_by', '=', leasedBy);
    const result = await query.executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /**
   * Gives rows leased by `workerId` back to the outbox unattempted (their receiver had no room): due as they
   * were, claimable by the next claim that does not leave their receiver out.
   */
  async releaseClaims(ids: readonly string[], workerId: string, now: number): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .updateTable('webhook_deliveries')
      .set({ lease_until: null, leased_by: null, updated_at: now })
      .where('id', 'in', ids)
      .where('leased_by', '=', workerId)
      .where('status', '=', 'pending')
      .execute();
  }

  /** Any delivery by id (worker use). */
  async byId(id: string): Promise<DeliveryRow | undefined> {
    const row = await this.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirst();
    return row;
  }

  /**
   * Makes a delivery of this key due now again (same id, same bytes; `url` when the key's URL changed since). A delivery leased by a worker keeps its
   * lease: it becomes due again once that attempt is recorded or the lease lapses. Returns the row, or
   * undefined when the key has no such delivery.
   */
  async redeliver(keyId: string, id: string, now: number, url?: string): Promise<DeliveryRow | undefined> {
    const row = await this.db
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', next_attempt_at: now, updated_at: now, ...(url ? { url } : {}) })
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .returningAll()
      .executeTakeFirst();
    return row;
  }

  /**
   * Cancels one pending delivery of `keyId`: status `cancelled`, `reason` as its last error, no further
   * attempt. Returns the row, or undefined when the key has no pending delivery with that id.
   */
  async cancel(keyId: string, id: string, now: number, reason: string): Promise<DeliveryRow | undefined> {
    return this.db
      .updateTable('webhook_deliveries')
      .set({ status: 'cancelled', next_attempt_at: null, lease_until: null, leased_by: null, last_error: reason, updated_at: now })
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('status', '=', 'pending')
      .returningAll()
      .executeTakeFirst();
  }

  /** Cancels every pending delivery of `keyId` (its webhook URL was cleared). Returns how many. */
  async cancelPending(keyId: string, now: number, reason: string): Promise<number> {
    const result = await this.db
      .updateTable('webhook_deliveries')
      .set({ status: 'cancelled', next_attempt_at: null, lease_until: null, leased_by: null, last_error: reason, updated_at: now })
      .where('key_id', '=', keyId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** Points every pending delivery of `keyId` at `url` (the key's new webhook URL): their next attempts go there. */
  async retargetPending(keyId: string, url: string, now: number): Promise<number> {
    const result = await this.db
      .updateTable('webhook_deliveries')
      .set({ url, updated_at: now })
      .where('key_id', '=', keyId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /**
   * When the worker should look again: the earliest next attempt after `now` (an index range scan), or the
   * earliest lease after `now` of a row still pending — so a crashed instance's claims are retried by the
   * others as soon as their lease lapses, not at the next idle poll.
   */
  async nextDueAfter(now: number): Promise<number | undefined> {
    if (this.fast?.usable) {
      const row = this.fast.get(NEXT_DUE_SQL).get(now) as { next_attempt_at: number | null } | undefined;
      return row?.next_attempt_at ?? undefined;
    }
    const earliestPending = async (column: 'next_attempt_at' | 'lease_until') => {
      const row = await this.db
        .selectFrom('webhook_deliveries')
        .select(column)
        .where('status', '=', 'pending')
        .where(column, '>', now)
        .orderBy(column, 'asc')
        .limit(1)
        .executeTakeFirst();
      return row?.[column] ?? undefined;
    };
    const times = (await Promise.all([earliestPending('next_attempt_at'), earliestPending('lease_until')])).filter(
      (t): t is number => typeof t === 'number',
    );
    return times.length ? Math.min(...times) : undefined;
  }

  /** Deletes deliveries (and their attempts) created before `ts`, except pending ones. Returns how many. */
  async purgeOlderThan(ts: number): Promise<number> {
    return this.db.transaction().execute(async (trx) => {
      const old = trx
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('created_at', '<', ts)
        .where('status', '!=', 'pending');
      await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', old).execute();
      const result = await trx
        .deleteFrom('webhook_deliveries')
        .where('created_at', '<', ts)
        .where('status', '!=', 'pending')
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }

  /** Backlog counts for metrics and tests. */
  async backlog(now: number): Promise<Backlog> {
    const row = await this.db
      .selectFrom('webhook_deliveries')
      .select([
        sql<number>`sum(case when status = 'pending' then 1 else 0 end)`.as('pending'),
        sql<number>`sum(case when status = 'pending' and next_attempt_at <= ${now} then 1 else 0 end)`.as('due'),
        sql<number>`sum(case when status = 'failed' then 1 else 0 end)`.as('failed'),
      ])
      .executeTakeFirst();
    return { pending: Number(row?.pending ?? 0), due: Number(row?.due ?? 0), failed: Number(row?.failed ?? 0) };
  }
}

function byDue(a: DeliveryRow, b: DeliveryRow): number {
  return (a.next_attempt_at ?? 0) - (b.next_attempt_at ?? 0) || a.created_at - b.created_at;
}
