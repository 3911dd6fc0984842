import { newAttemptId, type AttemptRecord, type Backlog, type DeliveryRow, type DeliverySummaryRow, type ListFilter, type NewDelivery, type RedeliveryFilter, type Retrying } from './outbox-store.js';

/**
 * The outbox's SQL that SQLite and Postgres share, with `?` parameters (`numbered` turns them into Postgres's
 * `$1, $2, …`). Where the dialects differ (claims, multi-row writes) each store has its own statements.
 */

/** One column of a new delivery's row: its SQL value, and for a value with a `?`, the parameter's value. */
export interface NewDeliveryColumn {
  column: keyof DeliveryRow;
  sql: string;
  param?: (d: NewDelivery) => unknown;
}

const param = (column: keyof DeliveryRow, value: (d: NewDelivery) => unknown, sql = '?'): NewDeliveryColumn => ({ column, sql, param: value });
const constant = (column: keyof DeliveryRow, sql: string): NewDeliveryColumn => ({ column, sql });

/**
 * A new delivery's row, column by column. The insert's text and its parameters are both made from this one
 * list, so a column added or moved cannot shift a value under another column; a store that computes a column
 * its own way (Postgres's lease on the database's clock) replaces that column by name (`withColumn`).
 */
export const NEW_DELIVERY: readonly NewDeliveryColumn[] = [
  param('id', (d) => d.id),
  param('key_id', (d) => d.keyId),
  param('user_id', (d) => d.userId),
  param('event', (d) => d.event),
  param('request_id', (d) => d.requestId),
  param('url', (d) => d.url),
  param('payload', (d) => rowPayload(d.payload)),
  constant('status', "'pending'"),
  constant('attempts', '0'),
  param('next_attempt_at', (d) => d.nextAttemptAt ?? d.now),
  param('lease_until', (d) => d.lease?.until ?? null),
  param('leased_by', (d) => d.lease?.by ?? null),
  constant('last_status_code', 'null'),
  constant('last_error', 'null'),
  param('created_at', (d) => d.now),
  param('updated_at', (d) => d.now),
  constant('delivered_at', 'null'),
];

/** `columns` with `replacement` in place of the column of its name (which must be there). */
export function withColumn(columns: readonly NewDeliveryColumn[], replacement: NewDeliveryColumn): NewDeliveryColumn[] {
  if (!columns.some((c) => c.column === replacement.column)) throw new Error(`a new delivery has no column ${replacement.column}`);
  return columns.map((c) => (c.column === replacement.column ? replacement : c));
}

/** Inserts `n` deliveries, one row of `columns` each (parameters: `insertParams` of each, in order). */
export function insertDeliveriesSql(n: number, columns: readonly NewDeliveryColumn[] = NEW_DELIVERY): string {
  for (const c of columns) {
    // One `?` exactly where there is a parameter: the parameters are taken one per such column.
    if ((c.sql.match(/\?/g)?.length ?? 0) !== (c.param ? 1 : 0)) throw new Error(`column ${c.column}: ${c.param ? 'one ? expected' : 'no ? expected'} in ${c.sql}`);
  }
  const row = `(${columns.map((c) => c.sql).join(', ')})`;
  return `insert into webhook_deliveries (${columns.map((c) => c.column).join(', ')})
  values ${Array.from({ length: n }, () => row).join(', ')}`;
}

export const INSERT_DELIVERY = insertDeliveriesSql(1);

/** `leased_by` of a test send's row while its one attempt runs (the worker leaves it alone). */
export const TEST_SEND_LEASE = 'test-send';

/** A key's test sends in flight, in every process: by the partial index deliveries_test_sends_idx. */
export const TEST_SENDS_IN_FLIGHT = `select count(*) as n from webhook_deliveries
  where leased_by = '${TEST_SEND_LEASE}' and key_id = ? and lease_until > ?`;

/** The due rows a claim may take (parameters: now, now), before the receivers it leaves out and its order. */
export const DUE_AND_UNLEASED = `status = 'pending' and next_attempt_at <= ? and (lease_until is null or lease_until <= ?)`;

