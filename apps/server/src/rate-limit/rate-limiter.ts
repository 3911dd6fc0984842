import {
  RateLimiterCluster,
  RateLimiterClusterMaster,
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterAbstract,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';

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
   * A node:cluster worker without Redis: the counters live in the primary (`holdClusterRateLimits`) and every
   * consume is one IPC round trip to it, so a key's limit holds exactly across the processes.
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
        : options.cluster
          ? // The primary creates a counter per keyPrefix on the first worker's init; same prefix, same counters.
            new RateLimiterCluster({ ...base, timeoutMs: CLUSTER_TIMEOUT_MS })
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

/** How long a worker waits for the primary's answer before the request fails (the primary is local and does nothing else). */
const CLUSTER_TIMEOUT_MS = 5000;

/**
 * In the node:cluster primary: holds the rate-limit counters of every worker's `createRateLimiter({ cluster: true })`
 * (rate-limiter-flexible's RateLimiterClusterMaster, one per process, answering over the workers' IPC channels).
 */
export function holdClusterRateLimits(): void {
  new RateLimiterClusterMaster();
}

/** OpenAI's duration form for `x-ratelimit-reset-requests`: `120ms`, `12s`, `1m30s`. */
export function formatResetDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const totalSeconds = Math.ceil(ms / 1000);
  const minutes = Math.floor(totalSeconds / 60);
  const seconds = totalSeconds % 60;
  return minutes > 0 ? `${minutes}m${seconds}s` : `${seconds}s`;
}
