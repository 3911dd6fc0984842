import { randomFillSync } from 'node:crypto';

const pool = Buffer.allocUnsafe(4096);
let offset = pool.length;

/**
 * `bytes` random bytes (at most 4,096) as `encoding` text, cut from a pool that `randomFillSync` refills when
 * it runs low: one call into the CSPRNG per few hundred ids instead of one each, on the request path.
 *
 * @example
 * const id = `chatcmpl-${pooledRandom(18, 'base64url')}`;
 */
export function pooledRandom(bytes: number, encoding: 'hex' | 'base64url'): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const text = pool.toString(encoding, offset, offset + bytes);
  offset += bytes;
  return text;
}
