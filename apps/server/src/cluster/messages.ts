import type { RateLimitChecks, RateLimitDecisions } from '../rate-limit/cluster-rate-limiter.js';

/**
 * Messages between the primary of a multi-process server and its workers, beside prom-client's (`type`) on
 * the same IPC channels: ours carry `svc`.
 */
export type WorkerMessage =
  /** Started far enough to keep a stop (early.ts): a stop sent before would be lost. */
  | { svc: 'early' }
  /** Listening; `webhookWorkerId` is the `leased_by` of this process's webhook claims. */
  | { svc: 'ready'; url: string; webhookWorkerId: string }
  /** Asks for the metrics of every worker (a `/metrics` request reached this one). */
  | { svc: 'metrics'; id: number }
  /** The rate-limit checks of one event-loop turn (`ClusterRateLimiter`). */
  | RateLimitChecks;

export type PrimaryMessage =
  /** Finish in-flight requests and webhook attempts, then exit 0. */
  | { svc: 'stop' }
  | { svc: 'metrics'; id: number; text: string }
  | { svc: 'metrics'; id: number; error: string }
  | RateLimitDecisions;

export function isSvcMessage<T extends { svc: string }>(message: unknown): message is T {
  return typeof message === 'object' && message !== null && typeof (message as { svc?: unknown }).svc === 'string';
}
