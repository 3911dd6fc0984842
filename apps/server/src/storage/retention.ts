import type { Logger } from 'pino';
import { DAY_MS } from '../time.js';

const PURGE_INTERVAL_MS = 3_600_000;

/** Something stored that ages out: finished webhook deliveries and their attempt logs, stored responses. */
export interface Purgeable {
  /** Deletes what was created before `cutoff` (ms since the epoch) and is done with; returns how many. */
  purgeOlderThan(cutoff: number): Promise<number>;
}

/** Something stored with its own expiry (dashboard sessions): gone once expired, whatever SVC_RETENTION_DAYS says. */
export interface Expiring {
  /** Deletes what expired at or before `now` (ms since the epoch); returns how many. */
  purgeExpired(now: number): Promise<number>;
}

export interface RetentionOptions {
  /** What is purged, by the name the log line gives it. */
  stores: Record<string, Purgeable>;
  /** What expires on its own, by the name the log line gives it. */
  expiring?: Record<string, Expiring>;
  /** SVC_RETENTION_DAYS. */
  retentionDays: number;
  clock: () => number;
  logger: Logger;
  /** Run after a pass that removed rows (SQLite: give the freed pages back to the file system). */
  afterPurge?: () => Promise<void>;
}

/**
 * Purges what is stored past retention (SVC_RETENTION_DAYS), and what expired on its own: once at start, then
 * hourly. Pending deliveries stay whatever their age (their store's `purgeOlderThan` keeps them). Expired
 * dashboard sessions go here too: a sign-in also drops them, but an instance nobody signs in to would keep them.
 *
 * @example
 * const retention = new Retention({ stores: { 'webhook deliveries': store.deliveries }, retentionDays: 30, clock, logger });
 * retention.start(); … await retention.stop(); await store.close();
 */
export class Retention {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The pass under way: a stop waits for it, so that it never runs on into a closed store. */
  private running: Promise<void> | undefined;

  constructor(private readonly options: RetentionOptions) {}

  start(): void {
    if (this.timer) return;
    this.stopped = false;
    this.timer = setInterval(() => void this.purge(), PURGE_INTERVAL_MS);
    this.timer.unref();
    void this.purge();
  }

  /**
   * No pass starts after this; resolves once the one under way has finished the store it was purging (the stores
   * after it wait for the next start). The caller closes the store after it.
   */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.stopped = true;
    await this.running;
  }

  /** One pass over every store; a store that fails is logged and the others still purged. */
  purge(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    // One pass at a time: an hourly tick during a long first pass waits for it.
    const pass = (this.running ?? Promise.resolve()).then(() => this.pass());
    const running = pass.finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }

  private async pass(): Promise<void> {
    const { stores, retentionDays, clock, logger } = this.options;
    const cutoff = clock() - retentionDays * DAY_MS;
    let removedAny = false;
    for (const [what, store] of Object.entries(stores)) {
      if (this.stopped) return;
      try {
        const removed = await store.purgeOlderThan(cutoff);
        removedAny ||= removed > 0;
        if (removed > 0) logger.info({ removed, retention_days: retentionDays }, `purged old ${what}`);
      } catch (err) {
        logger.error({ err }, `could not purge old ${what}`);
      }
    }
    for (const [what, store] of Object.entries(this.options.expiring ?? {})) {
      if (this.stopped) return;
      try {
        const removed = await store.purgeExpired(clock());
        removedAny ||= removed > 0;
        if (removed > 0) logger.info({ removed }, `purged expired ${what}`);
      } catch (err) {
        logger.error({ err }, `could not purge expired ${what}`);
      }
    }
    if (!removedAny || !this.options.afterPurge || this.stopped) return;
    try {
      await this.options.afterPurge();
    } catch (err) {
      logger.warn({ err }, 'could not give the purged rows\' space back to the file system; the next purge tries again');
    }
  }
}
