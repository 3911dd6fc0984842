import type { ServerResponse } from 'node:http';
import { ApiError } from '../http/errors.js';
import { retryAfterHeaders } from '../http/retry-after.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { RateLimiter } from './rate-limiter.js';

/**
 * Which of a key's limits a request counts against: `api` (chat, responses, models: the key's limit) or
 * `webhooks` (the deliveries API and the test endpoint: a bucket of their own, so a key busy at its chat limit
 * can still inspect and recover its deliveries).
 */
export type RateLimitBucket = 'api' | 'webhooks';

/** The webhooks bucket's limit is the key's, but never below this (requests per minute). */
export const WEBHOOKS_MIN_RPM = 600;

/** Consumes one request of `key`'s limit; sets `x-ratelimit-*` on `res` and throws 429 when over it. */
export type ApplyRateLimit = (key: ApiKeyRecord, res: ServerResponse, bucket?: RateLimitBucket) => Promise<void>;

/**
 * Per-key limit (the key's own, else the default); sets OpenAI's x-ratelimit-* headers on every response.
 *
 * @example
 * const applyLimit = createRateLimit({ limiter, defaultRpm: 600 }); await applyLimit(key, res);
 */
export function createRateLimit(deps: { limiter: RateLimiter; defaultRpm: number }): ApplyRateLimit {
  return async (key, res, bucket = 'api') => {
    const rpm = key.rate_limit_rpm ?? deps.defaultRpm;
    const decision =
      bucket === 'api' ? await deps.limiter.consume(key.id, rpm) : await deps.limiter.consume(`${key.id}:${bucket}`, Math.max(rpm, WEBHOOKS_MIN_RPM));
    res.setHeader('x-ratelimit-limit-requests', String(decision.limit));
    res.setHeader('x-ratelimit-remaining-requests', String(decision.remaining));
    res.setHeader('x-ratelimit-reset-requests', formatResetDuration(decision.resetMs));
    if (!decision.allowed) {
      throw new ApiError(
        'rate_limit_exceeded',
        `Rate limit reached: ${decision.limit} requests per minute for this API key. Retry after ${formatResetDuration(decision.resetMs)}.`,
        { headers: retryAfterHeaders(decision.resetMs) },
      );
    }
  };
}

/** OpenAI's duration form for `x-ratelimit-reset-requests`: `120ms`, `12s`, `1m30s`. */
function formatResetDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const totalSeconds = Math.ceil(ms / 1000);
  const minutes = Math.floor(totalSeconds / 60);
  const seconds = totalSeconds % 60;
  return minutes > 0 ? `${minutes}m${seconds}s` : `${seconds}s`;
}
