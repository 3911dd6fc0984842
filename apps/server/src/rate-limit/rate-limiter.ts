import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { isSvcMessage, type PrimaryMessage, type WorkerMessage } from '../cluster/messages.js';

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** ms until the window frees a request. */
  resetMs: number;
}

export interface RateLimiter {
  consume(keyId: string, limitPerMinute: number): Promise<RateLimitDecision>;
}

export interface RateLimiterOptions {
  redis?: Redis;
  keyPrefix?: string;
  /**
   * A node:cluster worker without Redis: the counters live in the primary (`answerClusterRateLimits`), so a
   * key's limit holds exactly across the processes; see `ClusterRateLimiter`.
   */
  cluster?: boolean;
}

/**
 * Per-key requests-per-minute limits. In memory for one instance; through Redis (shared by every instance)
 * when a client is given, with an in-memory insurance limiter that takes over while Redis is unreachable —
 * so a Redis outage fails open to per-instance limits instead of refusing traffic. In the workers of a
 * multi-process server without Redis, through the cluster primary.
 *
 * @example
 * const limiter = createRateLimiter();
 * const { allowed } = await limiter.consume(key.id, 600);
 */
export function createRateLimiter(options: RateLimiterOptions = {}): RateLimiter {
  if (options.cluster && !options.redis) return new ClusterRateLimiter(process as Ipc);
  const limiters = new Map<number, RateLimiterAbstract>();
  const limiterFor = (points: number): RateLimiterAbstract => {
    let limiter = limiters.get(points);
    if (!limiter) {
      const base = { points, duration: 60, keyPrefix: `${options.keyPrefix ?? 'svc:rl'}:${points}` };
      limiter = options.redis
        ? new RateLimiterRedis({
            ...base,
            storeClient: options.redis,
            useRedisPackage: false,
            insuranceLimiter: new RateLimiterMemory(base),
          })
        : new RateLimiterMemory(base);
      limiters.set(points, limiter);
    }
    return limiter;
  };

  return {
    async consume(keyId, limitPerMinute) {
      try {
        const res = await limiterFor(limitPerMinute).consume(keyId, 1);
        return { allowed: true, limit: limitPerMinute, remaining: res.remainingPoints, resetMs: res.msBeforeNext };
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) {
          return { allowed: false, limit: limitPerMinute, remaining: 0, resetMs: rejection.msBeforeNext };
        }
        throw rejection;
      }
    },
  };
}

/** How long a worker waits for the primary's answer before its requests fail (the primary is local and does little else). */
const CLUSTER_TIMEOUT_MS = 5000;

/** The IPC channel of a cluster worker (`process`), or a stand-in in tests. */
export interface Ipc {
  readonly connected: boolean;
  send(message: WorkerMessage): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
}

interface PendingCheck {
  keyId: string;
  limit: number;
  resolve: (decision: RateLimitDecision) => void;
  reject: (err: Error) => void;
}

/**
 * A cluster worker's limits, counted in the primary: the checks of one event-loop turn go in one message
 * and come back in one answer, consumed there in order, so the limits stay exact across processes at one
 * IPC round trip per turn instead of one per request (rate-limiter-flexible's RateLimiterCluster sends one
 * per request, and the primary's CPU then grows with the request rate of all workers together).
 *
 * @example
 * const limiter = new ClusterRateLimiter(process as Ipc); await limiter.consume(key.id, 600);
 */
export class ClusterRateLimiter implements RateLimiter {
  private batch: PendingCheck[] = [];
  private nextId = 0;
  private readonly waiting = new Map<number, { checks: PendingCheck[]; timer: NodeJS.Timeout }>();

  constructor(
    private readonly ipc: Ipc,
    private readonly timeoutMs = CLUSTER_TIMEOUT_MS,
  ) {
    ipc.on('message', (message) => this.answered(message));
  }

  consume(keyId: string, limitPerMinute: number): Promise<RateLimitDecision> {
    return new Promise((resolve, reject) => {
      // setImmediate, not nextTick: the requests read in one poll phase are all checked by then.
      if (this.batch.length === 0) setImmediate(this.send);
      this.batch.push({ keyId, limit: limitPerMinute, resolve, reject });
    });
  }

  private readonly send = (): void => {
    const checks = this.batch;
    this.batch = [];
    if (!this.ipc.connected) return fail(checks, new Error('the primary process is gone; rate limits cannot be checked'));
    const id = this.nextId++;
    const timer = setTimeout(() => {
      this.waiting.delete(id);
      fail(checks, new Error(`the primary process did not answer a rate-limit check within ${this.timeoutMs} ms`));
    }, this.timeoutMs);
    this.waiting.set(id, { checks, timer });
    this.ipc.send({ svc: 'rate-limit', id, checks: checks.map((c): [string, number] => [c.keyId, c.limit]) });
  };

  private answered(message: unknown): void {
    if (!isSvcMessage<PrimaryMessage>(message) || message.svc !== 'rate-limit') return;
    const pending = this.waiting.get(message.id);
    if (!pending) return;
    this.waiting.delete(message.id);
    clearTimeout(pending.timer);
    pending.checks.forEach((check, i) => {
      const decision = message.decisions[i];
      if (!decision) return check.reject(new Error('the primary process answered a rate-limit check without a decision'));
      check.resolve({ allowed: decision[0] === 1, limit: check.limit, remaining: decision[1], resetMs: decision[2] });
    });
  }
}

function fail(checks: PendingCheck[], err: Error): void {
  for (const check of checks) check.reject(err);
}

/**
 * In the node:cluster primary: the counters of every worker's `ClusterRateLimiter` (in memory, one set for
 * all workers). Returns the answer to a worker's `rate-limit` message.
 *
 * @example
 * const answer = answerClusterRateLimits();
 * cluster.on('message', (worker, m) => { if (m.svc === 'rate-limit') void answer(m).then((a) => worker.send(a)); });
 */
export function answerClusterRateLimits(): (message: Extract<WorkerMessage, { svc: 'rate-limit' }>) => Promise<Extract<PrimaryMessage, { svc: 'rate-limit' }>> {
  const limiter = createRateLimiter();
  return async ({ id, checks }) => {
    // Each consume counts when it is called: in message order, as the worker sent them.
    const decisions = await Promise.all(checks.map(([keyId, limit]) => limiter.consume(keyId, limit)));
    return { svc: 'rate-limit', id, decisions: decisions.map((d): [0 | 1, number, number] => [d.allowed ? 1 : 0, d.remaining, d.resetMs]) };
  };
}

/** OpenAI's duration form for `x-ratelimit-reset-requests`: `120ms`, `12s`, `1m30s`. */
export function formatResetDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const totalSeconds = Math.ceil(ms / 1000);
  const minutes = Math.floor(totalSeconds / 60);
  const seconds = totalSeconds % 60;
  return minutes > 0 ? `${minutes}m${seconds}s` : `${seconds}s`;
}
