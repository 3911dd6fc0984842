/** Milliseconds in a (UTC) day: usage days, retention, the longest Retry-After honoured. */
export const DAY_MS = 86_400_000;

/**
 * A stored time (epoch milliseconds) as the APIs show it: ISO 8601 UTC with milliseconds and `Z`.
 *
 * @example
 * isoTime(0); // '1970-01-01T00:00:00.000Z'
 */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

/** `isoTime` for a time that may be unset. */
export function isoTimeOrNull(ms: number | null): string | null {
  return ms === null ? null : isoTime(ms);
}

/**
 * The UTC day holding `ms`, as usage rows are keyed.
 *
 * @example
 * utcDay(DAY_MS + 1); // '1970-01-02'
 */
export function utcDay(ms: number): string {
  return isoTime(ms).slice(0, 10);
}
