import { describe, expect, it } from 'vitest';
import { LATENCY_BOUNDS_MS, LATENCY_COLUMNS, latencyBucket, latencyQuantile } from '../../../src/storage/usage-latency.js';

describe('latency buckets', () => {
  it('one column per bound and one for slower', () => {
    expect(LATENCY_COLUMNS).toHaveLength(LATENCY_BOUNDS_MS.length + 1);
  });

  it.each([
    [0, 0],
    [100, 0],
    [101, 1],
    [999, 3],
    [30_000, 7],
    [30_001, 8],
  ])('%i ms falls in bucket %i', (ms, bucket) => {
    expect(latencyBucket(ms)).toBe(bucket);
  });

  it('quantiles are the bound of the bucket they fall in', () => {
    const histogram = [10, 0, 0, 9, 0, 0, 1, 0, 0];
    expect(latencyQuantile(histogram, 0.5)).toBe(100);
    expect(latencyQuantile(histogram, 0.95)).toBe(1000);
    expect(latencyQuantile(histogram, 0.99)).toBe(10_000);
    expect(latencyQuantile([0, 0, 0, 0, 0, 0, 0, 0, 2], 0.5)).toBe(Infinity);
    expect(latencyQuantile([0, 0, 0, 0, 0, 0, 0, 0, 0], 0.5)).toBeNull();
  });
});
