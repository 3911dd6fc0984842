import type { Logger } from 'pino';
import type { OutboxStore } from '../storage/outbox-store.js';
import { DAY_MS } from '../time.js';

const PURGE_INTERVAL_MS = 3_600_000;

export interface RetentionOptions {
  deliveries: OutboxStore;
  /** SVC_RETENTION_DAYS: finished deliveries and their attempt logs older than this are deleted. */
  retentionDays: number;
  clock: () => number;
  logger: Logger;
}

/**
 * Purges finished deliveries past retention: once at start, then hourly. Pending ones stay whatever their age.
 *
 * @example
 * const retention = new Retention({ deliveries, retentionDays: 30, clock, logger }); retention.start(); … retention.stop();
 */
export class Retention {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: RetentionOptions) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.purge(), PURGE_INTERVAL_MS);
    this.timer.unref();
    void this.purge();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async purge(): Promise<void> {
    const { deliveries, retentionDays, clock, logger } = this.options;
    try {
      const removed = await deliveries.purgeOlderThan(clock() - retentionDays * DAY_MS);
      if (removed > 0) logger.info({ removed, retention_days: retentionDays }, 'purged old webhook deliveries');
    } catch (err) {
      logger.error({ err }, 'could not purge old webhook deliveries');
    }
  }
}
