import { pooledRandom } from '../crypto/random-pool.js';
import type { WebhookAttemptsTable, WebhookDeliveriesTable } from './schema.js';

export type DeliveryRow = WebhookDeliveriesTable;
export type AttemptRow = WebhookAttemptsTable;
export type DeliveryRowStatus = DeliveryRow['status'];

/**
 * A delivery as a page of the list holds it: every column but the payload, of which only its first
 * PAYLOAD_HEAD_CHARS characters (where the request's `status_code` is) are read.
 */
export type DeliverySummaryRow = Omit<DeliveryRow, 'payload'> & { payload_head: string };

/** What a claim leaves out: receivers (URL origins) and users at their share of the worker. */
export interface LeftOut {
  origins: readonly string[];
  users: readonly string[];
}

export const NOTHING_LEFT_OUT: LeftOut = { origins: [], users: [] };

/** A row leased to one worker until `until`: nobody else claims it meanwhile. */
export interface Lease {
  until: number;
  by: string;
}

/**
 * A delivery as a worker sends it: its row and the sealed signing secret of its key (null: unsigned), read
 * with the claim or taken from the key the request was made with. A claim returns no payload: the worker reads
 * each one just before its send (`payloadOf`), so a claim of a receiver's share of rows never holds all their
 * payloads at once (prompts of megabytes: on SQLite one statement reading them all would hold the event loop).
 */
export interface ClaimedDelivery extends Omit<DeliveryRow, 'payload'> {
  /** The exact payload when the worker already holds it (a new delivery handed over, a test send); else read before the send. */
  payload?: string;
  /** The payload's length in bytes, as a claim returns it (read from the stored length, not the payload). */
  payload_bytes?: number;
  signing_secret_enc: string | null;
  /** The secret a rotation replaced, and until when it still signs (epoch ms). */
  previous_signing_secret_enc?: string | null;
  previous_signing_secret_expires_at?: number | string | null;
}

/**
 * A delivery's payload as its send reads it, with the status and URL it has in the same read: a URL change or a
 * cancellation that committed after the claim (the dashboard, `svc-server keys update`, another instance) is
 * seen there, and the payload is not sent to a receiver the user has just replaced.
 */
export type PayloadToSend = Pick<DeliveryRow, 'payload' | 'status' | 'url'>;

/** A delivery with its payload in hand, as an attempt sends it. */
export type SendableDelivery = ClaimedDelivery & { payload: string };

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
  lease?: Lease;
  /**
   * The key's sealed signing secret as the request saw it (an audit delivery's: as the key has it at the insert,
   * `deliveriesAsKeysSay`). Not stored: it goes with the row to the worker.
   */
  signingSecretEnc?: string | null;
  /** The key's rotated-out secret and its expiry, as the request saw them. Not stored either. */
  previousSigningSecretEnc?: string | null;
  previousSigningSecretExpiresAt?: number | null;
}

/**
 * An audit delivery, whose payload carries its key's next `sequence` (1, 2, 3, … per key): the store calls
 * `serialise` inside the insert transaction with the number taken there, so a rolled-back insert takes no
 * number and concurrent writers (instances on one Postgres database) never share one.
 */
export interface SequencedDelivery extends Omit<NewDelivery, 'payload'> {
  /** The exact payload bytes with this sequence number; called once. */
  serialise(sequence: number): string;
  /**
   * Recorded at most once: left out (taking no sequence number) when it is stored already, under its id or another
   * that is the same delivery (`onceSpan`), as when two instances record the audit of one background response.
   */
  once?: boolean;
}

/** A key's webhook settings as they are when its audit deliveries are inserted (`KEY_WEBHOOKS`). */
export interface KeyWebhook {
  id: string;
  webhook_url: string | null;
  signing_secret_enc: string | null;
  previous_signing_secret_enc: string | null;
  previous_signing_secret_expires_at: number | string | null;
}

/**
 * Audit deliveries as their keys say now, inside the insert's transaction: a request carries its key as it was when
 * the request arrived, and a long one (a stream of minutes, a background response) may end after the user changed
 * or removed the key's webhook URL or rotated its secret (the dashboard's Save, `svc-server keys update`). Its
 * delivery goes to the URL the key has now, signed with its secrets now, and none is made when the key has no URL
 * any more: the pending rows that change retargeted or cancelled did not include this one, not yet inserted. A key
 * not found keeps what its request saw.
 */
