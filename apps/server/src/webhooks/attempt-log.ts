import type { KeysStore } from '../storage/keys-store.js';
import { newAttemptId, type AttemptRecord, type OutboxStore } from '../storage/outbox-store.js';
import { onceMoreIfConnectionLost, writeAgainIfConnectionLost } from '../storage/storage-fault.js';

/** Attempts ending this close together are written in one transaction, at most BATCH of them. */
const WINDOW_MS = 20;
const BATCH = 256;
/** Writes of one batch when the connection each went out on was lost (see `write`). */
const WRITE_TRIES = 3;

interface Waiting extends AttemptRecord {
  attemptId: string;
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
      this.waiting.push({ ...record, attemptId: record.attemptId ?? newAttemptId(), keyId, test, resolve, reject });
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
      await this.write(batch);
      // A key's status is its latest attempt's; setting it again sets the same.
      const latest = new Map<string, Waiting>();
      for (const w of batch) latest.set(w.keyId, w);
      for (const [keyId, { result, test }] of latest) {
        const status = { at: result.attemptedAt, outcome: result.outcome, statusCode: result.statusCode, error: result.error, test };
        await onceMoreIfConnectionLost(() => this.keys.setLastDelivery(keyId, status));
      }
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    for (const w of batch) w.resolve();
  }

  /**
   * The batch's attempts, written again (up to WRITE_TRIES) when the connection the transaction went out on was lost
   * (Postgres ended it: `pg_terminate_backend`, a failover, a proxy's reset). A record that failed would leave its
   * row leased, and the receiver, which answered already, would get the delivery again once the lease lapsed, with
   * the first answer missing from the log. A retry first looks for the batch's first attempt row by its id: the
   * batch is one transaction, so when it is there the commit landed and only its answer was lost, and a write again
   * would count every attempt twice.
   */
  private async write(batch: readonly Waiting[]): Promise<void> {
    const records = batch.map(({ deliveryId, result, next, leasedBy, attemptId }) => ({ deliveryId, result, next, leasedBy, attemptId }));
    await writeAgainIfConnectionLost(WRITE_TRIES, () => this.deliveries.recordAttempts(records), () => this.landed(batch[0]!));
  }

  private async landed({ keyId, deliveryId, attemptId }: Waiting): Promise<boolean> {
    // The progress view: the attempts without the payload, which can be megabytes.
    const found = await this.deliveries.progress(keyId, deliveryId);
    return found?.attempts.some((attempt) => attempt.id === attemptId) ?? false;
  }
}
