import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';
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
}

/**
 * A limiter counted in Redis, shared by every instance, with an in-memory insurance limiter that takes over
 * while Redis is unreachable: a Redis outage fails open to per-instance counts instead of refusing traffic.
 *
 * @example
 * const perAccount = redisLimiter({ keyPrefix: 'svc:signin:account', points: 20, duration: 600 }, redis);
 */
export function redisLimiter(limit: { keyPrefix: string; points: number; duration: number }, redis: Redis): RateLimiterAbstract {
  return new RateLimiterRedis({ ...limit, storeClient: redis, useRedisPackage: false, insuranceLimiter: new RateLimiterMemory(limit) });
}

/**
 * Per-key requests-per-minute limits. In memory for one instance; through Redis (shared by every instance)
 * when a client is given, with an in-memory insurance limiter that takes over while Redis is unreachable —
 * so a Redis outage fails open to per-instance limits instead of refusing traffic. (The workers of a
 * multi-process server without Redis count in the primary: `ClusterRateLimiter`.)
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
      limiter = options.redis ? redisLimiter(base, options.redis) : new RateLimiterMemory(base);
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
