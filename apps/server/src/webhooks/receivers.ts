import type { ClaimedDelivery } from '../storage/outbox-store.js';

/** Distinct URLs whose origin is kept; past that the cache starts over. */
const ORIGIN_CACHE_SIZE = 1024;

/** One receiver's attempts in flight here, and the claimed rows waiting for one of its slots. */
interface Share {
  active: number;
  waiting: ClaimedDelivery[];
}

/** What becomes of a claimed row (`admit`). */
export type Admission = 'start' | 'wait' | 'give-back' | 'held';

/**
 * Each receiver's (URL origin's) share of a worker: at most `perReceiver` attempts in flight, as many rows
 * again waiting in memory for its next free slot; the rest go back to the outbox, and claims leave the
 * receiver out while it is full. A receiver that never answers holds its share, never every slot.
 *
 * @example
 * const { admission, origin } = receivers.admit(row); // 'start': the slot is taken, send it now
 */
export class Receivers {
  private readonly shares = new Map<string, Share>();
  private readonly origins = new Map<string, string>();
  /** Ids of the deliveries in flight or waiting here: a claim that returns one again (lease lapsed) is ignored. */
  private readonly held = new Set<string>();
  /** Receivers left out of a claim, or whose rows were given back: a claim is due once they have room. */
  private readonly starved = new Set<string>();

  constructor(private readonly perReceiver: number) {}

  /** The receivers at their share, marked as owed a claim once they have room: the next claim leaves them out. */
  leaveOut(): string[] {
    const full: string[] = [];
    for (const [origin, share] of this.shares) {
      if (share.active < this.perReceiver) continue;
      full.push(origin);
      this.starved.add(origin);
    }
    return full;
  }

  atShare(origin: string): boolean {
    return (this.shares.get(origin)?.active ?? 0) >= this.perReceiver;
  }

  /**
   * Places a claimed row: `start` (a slot of its receiver is taken for it), `wait` (it waits for the next
   * one), `give-back` (no room even to wait: back to the outbox, and its receiver is owed a claim), or `held`
   * (already here: ignore it).
   */
  admit(row: ClaimedDelivery): { admission: Admission; origin: string } {
    const origin = this.originOf(row.url);
    if (this.held.has(row.id)) return { admission: 'held', origin };
    let share = this.shares.get(origin);
    if (share === undefined) {
      share = { active: 0, waiting: [] };
      this.shares.set(origin, share);
    }
    if (share.active < this.perReceiver) {
      share.active += 1;
      this.held.add(row.id);
      return { admission: 'start', origin };
    }
    if (share.waiting.length < this.perReceiver) {
      this.held.add(row.id);
      share.waiting.push(row);
      return { admission: 'wait', origin };
    }
    this.starved.add(origin);
    return { admission: 'give-back', origin };
  }

  /**
   * An attempt to `origin` ended. Returns the waiting row that takes its slot (none once `running` is false),
   * and whether rows of this receiver left in the outbox for want of room may now be claimed.
   */
  finish(id: string, origin: string, running: boolean): { next: ClaimedDelivery | undefined; roomAgain: boolean } {
    this.held.delete(id);
    const share = this.shares.get(origin)!;
    share.active -= 1;
    let next = share.waiting.shift();
    if (next && running) share.active += 1;
    else if (next) {
      this.held.delete(next.id);
      next = undefined;
    }
    if (share.active === 0 && share.waiting.length === 0) this.shares.delete(origin);
    const roomAgain = share.waiting.length === 0 && share.active < this.perReceiver && this.starved.delete(origin);
    return { next, roomAgain };
  }

  /** Takes every waiting row out (the worker stops); returns their ids. */
  drainWaiting(): string[] {
    const ids: string[] = [];
    for (const share of this.shares.values()) {
      for (const row of share.waiting.splice(0)) {
        this.held.delete(row.id);
        ids.push(row.id);
      }
    }
    return ids;
  }

  /** The URL origin a delivery goes to (its receiver); the URL itself when it does not parse. */
  private originOf(url: string): string {
    let origin = this.origins.get(url);
    if (origin === undefined) {
      try {
        origin = new URL(url).origin;
      } catch {
        origin = url;
      }
      if (this.origins.size >= ORIGIN_CACHE_SIZE) this.origins.clear();
      this.origins.set(url, origin);
    }
    return origin;
  }
}
