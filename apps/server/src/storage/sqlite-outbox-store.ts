import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { SqliteStatements } from './sqlite-statements.js';
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
  type OnceSpan,
  type SequencedDelivery,
} from './outbox-store.js';
import {
  attemptParams,
  attemptUpdate,
  BACKLOG,
  type BacklogRow,
  BY_ID,
  KEY_WEBHOOKS,
  PAYLOAD_OF,
  STATE_OF,
  CANCEL,
  CANCEL_PENDING,
  RETRYING_SQLITE,
  RETRYING_OF_USER_SQLITE,
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
  INSERT_DELIVERY as INSERT_DELIVERY_SQL,
  INSERT_PAYLOAD as INSERT_PAYLOAD_SQL,
  keptApart,
  insertAttemptsSql,
  insertParams,
  TEST_SENDS_IN_FLIGHT,
  LIST_CURSOR,
  listQuery,
  oldestOf,
  REDELIVER_BATCH,
  redeliverBatchQuery,
  type RedeliveryCursor,
  NEXT_DUE,
  page,
  PURGE_ATTEMPTS_OF,
  PURGE_BATCH,
  PURGE_BYTES,
  PURGE_DELIVERIES_OF,
  PURGE_NEXT_SIZED,
  PURGE_PAYLOADS_OF,
  REDELIVER,
  RELEASE_LEASES,
  RELEASE_LEASES_OF,
  RETARGET_PENDING,
  toBacklog,
} from './outbox-sql.js';

/**
 * The UPDATE's own check of a claimed row: DUE_AND_UNLEASED with every column behind a unary `+`, so it is only
 * checked on the rows found by id. As a search term the planner took it for the (status, next_attempt_at) index
 * and read every due row to find the few claimed: with 100,000 waiting after a receiver's outage, each claim
 * held the event loop 55–120 ms.
 */
const RECHECK_DUE_AND_UNLEASED = `+status = 'pending' and +next_attempt_at <= ? and (+lease_until is null or +lease_until <= ?)`;

/**
 * A claim leaving out `n` receivers and `m` users. SQLite runs the uncorrelated sub-select once, so its LIMIT
 * holds; the row is checked again in the UPDATE's own WHERE.
 */
const claimTexts = new Map<string, string>();
export function claimSql(n: number, m: number): string {
  const key = `${n},${m}`;
  let text = claimTexts.get(key);
  if (text === undefined) {
    text = `update webhook_deliveries set lease_until = ?, leased_by = ?, updated_at = ?
  where id in (select id from webhook_deliveries where ${DUE_AND_UNLEASED}${excludingOrigins(n)}${excludingUsers(m)} order by next_attempt_at asc limit ?)
  and ${RECHECK_DUE_AND_UNLEASED} ${CLAIM_RETURNING}`;
    claimTexts.set(key, text);
  }
  return text;
}

/**
 * A write of the store's multi-statement transactions, made to roll back its whole transaction when it fails on
 * a constraint (`insert or rollback`, `update or rollback`) instead of only itself. A statement that can fail
 * alone inside a transaction first copies every page it is about to change into a statement journal: an outbox
 * insert changes eight or more pages (the row, its overflow page, the primary key and each index), 64 KiB and
 * more at 8 KiB pages, past which SQLite spills that journal to a temp file created, written and unlinked
 * within the statement. Each transaction here is undone whole on any error anyway (better-sqlite3's
 * `transaction`, which ends only the transaction still open), and none runs inside another one (see the class).
 * Not the sequence upsert (NEXT_SEQUENCE): its DO UPDATE checks with ABORT whatever the statement says, and it
 * changes one row of a small table.
 */
function rollingBack(sql: string): string {
  if (!/^(insert|update) /.test(sql)) throw new Error(`not an insert or update: ${sql.slice(0, 40)}`);
  return sql.replace(/^(insert|update) /, '$1 or rollback ');
}

const INSERT_DELIVERY = rollingBack(INSERT_DELIVERY_SQL);
const INSERT_PAYLOAD = rollingBack(INSERT_PAYLOAD_SQL);