/** `n` receivers left out of a claim, one `url not like ?` each (an `originPattern`). */
export function excludingOrigins(n: number): string {
  return ` and url not like ? escape '\\'`.repeat(n);
}

/** `m` users left out of a claim (at their share of the worker), one `user_id <> ?` each. */
export function excludingUsers(m: number): string {
  return ' and user_id <> ?'.repeat(m);
}

/** Inserts `n` attempt rows, 10 parameters each (`attemptParams`). */
export function insertAttemptsSql(n: number): string {
  const row = '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';
  return `insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code, duration_ms, outcome, error, response_body, request_headers)
  values ${Array.from({ length: n }, () => row).join(', ')}`;
}

/**
 * Pending rows under a lease: the terms of the partial index deliveries_leased_idx (a few rows, those in flight),
 * so a look at leases reads only them. In the due range of the (status, next_attempt_at) index instead, each
 * look read every due row for its lease: 100,000 waiting after a receiver's outage held SQLite's loop 60–200 ms.
 */
export const LEASED = `status = 'pending' and lease_until is not null`;

export const RELEASE_LEASES = `update webhook_deliveries set lease_until = null, leased_by = null, updated_at = ?
  where ${LEASED}`;
export const RELEASE_LEASES_OF = `${RELEASE_LEASES} and leased_by = ?`;

/** The next attempt time after now, and the first lease to lapse after now (parameters: now, now). */
export const NEXT_DUE = `select
  (select next_attempt_at from webhook_deliveries where status = 'pending' and next_attempt_at > ? order by next_attempt_at asc limit 1) as next_attempt_at,
  (select min(lease_until) from webhook_deliveries where ${LEASED} and lease_until > ?) as lease_until`;

/**
 * Deliveries a purge takes at a time (and their attempts), each batch its own transaction: 900,000 rows in one
 * held SQLite's event loop, and the write lock on either database, for tens of seconds.
 */
export const PURGE_BATCH = 1_000;

/**
 * SQLite: the payload bytes a purge's transaction deletes at most (one delivery at least). Deleting a row walks its
 * payload's overflow chain to free each page, on the event loop: 1,000 deliveries of RAG prompts of megabytes in
 * one batch would hold every request for as long as gigabytes take to read.
 */
export const PURGE_BYTES = 8 * 1024 * 1024;

/** SQLite: a purge's deletes of the deliveries taken (`PURGE_NEXT_SIZED`; parameter: a JSON array of their ids). */
export const PURGE_ATTEMPTS_OF = `delete from webhook_attempts where delivery_id in (select value from json_each(?))`;
export const PURGE_PAYLOADS_OF = `delete from webhook_payloads where delivery_id in (select value from json_each(?))`;
export const PURGE_DELIVERIES_OF = `delete from webhook_deliveries where id in (select value from json_each(?))`;

/** Each count a range of the (status, next_attempt_at) index: a sum over the table read all of it per scrape. */
export const BACKLOG = `select (select count(*) from webhook_deliveries where status = 'pending') as pending,
  (select count(*) from webhook_deliveries where status = 'pending' and next_attempt_at <= ?) as due,
  (select count(*) from webhook_deliveries where status = 'failed') as failed`;

export const LIST_CURSOR = `select created_at, id from webhook_deliveries where key_id = ? and id = ?`;
/**
 * Characters of a payload a page of deliveries reads (`DeliverySummaryRow.payload_head`): its request's `status_code`
 * comes before the prompt (audit-payload.ts), within the first few hundred. A page read every payload whole, and a
 * key's 100 deliveries of 9 MB prompts made each page 1 GB read into memory, other keys' requests waiting on it.
 */
export const PAYLOAD_HEAD_CHARS = 1024;

/** Every column of a delivery but its payload. */
const SUMMARY_COLUMN_NAMES = [
  'id',
  'key_id',
  'user_id',
  'event',
  'request_id',
  'url',
  'status',
  'attempts',
  'next_attempt_at',
  'lease_until',
  'leased_by',
  'last_status_code',
  'last_error',
  'created_at',
  'updated_at',
  'delivered_at',
] as const satisfies ReadonlyArray<keyof DeliverySummaryRow>;
// A column added to webhook_deliveries and not listed above is a type error here, not a field missing from the list.
const everyColumnListed: [Exclude<keyof DeliverySummaryRow, 'payload_head' | (typeof SUMMARY_COLUMN_NAMES)[number]>] extends [never] ? true : never = true;
void everyColumnListed;
const SUMMARY_COLUMNS = `${SUMMARY_COLUMN_NAMES.join(', ')}, substr(payload, 1, ${PAYLOAD_HEAD_CHARS}) as payload_head`;

