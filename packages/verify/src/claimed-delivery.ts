import type { Deduper } from './deduper.js';

/** What an adapter tells about a delivery whose id it claimed. */
export interface ClaimedDelivery {
  /**
   * The route answered (`delivered`: with a 2xx) or failed. Before a drop: a 2xx marks the id processed, anything
   * else releases it. After a drop (the id released), a 2xx records it as processed again, unless a retry of the
   * delivery claimed it meanwhile. Rejects when the store does (a release before any drop).
   */
  settled(delivered: boolean): Promise<void>;
  /**
   * The connection closed before the route answered (svc's timeout, a route that never answers): the id is
   * released, so svc's retry is processed instead of being answered 409 until the id's TTL. Ignored once settled.
   */
  dropped(): void;
}

/**
 * Follows one claimed delivery id to its end for the adapters (Express, Fastify, Fetch), so they all release
 * and complete it alike.
 *
 * @example
 * const claim = claimedDelivery(dedupe, id);
 * res.on('close', claim.dropped);
 * // when the route answers:
 * await claim.settled(res.statusCode >= 200 && res.statusCode < 300);
 */
export function claimedDelivery(dedupe: Deduper, id: string): ClaimedDelivery {
  let state: 'open' | 'dropped' | 'settled' = 'open';
  let released: Promise<void> = Promise.resolve();
  return {
    async settled(ok) {
      const wasDropped = state === 'dropped';
      state = 'settled';
      if (!wasDropped) {
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
      // Nothing can report a failed release here (no answer is coming); the id then stays claimed until its TTL.
      released = dedupe.release(id).catch(() => {});
    },
  };
}