export function deliveriesAsKeysSay<D extends SequencedDelivery>(deliveries: readonly D[], keys: readonly KeyWebhook[]): D[] {
  if (keys.length === 0) return [...deliveries];
  const byId = new Map(keys.map((k) => [k.id, k]));
  const now: D[] = [];
  for (const d of deliveries) {
    const key = byId.get(d.keyId);
    if (key === undefined) now.push(d);
    else if (key.webhook_url)
      now.push({
        ...d,
        url: key.webhook_url,
        signingSecretEnc: key.signing_secret_enc,
        previousSigningSecretEnc: key.previous_signing_secret_enc,
        previousSigningSecretExpiresAt: key.previous_signing_secret_expires_at == null ? null : Number(key.previous_signing_secret_expires_at),
      });
  }
  return now;
}

/** How many of `deliveries` each key has: each key's block of sequence numbers to take. */
export function countByKey(deliveries: readonly SequencedDelivery[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const d of deliveries) counts.set(d.keyId, (counts.get(d.keyId) ?? 0) + 1);
  return counts;
}

/**
 * `deliveries` serialised with their numbers, in order within each key's block: `last` is the last number of
 * each key's block of `counts` numbers.
 */
export function numberDeliveries(deliveries: readonly SequencedDelivery[], counts: ReadonlyMap<string, number>, last: ReadonlyMap<string, number>): NewDelivery[] {
  const next = new Map<string, number>();
  for (const [keyId, n] of counts) next.set(keyId, last.get(keyId)! - n + 1);
  return deliveries.map(({ serialise, ...d }) => {
    const sequence = next.get(d.keyId)!;
    next.set(d.keyId, sequence + 1);
    return { ...d, payload: serialise(sequence) };
  });
}

export interface AttemptResult {
  attemptedAt: number;
  statusCode: number | null;
  durationMs: number;
  outcome: 'success' | 'failure';
  error: string | null;
  responseBody: string | null;
  /** The headers sent, as a JSON object (null when the attempt was not prepared). */
  requestHeaders?: string | null;
}

/** What the delivery becomes after an attempt. */
export type AttemptNext = { status: 'delivered' } | { status: 'failed' } | { status: 'pending'; nextAttemptAt: number };

/** One attempt to store: its delivery, what it did, and what the delivery becomes. */
export interface AttemptRecord {
  deliveryId: string;
  result: AttemptResult;
  next: AttemptNext;
  /**
   * `leased_by` when the attempt was made. The attempt moves the delivery on (status, next attempt, lease) only
   * while the row is still leased so: a redeliver or cancel during the attempt cleared the lease, and a lease
   * that lapsed belongs to another worker's attempt; either way the newer intent stands. The attempt is logged
   * and counted all the same.
   */
  leasedBy: string | null;
  /**
   * The attempt row's id (`wha_…`), made once per attempt so that a record sent again after a lost connection can
   * be told apart from one whose commit landed (see AttemptLog); made at insert when absent.
   */
  attemptId?: string;
}

/** Which deliveries of a key a list shows. */
export interface ListFilter {
  status?: DeliveryRowStatus;
  /** Only this request's deliveries. */
  requestId?: string;
  /** Created at or after (ms). */
  since?: number;
  /** Created before (ms). */
  until?: number;
  /** The last attempt's HTTP status within this range (both ends included). */
  lastStatusCode?: { min: number; max: number };
}

export interface ListOptions extends ListFilter {
  limit: number;
  /** A delivery id: return deliveries older than it (newest first). */
  before?: string;
}

/**
 * Which deliveries of a key a bulk redelivery takes: those a list with the same filter shows, newest first, at
 * most `limit`.
 */
export interface RedeliveryFilter extends ListFilter {
  limit: number;
}

export interface Retrying {
  deliveries: number;
  nextAttemptAt: number | null;
}

export interface Backlog {
  /** Not yet delivered nor given up on. */
  pending: number;
  /** Pending and due now (includes ones leased and in flight). */
  due: number;
  failed: number;
}

/**
 * The webhook outbox: deliveries and their attempts. A claim is a lease: a worker that dies mid-attempt loses
 * it when it expires and the row becomes due again (at-least-once). Two implementations, run by one test
 * suite: SQLite (`SqliteOutboxStore`, synchronous prepared statements on the embedded connection) and Postgres
 * (`PostgresOutboxStore`, `FOR UPDATE SKIP LOCKED` so several instances can run workers on one database).
 *
 * @example
 * const [row] = await store.deliveries.claimDue(Date.now(), 16, 60_000, 'worker-1');
 */
export interface OutboxStore {
  // The worker's side: new rows, claims, attempts, leases.