/**
 * What a delivery's row holds of its payload (`webhook_deliveries.payload`): the whole when it is no longer than a
 * page's head, else its head, the whole going to webhook_payloads (`keptApart`). In the row, megabytes were an
 * overflow chain SQLite walked to read or write any column after it: each attempt, lease, redeliver and cancel
 * rewrote it on the event loop.
 */
export function rowPayload(payload: string): string {
  if (!keptApart(payload)) return payload;
  // Not half a surrogate pair: the drivers would store it as U+FFFD.
  const last = payload.charCodeAt(PAYLOAD_HEAD_CHARS - 1);
  return payload.slice(0, last >= 0xd800 && last <= 0xdbff ? PAYLOAD_HEAD_CHARS - 1 : PAYLOAD_HEAD_CHARS);
}

/** Whether a payload is stored whole in webhook_payloads (INSERT_PAYLOAD), its row holding its head. */
export function keptApart(payload: string): boolean {
  return payload.length > PAYLOAD_HEAD_CHARS;
}

export const INSERT_PAYLOAD = `insert into webhook_payloads (delivery_id, payload) values (?, ?)`;

/** A delivery's whole payload: from webhook_payloads, or its row (one no longer than its head, or stored before 017). */
const PAYLOAD = `coalesce((select payload from webhook_payloads where delivery_id = webhook_deliveries.id), webhook_deliveries.payload)`;

/** Every column of a delivery, its payload whole. */
const DELIVERY_COLUMNS = `${SUMMARY_COLUMN_NAMES.join(', ')}, ${PAYLOAD} as payload`;

/**
 * A delivery's payload's length in bytes. Both databases read it from the stored length, not the payload: SQLite's
 * octet_length from the record's header (length() would read every overflow page), Postgres's from the TOAST
 * pointer.
 */
const PAYLOAD_BYTES = `coalesce((select octet_length(payload) from webhook_payloads where delivery_id = webhook_deliveries.id), octet_length(webhook_deliveries.payload))`;

/** SQLite: the next finished deliveries created before a time, with their payloads' sizes (parameters: before, batch size). */
export const PURGE_NEXT_SIZED = `select id, ${PAYLOAD_BYTES} as bytes from webhook_deliveries where created_at < ? and status != 'pending' limit ?`;

/**
 * What a claim returns: the row without its payload but with its length (`ClaimedDelivery`), and its key's sealed
 * signing secret, read in the same statement.
 */
export const CLAIM_RETURNING = `returning ${SUMMARY_COLUMN_NAMES.join(', ')}, ${PAYLOAD_BYTES} as payload_bytes, ${['signing_secret_enc', 'previous_signing_secret_enc', 'previous_signing_secret_expires_at']
  .map((column) => `(select ${column} from api_keys where api_keys.id = webhook_deliveries.key_id) as ${column}`)
  .join(', ')}`;

/**
 * One key's page: the newest deliveries matching `filter`, after `cursor` (the previous page's last delivery) when
 * given; a SELECT and its parameters. Only the filter's own terms are in its text, each a plain comparison, so
 * the planner sees what it may search: (key_id, status, created_at) for a status, (key_id, request_id, created_at) for a
 * request, (key_id, created_at) for a time range (a `coalesce(?, status)` would hide the column from the planner,
 * which would read every delivery of the key).
 */
