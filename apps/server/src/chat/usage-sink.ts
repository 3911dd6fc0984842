import type { Logger } from 'pino';
import type { UsageIncrement, UsageStore } from '../storage/usage-store.js';
import { LATENCY_COLUMNS, latencyBucket } from '../storage/usage-latency.js';
import type { AuditSink, CompletedRequest } from '../audit/audit-sink.js';
import { DAY_MS, utcDay } from '../time.js';

/**
 * Per-key, per-day counters for the dashboard's Usage view (requests, tokens, errors, latency buckets,
 * grounding outcomes). Counts are summed in memory
 * and written once a second (and on close), so the hot path does no write for them.
 */
export class UsageSink implements AuditSink {
  private pending = new Map<string, UsageIncrement>();
  /** The counters of the write under way (back in `pending` should it fail). */
  private batch: UsageIncrement[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly usage: UsageStore,
    private readonly logger: Logger,
    flushIntervalMs = 1000,
  ) {
    // A tick while a write is under way waits for it (the next tick would write what came meanwhile anyway).
    this.timer = setInterval(() => void (this.writing ? undefined : this.flush()), flushIntervalMs);
    this.timer.unref();
  }

  /** The UTC day of the last request (YYYY-MM-DD), recomputed when a request falls on another day. */
  private day = { start: 0, end: 0, label: '' };

  async record(request: CompletedRequest): Promise<void> {
    if (!request.usageOnEnd) this.countUsage(request);
  }

  countUsage(request: CompletedRequest): void {
    const day = this.dayOf(request.finishedAt);
    const id = `${request.key.id}|${day}`;
    const latency = new Array<number>(LATENCY_COLUMNS.length).fill(0);
    latency[latencyBucket(Math.max(0, request.finishedAt - request.startedAt))] = 1;
    const one: UsageIncrement = {
      keyId: request.key.id,
      userId: request.key.user_id,
      day,
      requests: 1,
      inputTokens: request.usage.prompt_tokens,
      outputTokens: request.usage.completion_tokens,
      errors4xx: request.statusCode >= 400 && request.statusCode < 500 ? 1 : 0,
      errors5xx: request.statusCode >= 500 ? 1 : 0,
      groundingChecked: request.svc?.checked ? 1 : 0,
      ungrounded: request.svc?.checked && !request.svc.grounded ? 1 : 0,
      latency,
    };
    const cur = this.pending.get(id);
    if (cur) addInto(cur, one);
    else this.pending.set(id, one);
  }

  private dayOf(at: number): string {
    if (at < this.day.start || at >= this.day.end) {
      const start = at - (((at % DAY_MS) + DAY_MS) % DAY_MS);
      this.day = { start, end: start + DAY_MS, label: utcDay(start) };
    }
    return this.day.label;
  }

  /** The write under way: one at a time (see `flush`). */
  private writing: Promise<void> | undefined;

  /**
   * Writes the counters summed so far. One write at a time: a write held by the database (a lock, a slow disk,
   * Postgres not answering for its 15 s) used to be joined by another every second, each holding a pool
   * connection and waiting on the same rows, until the pool was spent on usage counters. Counts that come
   * meanwhile go in the next write.
   */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.pending.size === 0) return;
    this.writing = this.write().finally(() => (this.writing = undefined));
    await this.writing;
  }

  private async write(): Promise<void> {
    const batch = [...this.pending.values()];
    this.batch = batch;
    this.pending = new Map();
    try {
      await this.usage.add(batch);
    } catch (err) {
      this.logger.warn({ err }, 'could not write usage counters; will retry');
      for (const inc of batch) {
        const id = `${inc.keyId}|${inc.day}`;
        const cur = this.pending.get(id);
        if (cur) addInto(cur, inc);
        else this.pending.set(id, inc);
      }
    } finally {
      this.batch = [];
    }
  }

  /** Requests counted and not written yet (the write under way included): what a stop that cannot wait for the database leaves uncounted. */
  get unwrittenRequests(): number {
    let requests = 0;
    for (const inc of [...this.pending.values(), ...this.batch]) requests += inc.requests;
    return requests;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/** Adds the counters of `inc` to `into` (same key and day). */
function addInto(into: UsageIncrement, inc: UsageIncrement): void {
  into.requests += inc.requests;
  into.inputTokens += inc.inputTokens;
  into.outputTokens += inc.outputTokens;
  into.errors4xx = (into.errors4xx ?? 0) + (inc.errors4xx ?? 0);
  into.errors5xx = (into.errors5xx ?? 0) + (inc.errors5xx ?? 0);
  into.groundingChecked = (into.groundingChecked ?? 0) + (inc.groundingChecked ?? 0);
  into.ungrounded = (into.ungrounded ?? 0) + (inc.ungrounded ?? 0);
  into.latency = LATENCY_COLUMNS.map((_, i) => (into.latency?.[i] ?? 0) + (inc.latency?.[i] ?? 0));
}

/** Fans one completed request out to several sinks, all at once; settles when every one has. */
export function combineSinks(...sinks: AuditSink[]): AuditSink {
  if (sinks.length === 1) return sinks[0]!;
  return {
    record(request) {
      return Promise.all(sinks.map((sink) => sink.record(request))).then(() => undefined);
    },
    countUsage(request) {
      for (const sink of sinks) sink.countUsage?.(request);
    },
  };
}