  insert(delivery: NewDelivery): Promise<void>;
  /** Inserts several deliveries in one transaction. */
  insertMany(deliveries: NewDelivery[]): Promise<void>;
  /**
   * Inserts audit deliveries in one transaction, each numbered with its key's next sequence number (in the
   * order given), and returns them with their payloads, in that order.
   */
  insertSequenced(deliveries: readonly SequencedDelivery[]): Promise<NewDelivery[]>;
  /**
   * Inserts a test send's row (leased to `TEST_SEND_LEASE`) unless its key already has `max` test sends in
   * flight, counted over every process and instance; one key's checks take turns. Returns how many were in
   * flight before it, and whether it was inserted.
   */
  insertTestSend(delivery: NewDelivery, max: number): Promise<{ inFlight: number; inserted: boolean }>;
  /**
   * Leases up to `limit` due rows (pending, next attempt reached, no live lease) to `workerId` for `leaseMs`,
   * oldest due first. Due is by `now`; the lease by the store's lease clock: `now` on SQLite (one host), the
   * database's own clock on Postgres, where instances' clocks may disagree (see `LeaseClock`). Returns them with their
   * key's sealed secret. Rows whose URL is under one of `leftOut.origins`, or of one of `leftOut.users` (receivers and users with no room at this
   * worker), are left alone.
   */
  claimDue(now: number, limit: number, leaseMs: number, workerId: string, leftOut?: LeftOut): Promise<ClaimedDelivery[]>;
  /**
   * Stores attempts and moves their deliveries on (delivered / failed / pending with its next time), releasing
   * the leases, in one transaction; a delivery twice in the batch counts twice. Returns the attempt numbers.
   * A delivery cancelled while its attempt was in flight stays cancelled, with its reason.
   */
  recordAttempts(batch: readonly AttemptRecord[]): Promise<number[]>;
  /**
   * Ends every lease, or only those of worker `leasedBy` (a process known to be dead); pending rows become
   * due by their next attempt time. Returns how many were leased.
   */
  releaseLeases(now: number, leasedBy?: string): Promise<number>;
  /**
   * Gives rows leased by `workerId` back to the outbox unattempted (their receiver had no room): due as they
   * were, claimable by the next claim that does not leave their receiver out.
   */
  releaseClaims(ids: readonly string[], workerId: string, now: number): Promise<void>;
  /**
   * When the worker should look again: the earliest time after `now` at which a pending row becomes
   * claimable — its next attempt time, or the end of its lease (so a crashed instance's claims are retried by
   * the others as soon as their lease lapses, not at the next idle poll).
   */
  nextDueAfter(now: number): Promise<number | undefined>;
  /** Deletes deliveries (and their attempts) created before `ts`, except pending ones. Returns how many. */
  purgeOlderThan(ts: number): Promise<number>;
  /** Backlog counts for metrics. */
  backlog(now: number): Promise<Backlog>;

  /**
   * A delivery's whole payload, as its send reads it just before sending (claims return none), with its status
   * and URL as they are now (see `PayloadToSend`); undefined when the delivery no longer exists.
   */
  payloadOf(id: string): Promise<PayloadToSend | undefined>;
  /**
   * A delivery's status and URL, without its payload (whether an insert whose answer was lost had landed);
   * undefined when it no longer exists.
   */
  stateOf(id: string): Promise<Pick<DeliveryRow, 'status' | 'url'> | undefined>;

  // The deliveries API and the dashboard's side: one key's deliveries.

  /** Any delivery by id, its payload whole. */
  byId(id: string): Promise<DeliveryRow | undefined>;
  /** Whether a delivery recorded `once` with this id is stored, under it or another of its `onceSpan`. */
  recordedOnce(id: string): Promise<boolean>;
  /** Deliveries of one key, newest first; `before` is the id of the last delivery of the previous page. */
  list(keyId: string, options: ListOptions): Promise<{ rows: DeliverySummaryRow[]; hasMore: boolean }>;
  /** One delivery of one key with its attempts (oldest first); undefined for another key's id. */
  get(keyId: string, id: string): Promise<{ delivery: DeliveryRow; attempts: AttemptRow[] } | undefined>;
  /** `get` without the payload: what changes as a delivery is attempted. */
  progress(keyId: string, id: string): Promise<{ delivery: DeliverySummaryRow; attempts: AttemptRow[] } | undefined>;
  /**
   * Makes a delivery of this key due now again (same id, same bytes; `url` when the key's URL changed since).
   * A delivery leased by a worker keeps its lease: it becomes due again once that attempt is recorded or the
   * lease lapses. Returns the row as a page holds it, or undefined when the key has no such delivery.
   */
  redeliver(keyId: string, id: string, now: number, url?: string): Promise<DeliverySummaryRow | undefined>;
  /** The deliveries of `keyId` that failed and will be tried again: how many, and when the next attempt is. */
  retrying(keyId: string): Promise<Retrying>;
  /** `retrying` of every key of `userId` that has retrying deliveries, in one query. */
  retryingOfUser(userId: string): Promise<Map<string, Retrying>>;
  /** How many deliveries of `keyId` a `redeliverMatching` with this filter would take. */
  countMatching(keyId: string, filter: RedeliveryFilter): Promise<number>;
  /**
   * Makes the newest `filter.limit` deliveries of `keyId` that match due now again, as `redeliver` does one
   * (`url` when the key's URL changed since). Returns how many.
   */
  redeliverMatching(keyId: string, filter: RedeliveryFilter, now: number, url?: string): Promise<number>;
  /**
   * Cancels one pending delivery of `keyId`: status `cancelled`, `reason` as its last error, no further
   * attempt. Returns the row as a page holds it, or undefined when the key has no pending delivery with that id.
   */
  cancel(keyId: string, id: string, now: number, reason: string): Promise<DeliverySummaryRow | undefined>;
  /** Cancels every pending delivery of `keyId` (its webhook URL was cleared). Returns how many. */
  cancelPending(keyId: string, now: number, reason: string): Promise<number>;
  /** Points every pending delivery of `keyId` at `url` (the key's new webhook URL): their next attempts go there. */
  retargetPending(keyId: string, url: string, now: number): Promise<number>;
}