// The attempt moves the row on only while the row is still leased as it was when sent (AttemptRecord.leasedBy):
// a delivery cancelled or redelivered meanwhile stays as that left it, and another worker's newer lease stands.
// The attempt is counted and logged either way. Parameters: attemptUpdate's, then the delivery id.
const RECORD_ONE = rollingBack(`update webhook_deliveries set attempts = attempts + 1,
  status = case when coalesce(leased_by, '') = v.held_by and status <> 'cancelled' then v.new_status else status end,
  next_attempt_at = case when coalesce(leased_by, '') = v.held_by and status <> 'cancelled' then v.next_at else next_attempt_at end,
  lease_until = case when coalesce(leased_by, '') = v.held_by then null else lease_until end,
  leased_by = case when coalesce(leased_by, '') = v.held_by then null else leased_by end,
  last_status_code = v.code, last_error = case when status = 'cancelled' then last_error else v.err end, updated_at = v.at,
  delivered_at = coalesce(v.delivered, delivered_at)
  from (select ? as held_by, ? as new_status, ? as next_at, ? as code, ? as err, ? as at, ? as delivered, ? as delivery_id) as v
  where webhook_deliveries.id = v.delivery_id returning attempts`);

/**
 * Takes a key's next `n` sequence numbers and returns the last (parameters: key, n). Postgres takes several
 * keys' numbers in one statement (`postgres-outbox-store.ts`).
 */
const NEXT_SEQUENCE = `insert into delivery_sequences (key_id, last) values (?, ?)
  on conflict (key_id) do update set last = delivery_sequences.last + excluded.last returning last`;

const INSERT_ATTEMPT = rollingBack(insertAttemptsSql(1));

/**
 * Whether a delivery recorded `once` is stored, under its id or another of its `onceSpan` (parameters: id, from, to,
 * tail): it is left out then.
 */
const DELIVERY_EXISTS = `select 1 as found where exists (select 1 from webhook_deliveries where id = ?)
  or exists (select 1 from webhook_deliveries where id >= ? and id < ? and substr(id, -20) = ?)`;

const RELEASE_CLAIM = rollingBack(`update webhook_deliveries set lease_until = null, leased_by = null, updated_at = ?
  where id = ? and leased_by = ? and status = 'pending'`);

/**
 * The outbox on the embedded SQLite connection: every statement prepared once and run synchronously, each
 * write batch in one IMMEDIATE transaction (the write lock is taken at BEGIN, where the busy timeout waits for
 * another process's writer; a deferred transaction that upgrades later fails at once when another process
 * committed in between).
 *
 * Kysely shares the connection, and a Kysely transaction spans event-loop turns. While one is open these
 * statements wait for it through Kysely's lock on the connection, so they commit on their own: run inside
 * it they would be rolled back with it, after this store had reported them written.
 */
export class SqliteOutboxStore implements OutboxStore {
  private readonly insertTx: (deliveries: readonly NewDelivery[]) => void;
  private readonly insertSequencedTx: (deliveries: readonly SequencedDelivery[]) => NewDelivery[];
  private readonly recordTx: (batch: readonly AttemptRecord[]) => number[];
  private readonly releaseTx: (ids: readonly string[], workerId: string, now: number) => void;
  private readonly purgeTx: (ts: number) => { removed: number; more: boolean };
  private readonly insertTestSendTx: (delivery: NewDelivery, max: number) => { inFlight: number; inserted: boolean };

