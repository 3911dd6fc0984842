import type { ClaimedDelivery, LeftOut } from '../storage/outbox-store.js';

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
 * Each user's share too: at most `perUser` attempts in flight, over all their receivers. One user
 * owns any number of origins (ports, host names); without it, four receivers of one user that never answer
 * held all 256 slots, and another user's deliveries waited 28 s behind them (found by a review).
 *
 * @example
 * const { admission, origin } = receivers.admit(row); // 'start': the slot is taken, send it now
 */
export class Receivers {
  private readonly shares = new Map<string, Share>();
  private readonly origins = new Map<string, string>();
  /**
   * The deliveries in flight or waiting here, each with its user: a claim that returns one again (lease lapsed)
   * is ignored.
   */
  private readonly held = new Map<string, string>();
  /** Receivers left out of a claim, or whose rows were given back: a claim is due once they have room. */
  private readonly starved = new Set<string>();
  /** Attempts in flight per user. */
  private readonly activeByUser = new Map<string, number>();
  /** Users left out of a claim, or whose rows were given back: a claim is due once they have room. */
  private readonly starvedUsers = new Set<string>();

  constructor(
    private readonly perReceiver: number,
    private readonly perUser = 2 * perReceiver,
  ) {}

  /**
   * The receivers at their share and the users at theirs, marked as owed a claim once they have room: the
   * next claim leaves them out.
   */
  leaveOut(): LeftOut {
    const origins: string[] = [];
    for (const [origin, share] of this.shares) {
      if (share.active < this.perReceiver) continue;
      origins.push(origin);
      this.starved.add(origin);
    }
    const users: string[] = [];
    for (const [user, count] of this.activeByUser) {
      if (count < this.perUser) continue;
      users.push(user);
      this.starvedUsers.add(user);
    }
    return { origins, users };
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
    const user = row.user_id;
    // Given back, not kept waiting: a row waits on its receiver's finishing attempts, and that receiver may
    // have none in flight.
    if ((this.activeByUser.get(user) ?? 0) >= this.perUser) {
      this.starvedUsers.add(user);
      return { admission: 'give-back', origin };
    }
    let share = this.shares.get(origin);
    if (share === undefined) {
      share = { active: 0, waiting: [] };
      this.shares.set(origin, share);
    }
    if (share.active < this.perReceiver) {
      share.active += 1;
      this.held.set(row.id, user);
      this.countActive(user, 1);
      return { admission: 'start', origin };
    }
    if (share.waiting.length < this.perReceiver) {
      this.held.set(row.id, user);
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
    const user = this.held.get(id);
    this.held.delete(id);
    if (user !== undefined) this.countActive(user, -1);
    const share = this.shares.get(origin)!;
    share.active -= 1;
    let next = share.waiting.shift();
    if (next && running) {
      share.active += 1;
      this.countActive(next.user_id, 1);
    } else if (next) {
      this.held.delete(next.id);
      next = undefined;
    }
    if (share.active === 0 && share.waiting.length === 0) this.shares.delete(origin);
    const originRoom = share.waiting.length === 0 && share.active < this.perReceiver && this.starved.delete(origin);
    const userRoom = user !== undefined && (this.activeByUser.get(user) ?? 0) < this.perUser && this.starvedUsers.delete(user);
    return { next, roomAgain: originRoom || userRoom };
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

  private countActive(user: string, by: 1 | -1): void {
    const count = (this.activeByUser.get(user) ?? 0) + by;
    if (count > 0) this.activeByUser.set(user, count);
    else this.activeByUser.delete(user);
  }

  /** The URL origin a delivery goes to (its receiver); the URL itself when it does not parse. */
  originOf(url: string): string {
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
