import { describe, expect, it } from 'vitest';
import { pooledRandom } from '../../../src/crypto/random-pool.js';

describe('pooledRandom', () => {
  it('gives text of the asked length in the asked encoding', () => {
    expect(pooledRandom(10, 'hex')).toMatch(/^[0-9a-f]{20}$/);
    expect(pooledRandom(18, 'base64url')).toMatch(/^[A-Za-z0-9_-]{24}$/);
  });

  it('never hands out the same bytes twice, across several refills of the pool', () => {
    // 4,096-byte pool / 18 bytes per id: 2,000 ids span ~9 refills, including ids that would straddle the end.
    const ids = Array.from({ length: 2_000 }, () => pooledRandom(18, 'hex'));
    expect(new Set(ids).size).toBe(ids.length);
  });
});