  constructor(
    private readonly statements: SqliteStatements,
    private readonly kysely: Kysely<Database>,
  ) {
    const sqlite = statements.db;
    this.insertTx = sqlite.transaction((deliveries: readonly NewDelivery[]) => {
      for (const d of deliveries) this.insertRow(d);
    }).immediate;
    // The write lock is held from BEGIN: nothing comes between taking the numbers and inserting the rows. One
    // upsert per key and batch, not per row: per row it costs a third more CPU per delivery
    // (bench/outbox-sqlite.bench.mjs --sequenced row|batch).
    this.insertSequencedTx = sqlite.transaction((all: readonly SequencedDelivery[]) => {
      const exists = this.stmt(DELIVERY_EXISTS);
      const stored = ({ id, from, to, tail }: OnceSpan) => exists.get(id, from, to, tail) !== undefined;
      const recorded = all.some((d) => d.once) ? all.filter((d) => !d.once || !stored(onceSpan(d.id))) : all;
      if (recorded.length === 0) return [];
      const keys = this.stmt(KEY_WEBHOOKS).all(JSON.stringify([...new Set(recorded.map((d) => d.keyId))])) as KeyWebhook[];
      const deliveries = deliveriesAsKeysSay(recorded, keys);
      if (deliveries.length === 0) return [];
      const next = this.stmt(NEXT_SEQUENCE);
      const counts = countByKey(deliveries);
      const last = new Map<string, number>();
      for (const [keyId, n] of counts) last.set(keyId, Number((next.get(keyId, n) as { last: number }).last));
      const inserted = numberDeliveries(deliveries, counts, last);
      for (const d of inserted) this.insertRow(d);
      return inserted;
    }).immediate;
    // One UPDATE and one INSERT per attempt: on SQLite a multi-row UPDATE … FROM (VALUES …) is no faster (it
    // materialises its join first; the time goes to the pages written, not to the statements).
    this.recordTx = sqlite.transaction((batch: readonly AttemptRecord[]) => {
      const update = this.stmt(RECORD_ONE);
      const insert = this.stmt(INSERT_ATTEMPT);
      const numbers: number[] = [];
      for (const record of batch) {
        const updated = update.get(...attemptUpdate(record), record.deliveryId) as { attempts: number } | undefined;
        if (!updated) throw missingDelivery(record.deliveryId);
        const attempt = Number(updated.attempts);
        insert.run(attemptParams([record], [attempt]));
        numbers.push(attempt);
      }
      return numbers;
    }).immediate;
    this.releaseTx = sqlite.transaction((ids: readonly string[], workerId: string, now: number) => {
      const release = this.stmt(RELEASE_CLAIM);
      for (const id of ids) release.run(now, id, workerId);
    }).immediate;
    // The write lock is held from BEGIN: another process's test send of the key counts after this one.
    this.insertTestSendTx = sqlite.transaction((delivery: NewDelivery, max: number) => {
      const { n } = this.stmt(TEST_SENDS_IN_FLIGHT).get(delivery.keyId, delivery.now) as { n: number };
      if (n >= max) return { inFlight: n, inserted: false };
      this.insertRow(delivery);
      return { inFlight: n, inserted: true };
    }).immediate;
    // One batch: up to PURGE_BATCH deliveries and PURGE_BYTES of their payloads (one at least), and their attempts.
    this.purgeTx = sqlite.transaction((ts: number) => {
      const candidates = this.stmt(PURGE_NEXT_SIZED).all(ts, PURGE_BATCH) as Array<{ id: string; bytes: number | null }>;
      const ids: string[] = [];
      let bytes = 0;
      for (const candidate of candidates) {
        bytes += candidate.bytes ?? 0;
        if (ids.length > 0 && bytes > PURGE_BYTES) break;
        ids.push(candidate.id);
      }
      const taken = JSON.stringify(ids);
      this.stmt(PURGE_ATTEMPTS_OF).run(taken);
      this.stmt(PURGE_PAYLOADS_OF).run(taken);
      const removed = this.stmt(PURGE_DELIVERIES_OF).run(taken).changes;
      return { removed, more: ids.length < candidates.length || candidates.length === PURGE_BATCH };
    }).immediate;
  }

  private stmt(sql: string): SQLite.Statement {
    return this.statements.get(sql);
  }

  /** A new delivery's row, and its payload's when kept apart; within a write transaction. */
  private insertRow(d: NewDelivery): void {
    this.stmt(INSERT_DELIVERY).run(insertParams(d));
    if (keptApart(d.payload)) this.stmt(INSERT_PAYLOAD).run(d.id, d.payload);
  }

  /** A Kysely transaction is open on the connection: wait for `transactionEnded` before running a statement. */
  private get busy(): boolean {
    return !this.statements.usable && this.statements.db.open;
  }

