import { describe, expect, it } from 'vitest';
import { IDLE_REFRESH_MS, detailRefreshMs, nextRefreshMs } from './delivery-refresh.js';

const now = Date.parse('2026-11-24T12:00:00Z');
const at = (ms: number) => new Date(now + ms).toISOString();

describe('nextRefreshMs', () => {
  it('looks again every 5 s when nothing is pending, so new deliveries appear without a click', () => {
    expect(nextRefreshMs([], now)).toBe(IDLE_REFRESH_MS);
    expect(nextRefreshMs([{ status: 'delivered', attempts: 1, next_attempt_at: null }, { status: 'failed', attempts: 8, next_attempt_at: null }], now)).toBe(5_000);
  });

  it('looks again soon while a pending delivery has not been tried', () => {
    expect(nextRefreshMs([{ status: 'pending', attempts: 2, next_attempt_at: at(60_000) }, { status: 'pending', attempts: 0, next_attempt_at: at(0) }], now)).toBe(1_500);
  });

  it('follows the earliest next attempt, one second after it', () => {
    const rows = [
      { status: 'pending' as const, attempts: 1, next_attempt_at: at(9_000) },
      { status: 'pending' as const, attempts: 3, next_attempt_at: at(5_000) },
    ];
    expect(nextRefreshMs(rows, now)).toBe(IDLE_REFRESH_MS);
    const soon = [
      { status: 'pending' as const, attempts: 1, next_attempt_at: at(2_000) },
      { status: 'pending' as const, attempts: 3, next_attempt_at: at(3_500) },
    ];
    expect(nextRefreshMs(soon, now)).toBe(3_000);
  });

  it('stays between 2 and 5 seconds', () => {
    expect(nextRefreshMs([{ status: 'pending', attempts: 1, next_attempt_at: at(-10_000) }], now)).toBe(2_000);
    expect(nextRefreshMs([{ status: 'pending', attempts: 1, next_attempt_at: null }], now)).toBe(2_000);
    expect(nextRefreshMs([{ status: 'pending', attempts: 1, next_attempt_at: 'not a time' }], now)).toBe(2_000);
    expect(nextRefreshMs([{ status: 'pending', attempts: 4, next_attempt_at: at(3_600_000) }], now)).toBe(5_000);
  });
});

describe('detailRefreshMs', () => {
  it('follows a pending delivery until it is finished: its first attempt, a redelivery due now, a retry when due', () => {
    expect(detailRefreshMs({ status: 'delivered', attempts: 2, next_attempt_at: null }, now)).toBeNull();
    expect(detailRefreshMs({ status: 'failed', attempts: 8, next_attempt_at: null }, now)).toBeNull();
    expect(detailRefreshMs({ status: 'pending', attempts: 0, next_attempt_at: at(0) }, now)).toBe(1_500);
    expect(detailRefreshMs({ status: 'pending', attempts: 1, next_attempt_at: at(0) }, now)).toBe(2_000);
    expect(detailRefreshMs({ status: 'pending', attempts: 3, next_attempt_at: at(5 * 3600_000) }, now)).toBe(5 * 3600_000 + 1_000);
    expect(detailRefreshMs({ status: 'pending', attempts: 3, next_attempt_at: null }, now)).toBe(2_000);
  });

  it('waits for a retry weeks away without the timer firing at once (it fires at once past 2^31 - 1 ms)', () => {
    const weeks = detailRefreshMs({ status: 'pending', attempts: 1, next_attempt_at: at(30 * 86_400_000) }, now)!;
    expect(weeks).toBeLessThanOrEqual(2 ** 31 - 1);
    expect(weeks).toBeGreaterThan(20 * 86_400_000);
  });
});