/** The LIKE pattern of every URL under `origin` (`https://h:8443` → `https://h:8443/%`), wildcards escaped. */
export function originPattern(origin: string): string {
  return `${origin.replace(/[\\%_]/g, '\\$&')}/%`;
}

/**
 * `prefix` + 32 hex digits, UUIDv7's layout: the first 12 are the millisecond time, the other 20 random (80
 * bits). Time-ordered keys land on the last page of their indexes, which a batch of inserts then shares;
 * random keys dirty a page of each index per row.
 */
function timeOrderedId(prefix: string): string {
  return `${prefix}${Date.now().toString(16).padStart(12, '0').slice(-12)}${pooledRandom(10, 'hex')}`;
}

export function newAttemptId(): string {
  return timeOrderedId('wha_');
}

/** What a delivery recorded `once` is the same delivery as (`onceSpan`). */
export interface OnceSpan {
  id: string;
  /** Ids from `from` (inclusive) to `to` (exclusive) that end with `tail`. */
  from: string;
  to: string;
  tail: string;
  /** Locked by whoever records it: `id`, and the id of its second (its time's milliseconds 0), which every recorder of it locks. */
  lockIds: string[];
}

const TIME_ORDERED = /^([a-z]+_)([0-9a-f]{12})([0-9a-f]{20})$/;

/**
 * The stored deliveries a delivery recorded `once` is the same as: one with its id, or, for a time-ordered id, one with
 * its last 20 hex digits whose time (the 12 before them) is in the same second. A background response's one audit
 * (`backgroundDeliveryId`) carries its POST's arrival to the millisecond where that is known, as every version of svc
 * makes it, and to the second only where the millisecond was lost with its stored audit (`rebuiltStoredEnd`): the one
 * audit either way, stored once.
 *
 * @example
 * onceSpan('whd_01a22c53827b004fb2d2deefa504e8cd'); // { from: 'whd_01a22c538200', to: 'whd_01a22c5385e8', tail: '004fb2d2deefa504e8cd', … }
 */
export function onceSpan(id: string): OnceSpan {
  const parts = TIME_ORDERED.exec(id);
  if (!parts) return { id, from: id, to: id, tail: id.slice(-20), lockIds: [id] };
  const [, prefix, time, tail] = parts as unknown as [string, string, string, string];
  const second = Math.floor(Number.parseInt(time, 16) / 1000) * 1000;
  const at = (ms: number) => `${prefix}${ms.toString(16).padStart(12, '0').slice(-12)}`;
  const ofSecond = `${at(second)}${tail}`;
  return { id, from: at(second), to: at(second + 1000), tail, lockIds: ofSecond === id ? [id] : [ofSecond, id] };
}

/** A fresh delivery id: `whd_` + 32 hex characters. */
export function newDeliveryId(): string {
  return timeOrderedId('whd_');
}

/** The row a new delivery is stored as, with its key's secret and its payload — with its lease, what a worker is handed. */
export function newDeliveryRow(d: NewDelivery): SendableDelivery {
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
    signing_secret_enc: d.signingSecretEnc ?? null,
    previous_signing_secret_enc: d.previousSigningSecretEnc ?? null,
    previous_signing_secret_expires_at: d.previousSigningSecretExpiresAt ?? null,
  };
}

/** Claims come back in no particular order (RETURNING): oldest due first. */
export function byDue(a: Pick<DeliveryRow, 'next_attempt_at' | 'created_at'>, b: Pick<DeliveryRow, 'next_attempt_at' | 'created_at'>): number {
  return (a.next_attempt_at ?? 0) - (b.next_attempt_at ?? 0) || a.created_at - b.created_at;
}

export function missingDelivery(deliveryId: string): Error {
  return new Error(`delivery ${deliveryId} does not exist`);
}
