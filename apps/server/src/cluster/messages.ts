/**
 * Messages between the primary of a multi-process server and its workers, beside rate-limiter-flexible's
 * (`channel`) and prom-client's (`type`) on the same IPC channels: ours carry `svc`.
 */
export type WorkerMessage =
  /** Listening; `webhookWorkerId` is the `leased_by` of this process's webhook claims. */
  | { svc: 'ready'; url: string; webhookWorkerId: string }
  /** Asks for the metrics of every worker (a `/metrics` request reached this one). */
  | { svc: 'metrics'; id: number }
  /** Consumes one request of each `[key id, limit per minute]`, in order (the rate-limit checks of one event-loop turn). */
  | { svc: 'rate-limit'; id: number; checks: Array<[keyId: string, limitPerMinute: number]> };

export type PrimaryMessage =
  /** Finish in-flight requests and webhook attempts, then exit 0. */
  | { svc: 'stop' }
  | { svc: 'metrics'; id: number; text: string }
  | { svc: 'metrics'; id: number; error: string }
  /** One decision per check, in order: allowed (1 or 0), requests remaining, ms until the window frees one. */
  | { svc: 'rate-limit'; id: number; decisions: Array<[allowed: 0 | 1, remaining: number, resetMs: number]> };

export function isSvcMessage<T extends { svc: string }>(message: unknown): message is T {
  return typeof message === 'object' && message !== null && typeof (message as { svc?: unknown }).svc === 'string';
}
