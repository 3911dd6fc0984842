import type { DedupeStore } from '@svc/verify';
import type { Redis } from 'ioredis';

/** The ids in Redis, shared by every receiver process: `SET NX EX` claims an id atomically. */
export function redisDedupeStore(redis: Redis, prefix = 'svc:delivery:'): DedupeStore {
  return {
    setIfAbsent: async (id, ttlSeconds) => (await redis.set(prefix + id, '1', 'EX', ttlSeconds, 'NX')) === 'OK',
    delete: async (id) => void (await redis.del(prefix + id)),
  };
}
