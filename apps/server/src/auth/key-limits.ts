import type { Config } from '../config.js';
import { ApiError } from '../http/errors.js';
import type { KeysStore } from '../storage/keys-store.js';

/**
 * A key's own rate limit as a user or admin sets it: a whole number from 1 to SVC_MAX_KEY_RATE_LIMIT_RPM,
 * or null/empty for the server default. Throws a 400 ApiError (param `rate_limit_rpm`) otherwise.
 *
 * @example
 * patch.rate_limit_rpm = keyRateLimit(body.rate_limit_rpm, config.limits);
 */
export function keyRateLimit(value: unknown, limits: Config['limits']): number | null {
  if (value === null || value === '' || value === undefined) return null;
  const max = limits.maxKeyRateLimitRpm;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new ApiError(
      'invalid_value',
      `The rate limit must be a whole number from 1 to ${max.toLocaleString('en')} requests per minute (SVC_MAX_KEY_RATE_LIMIT_RPM), or empty for the default.`,
      { param: 'rate_limit_rpm' },
    );
  }
  return value;
}

/**
 * Runs `create` only while `userId` holds fewer than SVC_MAX_KEYS_PER_USER active keys; a 400 ApiError
 * otherwise. Creations for one user run one at a time in this process, so concurrent requests cannot all
 * pass the count before any of them inserts.
 *
 * @example
 * const key = await quota.create(user.id, () => store.keys.create({ … }));
 */
export class KeyQuota {
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly keys: KeysStore,
    private readonly limits: Config['limits'],
  ) {}

  create<T>(userId: string, create: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(userId) ?? Promise.resolve();
    const run = previous.then(async () => {
      const active = await this.keys.countActive(userId);
      if (active >= this.limits.maxKeysPerUser) {
        throw new ApiError(
          'invalid_request',
          `This user already has ${active} active API keys, the most allowed (SVC_MAX_KEYS_PER_USER=${this.limits.maxKeysPerUser}). Revoke a key first.`,
        );
      }
      return create();
    });
    const settled = run.catch(() => undefined);
    this.queues.set(userId, settled);
    void settled.then(() => {
      if (this.queues.get(userId) === settled) this.queues.delete(userId);
    });
    return run;
  }
}