export function listQuery(keyId: string, filter: ListFilter, cursor: { created_at: number; id: string } | undefined, limit: number): [string, unknown[]] {
  let text = `select ${SUMMARY_COLUMNS} from webhook_deliveries where key_id = ?`;
  const params: unknown[] = [keyId];
  const term = (sql: string, ...values: unknown[]) => {
    text += ` and ${sql}`;
    params.push(...values);
  };
  if (filter.status !== undefined) term('status = ?', filter.status);
  if (filter.requestId !== undefined) term('request_id = ?', filter.requestId);
  if (filter.since !== undefined) term('created_at >= ?', filter.since);
  if (filter.until !== undefined) term('created_at < ?', filter.until);
  if (filter.lastStatusCode !== undefined) term('last_status_code between ? and ?', filter.lastStatusCode.min, filter.lastStatusCode.max);
  if (cursor !== undefined) term('created_at <= ? and (created_at < ? or id < ?)', cursor.created_at, cursor.created_at, cursor.id);
  return [`${text}\n  order by created_at desc, id desc limit ?`, [...params, limit]];
}

export const BY_ID = `select ${DELIVERY_COLUMNS} from webhook_deliveries where id = ?`;
/** SQLite: the webhook settings of the keys of a batch of audit deliveries, as they are now (`deliveriesAsKeysSay`; parameter: the key ids as a JSON array). */
export const KEY_WEBHOOKS = `select id, webhook_url, signing_secret_enc, previous_signing_secret_enc, previous_signing_secret_expires_at
  from api_keys where id in (select value from json_each(?))`;
export const PAYLOAD_OF = `select ${PAYLOAD} as payload, status, url from webhook_deliveries where id = ?`;
export const STATE_OF = `select status, url from webhook_deliveries where id = ?`;
export const GET_DELIVERY = `select ${DELIVERY_COLUMNS} from webhook_deliveries where id = ? and key_id = ?`;
export const GET_DELIVERY_SUMMARY = `select ${SUMMARY_COLUMNS} from webhook_deliveries where id = ? and key_id = ?`;
export const GET_ATTEMPTS = `select * from webhook_attempts where delivery_id = ? order by attempt asc`;

// A redeliver clears the lease: an attempt in flight then records without moving the row on (see AttemptRecord).
export const REDELIVER = `update webhook_deliveries set status = 'pending', next_attempt_at = ?, updated_at = ?, url = coalesce(?, url),
  lease_until = null, leased_by = null where id = ? and key_id = ? returning ${SUMMARY_COLUMNS}`;

/**
 * The newest matching deliveries of one key, up to a limit, after `cursor` when given: a SELECT of their ids and
 * its parameters. Only the filter's own terms are in its text (a plain `status = ?`, a time bound only when
 * given), so the planner sees what it may search (`status = coalesce(?, status)` or bounds of 0 and
 * MAX_SAFE_INTEGER would make it read every delivery of the key). The same filter serves the count and the update,
 * so a dry run counts exactly what a redelivery would take.
 */
function matchingQuery(keyId: string, filter: RedeliveryFilter, cursor: RedeliveryCursor | undefined, limit: number, ordered = true): [string, unknown[]] {
  // A count selects created_at, a column of the index it searches (id is not).
  let text = `select ${ordered ? 'id' : 'created_at'} from webhook_deliveries where key_id = ?`;
  const params: unknown[] = [keyId];
  if (filter.status !== undefined) {
    text += ' and status = ?';
    params.push(filter.status);
  }
  if (filter.since !== undefined) {
    text += ' and created_at >= ?';
    params.push(filter.since);
  }
  if (filter.until !== undefined) {
    text += ' and created_at < ?';
    params.push(filter.until);
  }
  if (filter.requestId !== undefined) {
    text += ' and request_id = ?';
    params.push(filter.requestId);
  }
  if (filter.lastStatusCode !== undefined) {
    text += ' and last_status_code between ? and ?';
    params.push(filter.lastStatusCode.min, filter.lastStatusCode.max);
  }
  if (cursor !== undefined) {
    text += ' and created_at <= ? and (created_at < ? or id < ?)';
    params.push(cursor.createdAt, cursor.createdAt, cursor.id);
  }
  return [`${text}${ordered ? ' order by created_at desc, id desc' : ''} limit ?`, [...params, limit]];
}

/**
 * How many deliveries a redelivery with this filter would take: text and parameters. Unordered: the newest
 * `limit` are as many as any `limit`, and the count then reads the index alone (ordered, it fetched every
 * matching row for its id).
 */
