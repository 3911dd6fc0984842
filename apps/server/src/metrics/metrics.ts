import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { SvcResult } from '@svc/protocol';
import type { Backlog } from '../storage/outbox-store.js';

/** Seconds buckets for whole requests and upstream calls (LLM answers take seconds to minutes). */
const SLOW_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Seconds buckets for in-process work (grounding check). */
const FAST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds from completion to a 2xx: seconds when all is well, hours along the retry schedule. */
const DELIVERY_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 36_000, 86_400];

export type WebhookAttemptOutcome = 'success' | 'failure' | 'refused';
export type GroundingVerdict = 'grounded' | 'ungrounded' | 'not_checked';

export interface MetricsOptions {
  /** Outbox counts, read on every scrape. */
  backlog?: () => Promise<Backlog>;
  /** Null when the database takes a write now, else why not (`Store.unready`), asked on every scrape. */
  unready?: () => Promise<string | null>;
  /** SQLite: the database file's free pages (`freeSpace`), read on every scrape. */
  freeSpace?: () => { freeBytes: number; reclaimable: boolean };
  /** Node process metrics (CPU, memory, event loop, GC). Default true. */
  processMetrics?: boolean;
}

/**
 * Every Prometheus series the server exposes, on a registry of its own (one per app: tests run several
 * servers in one process). Instrumented code calls the small methods below; nothing reads a global.
 *
 * @example
 * const metrics = createMetrics({ backlog: () => store.deliveries.backlog(Date.now()) });
 * res.type(metrics.contentType).send(await metrics.scrape());
 */
export class Metrics {
  readonly registry = new Registry();
  readonly contentType = this.registry.contentType;

