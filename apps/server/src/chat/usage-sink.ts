import type { Logger } from 'pino';
import type { UsageIncrement, UsageStore } from '../storage/usage-store.js';
import type { AuditSink, CompletedRequest } from './audit.js';

const DAY_MS = 86_400_000;

/**
 * Per-key, per-day request and token counters for the dashboard's Usage view. Counts are summed in memory
 * and written once a second (and on close), so the hot path does no write for them.
 */
export class UsageSink implements AuditSink {
  private pending = new Map<string, UsageIncrement>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly usage: UsageStore,
    private readonly logger: Logger,
    flushIntervalMs = 1000,
  ) {
    this.timer = setInterval(() => void this.flush(), flushIntervalMs);
    this.timer.unref();
  }

  /** The UTC day of the last request (YYYY-MM-DD), recomputed when a request falls on another day. */
  private day = { start: 0, end: 0, label: '' };

  async record(request: CompletedRequest): Promise<void> {
    const day = this.dayOf(request.finishedAt);
    const id = `${request.key.id}|${day}`;
    const inc = this.pending.get(id) ?? {
      keyId: request.key.id,
      userId: request.key.user_id,
      day,
      requests: 0,
      inputTokens: 0,
      outputTokens: 0,
    };
    inc.requests += 1;
    inc.inputTokens += request.usage.prompt_tokens;
    inc.outputTokens += request.usage.completion_tokens;
    this.pending.set(id, inc);
  }

  private dayOf(at: number): string {
    if (at < this.day.start || at >= this.day.end) {
      const start = at - (((at % DAY_MS) + DAY_MS) % DAY_MS);
      this.day = { start, end: start + DAY_MS, label: new Date(start).toISOString().slice(0, 10) };
    }
    return this.day.label;
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    try {
      await this.usage.add(batch);
    } catch (err) {
      this.logger.warn({ err }, 'could not write usage counters; will retry');
      for (const inc of batch) {
        const id = `${inc.keyId}|${inc.day}`;
        const cur = this.pending.get(id);
        if (cur) {
          cur.requests += inc.requests;
          cur.inputTokens += inc.inputTokens;
          cur.outputTokens += inc.outputTokens;
        } else this.pending.set(id, inc);
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/** Fans one completed request out to several sinks, all at once; settles when every one has. */
export function combineSinks(...sinks: AuditSink[]): AuditSink {
  if (sinks.length === 1) return sinks[0]!;
  return {
    record(request) {
      return Promise.all(sinks.map((sink) => sink.record(request))).then(() => undefined);
    },
  };
}
