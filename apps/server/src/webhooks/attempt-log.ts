import type { KeysStore } from '../storage/keys-store.js';
import type { AttemptRecord, OutboxStore } from '../storage/outbox-store.js';

/** Attempts ending this close together are written in one transaction, at most BATCH of them. */
const WINDOW_MS = 20;
const BATCH = 256;

interface Waiting extends AttemptRecord {
  keyId: string;
  test: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Writes attempts to the outbox and each key's last delivery status (design §5). Attempts ending within
 * WINDOW_MS of each other share one transaction: the pages they share — indexes, the attempts table's last
 * page, the key's row — are written once, not once per delivery. No response waits for this; a crash inside
 * the window means the attempt is made again (at least once).
 *
 * @example
 * await log.record(row.key_id, { deliveryId: row.id, result, next, leasedBy: row.leased_by }, { test: false }); // resolves once written
 */
export class AttemptLog {
  private waiting: Waiting[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly deliveries: OutboxStore,
    private readonly keys: KeysStore,
  ) {}

  /**
   * Resolves once the attempt and its key's status are written; rejects when they could not be. `test`: the
   * attempt is a test send's (the key's status says so).
   */
  record(keyId: string, record: AttemptRecord, { test }: { test: boolean }): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ ...record, keyId, test, resolve, reject });
      if (this.waiting.length >= BATCH) {
        clearTimeout(this.timer);
        this.timer = undefined;
        setImmediate(() => void this.flush());
      } else if (this.waiting.length === 1) {
        this.timer = setTimeout(() => void this.flush(), WINDOW_MS);
      }
    });
  }

  private async flush(): Promise<void> {
    this.timer = undefined;
    const batch = this.waiting;
    if (batch.length === 0) return;
    this.waiting = [];
    try {
      await this.deliveries.recordAttempts(batch.map(({ deliveryId, result, next, leasedBy }) => ({ deliveryId, result, next, leasedBy })));
      // A key's status is its latest attempt's.
      const latest = new Map<string, Waiting>();
      for (const w of batch) latest.set(w.keyId, w);
      for (const [keyId, { result, test }] of latest) {
        await this.keys.setLastDelivery(keyId, { at: result.attemptedAt, outcome: result.outcome, statusCode: result.statusCode, error: result.error, test });
      }
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    for (const w of batch) w.resolve();
  }
}
