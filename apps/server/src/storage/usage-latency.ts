/**
 * Latency is counted per day in fixed buckets, so percentiles can be summed across keys and days and
 * stored as plain counters on SQLite and Postgres alike. A bucket holds the requests that took at most
 * its bound (and more than the previous one); the last one everything slower than 30 s.
 */
export const LATENCY_BOUNDS_MS = [100, 250, 500, 1000, 2500, 5000, 10_000, 30_000] as const;

export const LATENCY_COLUMNS = [
  'latency_0',
  'latency_1',
  'latency_2',
  'latency_3',
  'latency_4',
  'latency_5',
  'latency_6',
  'latency_7',
  'latency_8',
] as const;

export type LatencyColumn = (typeof LATENCY_COLUMNS)[number];

/** The bucket index of one request's latency. */
export function latencyBucket(ms: number): number {
  const index = LATENCY_BOUNDS_MS.findIndex((bound) => ms <= bound);
  return index === -1 ? LATENCY_BOUNDS_MS.length : index;
}

/**
 * The upper bound of the bucket holding the `q` quantile (0.5 → p50), or null without requests;
 * `Infinity` when it falls in the last, open bucket.
 *
 * @example
 * latencyQuantile([0, 3, 1, 0, 0, 0, 0, 0, 0], 0.5); // 250
 */
export function latencyQuantile(histogram: readonly number[], q: number): number | null {
  const total = histogram.reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = Math.ceil(q * total);
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i] ?? 0;
    if (seen >= rank) return LATENCY_BOUNDS_MS[i] ?? Infinity;
  }
  return Infinity;
}
