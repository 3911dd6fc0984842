import type { Deduper } from './deduper.js';

/**
 * How long a delivery whose connection closed before the route answered keeps its id claimed, in milliseconds:
 * longer than svc's first retry (5 s after its 10 s timeout), so a route that is merely slow still runs once.
 */
export const DEFAULT_DROP_GRACE_MS = 60_000;

// setTimeout fires at once (after a warning) for a delay above this; a longer grace outlives any sensible TTL anyway.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Throws a TypeError unless `ms` is a positive finite number of milliseconds (misuse found once, at creation). */
export function assertDropGraceMs(ms: unknown): asserts ms is number {
  if (!(Number.isFinite(ms) && (ms as number) > 0)) throw new TypeError('[@svc/verify] dropGraceMs must be a positive number of milliseconds.');
}

/** What an adapter tells about a delivery whose id it claimed. */
export interface ClaimedDelivery {
  /**
   * The route answered (`delivered`: with a 2xx) or failed. Before a drop, or within the grace period after one:
   * a 2xx marks the id processed, anything else releases it. After the grace period (the id released), a 2xx
   * records it as processed again, unless a retry of the delivery claimed it meanwhile. Rejects when the store
   * does (a release before the grace period ended).
   */
  settled(delivered: boolean): Promise<void>;
  /**
   * The connection closed before the route answered (svc's timeout, a route that never answers): the id stays
   * claimed for the grace period, so svc's retry meanwhile is answered 409 while a slow route finishes, then is
   * released if the route still has not answered, so a later retry is processed instead of being answered 409
   * until the id's TTL. Ignored once settled or already dropped.
   */
  dropped(): void;
}

/**
 * Follows one claimed delivery id to its end for the adapters (Express, Fastify, Fetch), so they all release
 * and complete it alike.
 *
 * @example
 * const claim = claimedDelivery(dedupe, id, DEFAULT_DROP_GRACE_MS);
 * res.on('close', claim.dropped);
 * // when the route answers:
 * await claim.settled(res.statusCode >= 200 && res.statusCode < 300);
 */
export function claimedDelivery(dedupe: Deduper, id: string, graceMs: number): ClaimedDelivery {
  let state: 'open' | 'dropped' | 'released' | 'settled' = 'open';
  let released: Promise<void> = Promise.resolve();
  let grace: ReturnType<typeof setTimeout> | undefined;
  return {
    async settled(ok) {
      const wasReleased = state === 'released';
      state = 'settled';
      clearTimeout(grace);
      if (!wasReleased) {
        if (ok) dedupe.complete(id);
        else await dedupe.release(id);
        return;
      }
      if (!ok) return;
      // The release must have reached the store first, or the claim would find the id still there.
      await released;
      if (await dedupe.claim(id)) dedupe.complete(id);
    },
    dropped() {
      if (state !== 'open') return;
      state = 'dropped';
      grace = setTimeout(() => {
        state = 'released';
        // Nothing can report a failed release here (no answer is coming); the id then stays claimed until its TTL.
        released = dedupe.release(id).catch(() => {});
      }, Math.min(graceMs, MAX_TIMER_MS));
      // A receiver shutting down need not wait for it (runtimes without unref() return a number).
      grace.unref?.();
    },
  };
}
