import { header, standardHeader, type WebhookHeaders } from './standard-webhooks.js';

/**
 * Where a deduper remembers the delivery ids it has seen: an in-memory LRU by default. Either method may
 * return a promise. `setIfAbsent` must be atomic (Redis: `SET <prefix><id> 1 NX EX <ttlSeconds>`), so that
 * receiver processes sharing the store process a delivery once between them.
 */
export interface DedupeStore {
  /** Records `id` for `ttlSeconds` unless it is there already: true when it was absent (a first delivery). */
  setIfAbsent(id: string, ttlSeconds: number): boolean | Promise<boolean>;
  /** Forgets `id` (the delivery failed), so svc's retry of it is processed. Redis: `DEL <prefix><id>`. */
  delete(id: string): void | Promise<void>;
}

export interface DeduperOptions {
  /** Where the ids live; default: in memory (`maxEntries` of them, least recently seen dropped), lost on restart. */
  store?: DedupeStore;
  /**
   * How long an id is remembered, in seconds. Default 259,200 (3 days): longer than svc's default retry
   * schedule (`SVC_WEBHOOK_RETRY_SCHEDULE`, about 28 h of attempts); a manual redelivery after it is processed again.
   */
  ttlSeconds?: number;
  /** Most ids the in-memory store keeps (ignored with `store`). Default 10,000. */
  maxEntries?: number;
  /** The clock of the in-memory store, in epoch milliseconds; for tests. Default `Date.now`. */
  now?: () => number;
}

export interface Deduper {
  /** Claims a delivery id: true the first time (process the delivery), false for a duplicate within the TTL. */
  claim(id: string): Promise<boolean>;
  /** Releases a claimed id because processing it failed: the next delivery with it is processed. */
  release(id: string): Promise<void>;
  /** Marks a claimed id as processed: from now on a duplicate of it is answered as done. */
  complete(id: string): void;
  /**
   * Whether this deduper claimed `id` and its processing has neither completed nor been released: a duplicate
   * arriving meanwhile must not be answered as done (the first copy may still fail), but asked to come back.
   */
  processing(id: string): boolean;
}

/**
 * The answer to a delivery whose id is already claimed: 200 with `svc-duplicate: true` once it was processed;
 * 409 with `retry-after` while the first copy is still being handled here, so svc tries again later (and the
 * retry is processed if that first copy fails, or answered as a duplicate once it succeeded).
 */
export function duplicateAnswer(dedupe: Deduper, id: string): { status: number; headers: Record<string, string>; body: Record<string, boolean> } {
  if (dedupe.processing(id)) return { status: 409, headers: { 'retry-after': String(IN_FLIGHT_RETRY_SECONDS) }, body: { in_progress: true } };
  return { status: 200, headers: { [DUPLICATE_HEADER]: 'true' }, body: { duplicate: true } };
}

const IN_FLIGHT_RETRY_SECONDS = 30;

/** The header a receiver answers a duplicate delivery with (2xx, nothing processed); `svc-cli` checks it. */
export const DUPLICATE_HEADER = 'svc-duplicate';

const DEFAULT_TTL_SECONDS = 259_200;
const DEFAULT_MAX_ENTRIES = 10_000;

function isPositiveInteger(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 1;
}

/** An in-memory LRU of ids, each with its expiry; a `Map` iterates in insertion order, oldest first. */
function memoryStore(maxEntries: number, now: () => number): DedupeStore {
  const expiries = new Map<string, number>();
  return {
    setIfAbsent(id, ttlSeconds) {
      const expiry = expiries.get(id);
      expiries.delete(id);
      if (expiry !== undefined && expiry > now()) {
        expiries.set(id, expiry); // most recently seen: last to be dropped
        return false;
      }
      expiries.set(id, now() + ttlSeconds * 1000);
      if (expiries.size > maxEntries) expiries.delete(expiries.keys().next().value as string);
      return true;
    },
    delete: (id) => void expiries.delete(id),
  };
}

/**
 * De-duplicates deliveries on their id (`webhook-id`, equal to `X-Svc-Delivery`): svc delivers at least
 * once, so a retry whose first attempt was processed but not acknowledged in time, or a redelivery, arrives
 * again with the same id. Pass it to an adapter (`dedupe` option) or claim ids yourself. Two deliveries with
 * the same id at once: one is processed.
 *
 * @example
 * const dedupe = createDeduper();
 * app.post('/webhooks/svc', verifyMiddleware({ secret, dedupe }), handler); // duplicates: 200, svc-duplicate: true
 *
 * // by hand, after verifying:
 * if (!(await dedupe.claim(id))) return; // already processed
 * try { await handle(event); dedupe.complete(id); } catch (err) { await dedupe.release(id); throw err; }
 */
export function createDeduper(options: DeduperOptions = {}): Deduper {
  const { ttlSeconds = DEFAULT_TTL_SECONDS, maxEntries = DEFAULT_MAX_ENTRIES, now = Date.now } = options;
  if (!isPositiveInteger(ttlSeconds)) throw new TypeError('[@svc/verify] ttlSeconds must be a positive whole number of seconds.');
  if (!isPositiveInteger(maxEntries)) throw new TypeError('[@svc/verify] maxEntries must be a positive whole number.');
  const { store = memoryStore(maxEntries, now) } = options;
  if (typeof store?.setIfAbsent !== 'function' || typeof store.delete !== 'function') {
    throw new TypeError('[@svc/verify] store must have setIfAbsent(id, ttlSeconds) and delete(id).');
  }
  // Ids whose claim is waiting for the store: a duplicate arriving meanwhile in this process is one even if
  // the store's check-and-set is not atomic.
  const pending = new Set<string>();
  // Ids claimed here whose processing has not ended (completed or released).
  const inFlight = new Set<string>();
  return {
    async claim(id) {
      if (typeof id !== 'string' || id === '') throw new TypeError('[@svc/verify] id must be a non-empty string.');
      if (pending.has(id)) return false;
      pending.add(id);
      try {
        const first = await store.setIfAbsent(id, ttlSeconds);
        if (first) inFlight.add(id);
        return first;
      } finally {
        pending.delete(id);
      }
    },
    async release(id) {
      inFlight.delete(id);
      await store.delete(id);
    },
    complete(id) {
      inFlight.delete(id);
    },
    processing: (id) => pending.has(id) || inFlight.has(id),
  };
}

/** The delivery id of a request: `webhook-id` (or Svix's `svix-id`), else `X-Svc-Delivery`; undefined when it carries none. */
export function deliveryId(headers: WebhookHeaders): string | undefined {
  return standardHeader(headers, 'id') || header(headers, 'x-svc-delivery') || undefined;
}

/** Whether svc counts a response status as delivered (any 2xx); otherwise the claimed id is released. */
export function delivered(status: number): boolean {
  return status >= 200 && status < 300;
}

/** Throws a TypeError unless `dedupe` is absent or a deduper (misuse found once, at creation). */
export function assertDeduper(dedupe: unknown): asserts dedupe is Deduper | undefined {
  const d = dedupe as Partial<Deduper> | undefined;
  if (d !== undefined && (typeof d?.claim !== 'function' || typeof d.release !== 'function' || typeof d.complete !== 'function' || typeof d.processing !== 'function')) {
    throw new TypeError('[@svc/verify] dedupe must be a deduper from createDeduper().');
  }
}
