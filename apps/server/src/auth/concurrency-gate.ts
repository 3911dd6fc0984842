/**
 * At most `limit` holders at once; a caller that finds it full is turned away at once rather than queued.
 * Bounds CPU-heavy work that runs on libuv's small thread pool (scrypt), so a flood of it cannot starve the
 * pool's other users (zlib, file system, DNS look-ups).
 *
 * @example
 * const release = gate.tryEnter();
 * if (!release) throw busy();
 * try { await verifyPassword(p, hash); } finally { release(); }
 */
export class ConcurrencyGate {
  private held = 0;

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`ConcurrencyGate limit must be a positive integer, not ${limit}`);
  }

  /** Holders right now. */
  get inUse(): number {
    return this.held;
  }

  /** A release function when there was room (call it exactly once), else undefined. */
  tryEnter(): (() => void) | undefined {
    if (this.held >= this.limit) return undefined;
    this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
    };
  }
}