  private readonly httpRequests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly httpDuration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'Time from request arrival to the last byte of the response.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: SLOW_BUCKETS,
    registers: [this.registry],
  });
  private readonly timeToFirstToken = new Histogram({
    name: 'svc_chat_time_to_first_token_seconds',
    help: 'Streamed chat completions: time from request arrival to the first content or tool-call delta sent.',
    buckets: SLOW_BUCKETS,
    registers: [this.registry],
  });
  private readonly upstreamDuration = new Histogram({
    name: 'svc_upstream_request_duration_seconds',
    help: 'Upstream chat-completion calls, from request to the end of the answer (streams: to the last frame).',
    labelNames: ['mode', 'outcome'] as const,
    buckets: SLOW_BUCKETS,
    registers: [this.registry],
  });
  private readonly upstreamErrors = new Counter({
    name: 'svc_upstream_errors_total',
    help: 'Failed upstream calls by error code (upstream_error, upstream_timeout, upstream_unavailable, upstream_invalid_response, upstream_rate_limited, upstream_invalid_request, client_closed).',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  private readonly groundingDuration = new Histogram({
    name: 'svc_grounding_check_duration_seconds',
    help: 'Time spent producing the svc grounding result of an answer.',
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });
  private readonly groundingVerdicts = new Counter({
    name: 'svc_grounding_checks_total',
    help: 'Grounding results by verdict (grounded, ungrounded, not_checked).',
    labelNames: ['verdict'] as const,
    registers: [this.registry],
  });
  private readonly rateLimitRejections = new Counter({
    name: 'svc_rate_limit_rejections_total',
    help: 'Requests answered 429 (rate_limit_exceeded; also too_many_requests_in_flight, counted apart in svc_chat_in_flight_rejections_total).',
    registers: [this.registry],
  });
  private readonly inFlightRejections = new Counter({
    name: 'svc_chat_in_flight_rejections_total',
    help: 'Chat requests refused with 429 too_many_requests_in_flight (SVC_MAX_IN_FLIGHT reached).',
    registers: [this.registry],
  });
  private readonly webhookAttempts = new Counter({
    name: 'svc_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (success = 2xx, failure, refused by the SSRF guard).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  private readonly deliveryLatency = new Histogram({
    name: 'svc_webhook_delivery_latency_seconds',
    help: 'Time from the request completing (delivery recorded) to the 2xx of the receiver, retries included.',
    buckets: DELIVERY_BUCKETS,
    registers: [this.registry],
  });

  constructor(options: MetricsOptions = {}) {
    const { backlog, unready } = options;
    if (backlog) {
      // One read per scrape serves both gauges; a failed read is an unreachable database, not a failed scrape:
      // the outbox counts are left out and svc_database_up says why, so an outage still has its metrics.
      let reading: Promise<Backlog | undefined> | undefined;
      const read = () =>
        (reading ??= backlog()
          .catch(() => undefined)
          .finally(() => {
            reading = undefined;
          }));
      new Gauge({
        name: 'svc_webhook_outbox_deliveries',
        help: 'Deliveries in the outbox by state: pending (not yet delivered nor given up), due (pending and due now), failed.',
        labelNames: ['state'] as const,
        registers: [this.registry],
        // Every process of a multi-process server reads the same outbox: its counts are not to be summed.
        aggregator: 'max',
        async collect() {
          const counts = await read();
          if (counts === undefined) return this.reset();
          this.set({ state: 'pending' }, counts.pending);
          this.set({ state: 'due' }, counts.due);
          this.set({ state: 'failed' }, counts.failed);
        },
      });
      new Gauge({
        name: 'svc_database_up',
        help: '1 when this scrape could read the database (the outbox counts) and write to it (as /readyz does), 0 when it could not (the error is logged by the requests that failed; /readyz answers 503).',
        registers: [this.registry],
        // Any process that cannot reach the database makes it 0.
        aggregator: 'min',
        async collect() {
          // A write too: a full disk or a read-only file system still reads, while every audited request fails.
          const [counts, problem] = await Promise.all([read(), unready ? unready().catch(() => 'unknown') : null]);
          this.set(counts === undefined || problem !== null ? 0 : 1);
        },
      });
    }
    const { freeSpace } = options;
    if (freeSpace) {
      new Gauge({
        name: 'svc_database_free_bytes',
        help: 'SQLite: bytes of free pages in the database file (rows deleted since it last shrank). reclaimable="1": svc gives them back after each retention purge; "0": a database created before it did, converted by restoring an svc-server backup.',
        labelNames: ['reclaimable'] as const,
        registers: [this.registry],
        // Every process of a multi-process server reads the same file.
        aggregator: 'max',
        collect() {
          this.reset();
          try {
            const { freeBytes, reclaimable } = freeSpace();
            this.set({ reclaimable: reclaimable ? '1' : '0' }, freeBytes);
          } catch {
            // The file cannot be read: svc_database_up says so.
          }
        },
      });
    }
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /**
   * Exposes the chat requests and streams in flight and their maximum, read from `source` on every scrape.
   * Summed over the processes of a multi-process server, like the maximum (which is per process).
   */
  inFlight(source: { readonly requests: number; readonly streams: number; readonly max: number }): void {
    const gauges: Array<[name: string, help: string, read: () => number]> = [
      ['svc_chat_requests_in_flight', 'Chat requests admitted whose response has not closed (streams included).', () => source.requests],
      ['svc_chat_streams_open', 'Streamed chat completions whose response has not closed.', () => source.streams],
      [
        'svc_chat_requests_in_flight_max',
        'SVC_MAX_IN_FLIGHT: chat requests in flight past which a request is refused with 429 too_many_requests_in_flight.',
        () => source.max,
      ],
    ];
    for (const [name, help, read] of gauges) {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    }
  }

  /** Exposes `svc_redis_up`: 1 while the shared rate-limit store is connected, read on every scrape. */
  redis(connected: () => boolean): void {
    new Gauge({
      name: 'svc_redis_up',
      help: '1 while SVC_REDIS_URL is connected, 0 while it is not (rate limits are then counted per instance, not shared).',
      registers: [this.registry],
      // Any process without Redis makes it 0.
      aggregator: 'min',
      collect() {
        this.set(connected() ? 1 : 0);
      },
    });
  }

  inFlightRejected(): void {
    this.inFlightRejections.inc();
  }

  /** The Prometheus text exposition of every series. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  request(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
    if (status === 429) this.rateLimitRejections.inc();
  }

  firstToken(seconds: number): void {
    this.timeToFirstToken.observe(seconds);
  }

  upstreamCall(mode: 'complete' | 'stream', seconds: number, errorCode?: string): void {
    this.upstreamDuration.observe({ mode, outcome: errorCode ? 'error' : 'ok' }, seconds);
    if (errorCode) this.upstreamErrors.inc({ code: errorCode });
  }

  groundingCheck(result: SvcResult, seconds: number): void {
    this.groundingDuration.observe(seconds);
    this.groundingVerdicts.inc({ verdict: !result.checked ? 'not_checked' : result.grounded ? 'grounded' : 'ungrounded' });
  }

  /** `deliveredAfterMs`: completion → 2xx, given only for successful attempts. */
  webhookAttempt(outcome: WebhookAttemptOutcome, deliveredAfterMs?: number): void {
    this.webhookAttempts.inc({ outcome });
    if (outcome === 'success' && deliveredAfterMs !== undefined) this.deliveryLatency.observe(Math.max(0, deliveredAfterMs) / 1000);
  }
}

/** @see Metrics */
export function createMetrics(options: MetricsOptions = {}): Metrics {
  return new Metrics(options);
}