export function countMatchingQuery(keyId: string, filter: RedeliveryFilter): [string, unknown[]] {
  const [text, params] = matchingQuery(keyId, filter, undefined, filter.limit, false);
  return [`select count(*) as n from (${text}) matching`, params];
}

/**
 * Deliveries a bulk redelivery takes at a time, each batch one statement with a turn of the event loop after it.
 * At 1 M deliveries a key's failed rows lie scattered through the table: 20,000 in one statement held SQLite's
 * event loop, every other request, for 1.6 s, about 80 ms a thousand (bench/delivery-store.mjs); the API's
 * 1,000 a call (REDELIVERY_MAX) go in four.
 */
export const REDELIVER_BATCH = 250;

/**
 * One batch of a bulk redelivery: the next `size` matching rows after the previous batch's last (by created_at,
 * id, newest first), made due now (`url` when the key's URL changed); returns their (created_at, id), whose
 * oldest is the next batch's cursor. The status is checked again on the row itself: on Postgres a row another
 * redelivery changed meanwhile is re-read after its lock and left alone, so two concurrent redeliveries never
 * take one row twice.
 */
export function redeliverBatchQuery(
  keyId: string,
  filter: RedeliveryFilter,
  now: number,
  url: string | null,
  cursor: RedeliveryCursor | undefined,
  size: number,
  options: { lockInIdOrder?: boolean } = {},
): [string, unknown[]] {
  const [text, params] = matchingQuery(keyId, filter, cursor, size);
  const recheck = filter.status === undefined ? '' : ' and status = ?';
  const set = `update webhook_deliveries set status = 'pending', next_attempt_at = ?, updated_at = ?, url = coalesce(?, url),
  lease_until = null, leased_by = null`;
  const statusParams = filter.status === undefined ? [] : [filter.status];
  if (!options.lockInIdOrder) return [`${set} where id in (${text})${recheck} returning created_at, id`, [now, now, url, ...params, ...statusParams]];
  // Postgres: the batch's rows are locked in id order (the index's), not in the order the matching scan meets them, so
  // that two redeliveries over the same rows take them in the same order instead of each holding one the other waits for.
  return [
    `with batch as materialized (${text}), locked as materialized (select id from webhook_deliveries where id in (select id from batch) order by id for update)
  ${set} where id in (select id from locked)${recheck} returning created_at, id`,
    [...params, now, now, url, ...statusParams],
  ];
}

/** Where a bulk redelivery goes on from: the oldest row of the last batch. */
export interface RedeliveryCursor {
  createdAt: number;
  id: string;
}

/** The oldest of a batch's returned rows (Postgres gives bigints as strings), or undefined for none. */
export function oldestOf(rows: ReadonlyArray<{ created_at: number | string; id: string }>): RedeliveryCursor | undefined {
  let oldest: RedeliveryCursor | undefined;
  for (const row of rows) {
    const createdAt = Number(row.created_at);
    if (oldest === undefined || createdAt < oldest.createdAt || (createdAt === oldest.createdAt && row.id < oldest.id)) oldest = { createdAt, id: row.id };
  }
  return oldest;
}

/**
 * A key's deliveries that failed and have attempts left: how many, and the next of those attempts. Its WHERE is
 * the predicate of the partial index deliveries_retrying_idx (key_id, status, next_attempt_at, attempts), which
 * answers it alone. `table` is SQLite's `webhook_deliveries indexed by deliveries_retrying_idx`: its planner
 * otherwise took (key_id, status, created_at) whenever the statistics gave a key more retrying rows than it has
 * deliveries of one status on average, and read every pending row of the key from the table.
 */
export function retryingSql(table = 'webhook_deliveries'): string {
  return `select count(*) as n, min(next_attempt_at) as next from ${table}
  where status = 'pending' and key_id = ? and attempts > 0`;
}
export const RETRYING = retryingSql();
export const RETRYING_SQLITE = retryingSql('webhook_deliveries indexed by deliveries_retrying_idx');
/**
 * RETRYING for every key of a user at once (the key list, asked again every few seconds while it is open): each
 * of the user's keys a range of deliveries_retrying_idx, read from the index alone. One pass over every pending row
 * by user_id read each row instead: 100,000 waiting after an outage held SQLite's loop 75–90 ms per ask.
 * `table` as for retryingSql.
 */
