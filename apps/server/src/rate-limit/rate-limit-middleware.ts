import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../http/errors.js';
import { apiKeyOf } from '../auth/bearer-auth.js';
import { formatResetDuration, type RateLimiter } from './rate-limiter.js';

/** Per-key limit (the key's own, else the default); sets OpenAI's x-ratelimit-* headers on every response. */
export function rateLimit(deps: { limiter: RateLimiter; defaultRpm: number }) {
  return async (_req: Request, res: Response, next: NextFunction) => {
    const key = apiKeyOf(res);
    const decision = await deps.limiter.consume(key.id, key.rate_limit_rpm ?? deps.defaultRpm);
    res.setHeader('x-ratelimit-limit-requests', String(decision.limit));
    res.setHeader('x-ratelimit-remaining-requests', String(decision.remaining));
    res.setHeader('x-ratelimit-reset-requests', formatResetDuration(decision.resetMs));
    if (!decision.allowed) {
      throw new ApiError(
        'rate_limit_exceeded',
        `Rate limit reached: ${decision.limit} requests per minute for this API key. Retry after ${formatResetDuration(decision.resetMs)}.`,
        { headers: { 'retry-after': String(Math.max(1, Math.ceil(decision.resetMs / 1000))) } },
      );
    }
    next();
  };
}