  /**
   * Resolves once no Kysely transaction is open on the connection (see the class). Kysely's lock is free
   * again before this continues, so another transaction may have begun meanwhile: hence the loop.
   */
  private async transactionEnded(): Promise<void> {
    while (this.busy) await this.kysely.connection().execute(async () => undefined);
  }

  async insert(delivery: NewDelivery): Promise<void> {
    return this.insertMany([delivery]);
  }

  async insertTestSend(delivery: NewDelivery, max: number): Promise<{ inFlight: number; inserted: boolean }> {
    if (this.busy) await this.transactionEnded();
    return this.insertTestSendTx(delivery, max);
  }

  async insertMany(deliveries: NewDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    if (this.busy) await this.transactionEnded();
    return this.insertTx(deliveries);
  }

  async insertSequenced(deliveries: readonly SequencedDelivery[]): Promise<NewDelivery[]> {
    if (deliveries.length === 0) return [];
    if (this.busy) await this.transactionEnded();
    return this.insertSequencedTx(deliveries);
  }

  async claimDue(now: number, limit: number, leaseMs: number, workerId: string, leftOut: LeftOut = NOTHING_LEFT_OUT): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    const patterns = leftOut.origins.map(originPattern);
    const users = leftOut.users;
    if (this.busy) await this.transactionEnded();
    const sql = claimSql(patterns.length, users.length);
    const rows = this.stmt(sql).all(now + leaseMs, workerId, now, now, now, ...patterns, ...users, limit, now, now) as ClaimedDelivery[];
    return rows.sort(byDue);
  }

  async recordAttempts(batch: readonly AttemptRecord[]): Promise<number[]> {
    if (batch.length === 0) return [];
    if (this.busy) await this.transactionEnded();
    return this.recordTx(batch);
  }

  async releaseLeases(now: number, leasedBy?: string): Promise<number> {
    if (this.busy) await this.transactionEnded();
    return leasedBy === undefined ? this.stmt(RELEASE_LEASES).run(now).changes : this.stmt(RELEASE_LEASES_OF).run(now, leasedBy).changes;
  }

  async releaseClaims(ids: readonly string[], workerId: string, now: number): Promise<void> {
    if (ids.length === 0) return;
    if (this.busy) await this.transactionEnded();
    return this.releaseTx(ids, workerId, now);
  }

  async nextDueAfter(now: number): Promise<number | undefined> {
    if (this.busy) await this.transactionEnded();
    const row = this.stmt(NEXT_DUE).get(now, now) as { next_attempt_at: number | null; lease_until: number | null };
    return earliest(row.next_attempt_at, row.lease_until);
  }

  async purgeOlderThan(ts: number): Promise<number> {
    let removed = 0;
    for (;;) {
      if (this.busy) await this.transactionEnded();
      const batch = this.purgeTx(ts);
      removed += batch.removed;
      if (!batch.more) return removed;
      // Requests and the worker's writes go between batches.
      await yieldToEventLoop();
    }
  }

  async backlog(now: number): Promise<Backlog> {
    if (this.busy) await this.transactionEnded();
    return toBacklog(this.stmt(BACKLOG).get(now) as BacklogRow);
  }

  async payloadOf(id: string): Promise<PayloadToSend | undefined> {
    if (this.busy) await this.transactionEnded();
    return this.stmt(PAYLOAD_OF).get(id) as PayloadToSend | undefined;
  }

  async stateOf(id: string): Promise<Pick<DeliveryRow, 'status' | 'url'> | undefined> {
    if (this.busy) await this.transactionEnded();
    return this.stmt(STATE_OF).get(id) as Pick<DeliveryRow, 'status' | 'url'> | undefined;
  }

  async byId(id: string): Promise<DeliveryRow | undefined> {
    if (this.busy) await this.transactionEnded();
    return this.stmt(BY_ID).get(id) as DeliveryRow | undefined;
  }

  async recordedOnce(id: string): Promise<boolean> {
    if (this.busy) await this.transactionEnded();
    const { from, to, tail } = onceSpan(id);
    return this.stmt(DELIVERY_EXISTS).get(id, from, to, tail) !== undefined;
  }

  async list(keyId: string, options: ListOptions): Promise<{ rows: DeliverySummaryRow[]; hasMore: boolean }> {
    if (this.busy) await this.transactionEnded();
    let cursor: Pick<DeliveryRow, 'created_at' | 'id'> | undefined;
    if (options.before !== undefined) {
      cursor = this.stmt(LIST_CURSOR).get(keyId, options.before) as Pick<DeliveryRow, 'created_at' | 'id'> | undefined;
      if (!cursor) return { rows: [], hasMore: false };
    }
    const [text, params] = listQuery(keyId, options, cursor, options.limit + 1);
    return page(this.stmt(text).all(...params) as DeliverySummaryRow[], options.limit);
  }

  async get(keyId: string, id: string): Promise<{ delivery: DeliveryRow; attempts: AttemptRow[] } | undefined> {
    if (this.busy) await this.transactionEnded();
    const delivery = this.stmt(GET_DELIVERY).get(id, keyId) as DeliveryRow | undefined;
    if (!delivery) return undefined;
    return { delivery, attempts: this.stmt(GET_ATTEMPTS).all(id) as AttemptRow[] };
  }

  async progress(keyId: string, id: string): Promise<{ delivery: DeliverySummaryRow; attempts: AttemptRow[] } | undefined> {
    if (this.busy) await this.transactionEnded();
    const delivery = this.stmt(GET_DELIVERY_SUMMARY).get(id, keyId) as DeliverySummaryRow | undefined;
    if (!delivery) return undefined;
    return { delivery, attempts: this.stmt(GET_ATTEMPTS).all(id) as AttemptRow[] };
  }

  async redeliver(keyId: string, id: string, now: number, url?: string): Promise<DeliverySummaryRow | undefined> {
    if (this.busy) await this.transactionEnded();
    return this.stmt(REDELIVER).get(now, now, url || null, id, keyId) as DeliverySummaryRow | undefined;
  }

  async retrying(keyId: string): Promise<Retrying> {
    if (this.busy) await this.transactionEnded();
    return toRetrying(this.stmt(RETRYING_SQLITE).get(keyId) as RetryingRow);
  }

  async retryingOfUser(userId: string): Promise<Map<string, Retrying>> {
    if (this.busy) await this.transactionEnded();
    return toRetryingByKey(this.stmt(RETRYING_OF_USER_SQLITE).all(userId) as Array<RetryingRow & { key_id: string }>);
  }

  async countMatching(keyId: string, filter: RedeliveryFilter): Promise<number> {
    if (this.busy) await this.transactionEnded();
    const [text, params] = countMatchingQuery(keyId, filter);
    return Number((this.stmt(text).get(...params) as { n: number }).n);
  }

  async redeliverMatching(keyId: string, filter: RedeliveryFilter, now: number, url?: string): Promise<number> {
    let cursor: RedeliveryCursor | undefined;
    let redelivered = 0;
    while (redelivered < filter.limit) {
      if (this.busy) await this.transactionEnded();
      const size = Math.min(REDELIVER_BATCH, filter.limit - redelivered);
      const [text, params] = redeliverBatchQuery(keyId, filter, now, url || null, cursor, size);
      const rows = this.stmt(text).all(...params) as Array<{ created_at: number; id: string }>;
      redelivered += rows.length;
      cursor = oldestOf(rows);
      if (rows.length < size || cursor === undefined) break;
      // Requests and the worker go between batches (the worker may already be sending the first).
      await yieldToEventLoop();
    }
    return redelivered;
  }

  async cancel(keyId: string, id: string, now: number, reason: string): Promise<DeliverySummaryRow | undefined> {
    if (this.busy) await this.transactionEnded();
    return this.stmt(CANCEL).get(reason, now, id, keyId) as DeliverySummaryRow | undefined;
  }

  async cancelPending(keyId: string, now: number, reason: string): Promise<number> {
    if (this.busy) await this.transactionEnded();
    return this.stmt(CANCEL_PENDING).run(reason, now, keyId).changes;
  }

  async retargetPending(keyId: string, url: string, now: number): Promise<number> {
    if (this.busy) await this.transactionEnded();
    return this.stmt(RETARGET_PENDING).run(url, now, keyId).changes;
  }
}