export function retryingOfUserSql(table = 'webhook_deliveries'): string {
  return `select key_id, count(*) as n, min(next_attempt_at) as next from ${table}
  where status = 'pending' and attempts > 0 and key_id in (select id from api_keys where user_id = ?) group by key_id`;
}
export const RETRYING_OF_USER = retryingOfUserSql();
export const RETRYING_OF_USER_SQLITE = retryingOfUserSql('webhook_deliveries indexed by deliveries_retrying_idx');

/** The SET of a cancel (parameters: reason, now). */
export const CANCELLED = `set status = 'cancelled', next_attempt_at = null, lease_until = null, leased_by = null, last_error = ?, updated_at = ?`;
export const CANCEL = `update webhook_deliveries ${CANCELLED} where id = ? and key_id = ? and status = 'pending' returning ${SUMMARY_COLUMNS}`;
export const CANCEL_PENDING = `update webhook_deliveries ${CANCELLED} where key_id = ? and status = 'pending'`;

export const RETARGET_PENDING = `update webhook_deliveries set url = ?, updated_at = ? where key_id = ? and status = 'pending'`;

/** `sql` with Postgres's numbered parameters (no `?` appears in this file's SQL except as a parameter). */
export function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/**
 * What an attempt sets on its delivery — status, next attempt, status code, error, attempted at, delivered
 * at — in the column order of both stores' record statements.
 */
export function attemptUpdate({ result, next, leasedBy }: AttemptRecord): unknown[] {
  return [
    leasedBy ?? '',
    next.status,
    next.status === 'pending' ? next.nextAttemptAt : null,
    result.statusCode,
    result.error,
    result.attemptedAt,
    next.status === 'delivered' ? result.attemptedAt : null,
  ];
}

/** The attempt rows of `records` for `insertAttemptsSql`; `numbers[i]` is the attempt number of `records[i]`. */
export function attemptParams(records: readonly AttemptRecord[], numbers: readonly number[]): unknown[] {
  const params: unknown[] = [];
  for (const [i, { deliveryId, result, attemptId }] of records.entries()) {
    params.push(attemptId ?? newAttemptId(), deliveryId, numbers[i], result.attemptedAt, result.statusCode, Math.max(0, Math.round(result.durationMs)), result.outcome, result.error, result.responseBody, result.requestHeaders ?? null);
  }
  return params;
}

/** The parameters of one row of `insertDeliveriesSql` with the same `columns`. */
export function insertParams(d: NewDelivery, columns: readonly NewDeliveryColumn[] = NEW_DELIVERY): unknown[] {
  const params: unknown[] = [];
  for (const c of columns) if (c.param) params.push(c.param(d));
  return params;
}

export interface BacklogRow {
  pending: number | null;
  due: number | null;
  failed: number | null;
}

export function toBacklog(row: BacklogRow | undefined): Backlog {
  return { pending: Number(row?.pending ?? 0), due: Number(row?.due ?? 0), failed: Number(row?.failed ?? 0) };
}

/** The earlier of two optional times. */
export function earliest(a: number | null, b: number | null): number | undefined {
  if (a === null) return b ?? undefined;
  return b === null ? a : Math.min(a, b);
}

/** A page of `limit` rows out of `limit + 1` read, and whether there was more. */
export function page(rows: DeliverySummaryRow[], limit: number): { rows: DeliverySummaryRow[]; hasMore: boolean } {
  return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
}

/** RETRYING's row: Postgres gives counts and bigints as strings. */
export interface RetryingRow {
  n: number | string;
  next: number | string | null;
}

/** RETRYING_OF_USER's rows by key; a key with none is not retrying. */
export function toRetryingByKey(rows: Array<RetryingRow & { key_id: string }>): Map<string, Retrying> {
  return new Map(rows.map((row) => [row.key_id, toRetrying(row)]));
}

export function toRetrying(row: RetryingRow | undefined): Retrying {
  return { deliveries: Number(row?.n ?? 0), nextAttemptAt: row?.next === null || row?.next === undefined ? null : Number(row.next) };
}
