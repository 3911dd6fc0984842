/** The soonest a timer fires: a burst of retries due together makes one wake, not one each. */
const MIN_DELAY_MS = 10;

/**
 * One timer that calls `onFire` when rows may have fallen due, within `maxDelayMs` at most. It is only ever
 * moved earlier, never later: a retry scheduled or a lease about to lapse while a next-due look-up ran (or
 * that the look-up does not see) keeps its time; at worst the worker looks once for nothing.
 *
 * @example
 * const timer = new WakeTimer(Date.now, () => worker.wake(), 30_000); timer.by(retryAt);
 */
export class WakeTimer {
  private timer: NodeJS.Timeout | undefined;
  /** When `timer` fires (Infinity when none is set). */
  private at = Infinity;

  constructor(
    private readonly clock: () => number,
    private readonly onFire: () => void,
    private readonly maxDelayMs: number,
  ) {}

  get armed(): boolean {
    return this.at !== Infinity;
  }

  /** Makes sure the timer fires within `delayMs` (MIN_DELAY_MS at least, `maxDelayMs` at most). */
  within(delayMs: number): void {
    const delay = Math.min(this.maxDelayMs, Math.max(MIN_DELAY_MS, delayMs));
    const at = this.clock() + delay;
    if (at >= this.at) return;
    clearTimeout(this.timer);
    this.at = at;
    this.timer = setTimeout(() => {
      this.at = Infinity;
      this.onFire();
    }, delay);
    this.timer.unref();
  }

  /** Makes sure the timer fires by `at`. */
  by(at: number): void {
    this.within(at - this.clock());
  }

  clear(): void {
    clearTimeout(this.timer);
    this.at = Infinity;
  }
}
