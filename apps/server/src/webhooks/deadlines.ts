/** An attempt as its deadline sees it. */
export interface Expiring {
  /** Ended (by its answer, an error or its deadline): its entry is only waiting to be swept. */
  readonly settled: boolean;
  /** When its total timeout runs out (performance.now() time). */
  readonly deadline: number;
  /** The deadline passed: end it as timed out. */
  expire(): void;
}

/**
 * The total timeout of every attempt in flight, kept with one timer instead of a timer and an abort signal
 * per attempt. All attempts share one timeout, so their deadlines come in start order: a FIFO whose head
 * is the next to expire. Attempts that ended leave the head as new ones arrive or when the timer fires.
 */
export class Deadlines {
  private queue: Array<Expiring | undefined> = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;

  add(attempt: Expiring): void {
    this.dropSettled();
    this.queue.push(attempt);
    if (this.timer === undefined) this.arm(attempt.deadline - performance.now());
  }

  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delayMs: number): void {
    // Sockets and look-ups in progress keep the process alive, not this timer.
    this.timer = setTimeout(() => this.sweep(), Math.max(1, Math.ceil(delayMs))).unref();
  }

  private sweep(): void {
    this.timer = undefined;
    const now = performance.now();
    for (let next = this.queue[this.head]; next !== undefined && (next.settled || next.deadline <= now); next = this.queue[this.head]) {
      this.queue[this.head++] = undefined;
      next.expire();
    }
    this.compact();
    const first = this.queue[this.head];
    if (first !== undefined) this.arm(first.deadline - now);
  }

  private dropSettled(): void {
    for (let next = this.queue[this.head]; next?.settled; next = this.queue[this.head]) this.queue[this.head++] = undefined;
    this.compact();
  }

  private compact(): void {
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }
}
