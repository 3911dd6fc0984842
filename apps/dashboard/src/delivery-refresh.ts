import type { DashboardDelivery } from '@svc/protocol';

/**
 * How long until a list of deliveries should load again to follow its pending rows, or null when none is
 * pending: 1.5 s while one has not been tried yet (its first attempt is under way), else one second after the
 * earliest next attempt, kept between 2 and 30 seconds.
 */
export function nextRefreshMs(rows: Pick<DashboardDelivery, 'status' | 'attempts' | 'next_attempt_at'>[], now: number): number | null {
  const pending = rows.filter((d) => d.status === 'pending');
  if (pending.length === 0) return null;
  if (pending.some((d) => d.attempts === 0)) return 1_500;
  // A missing or unreadable time counts as due now (never NaN, which would make the timer fire at once, forever).
  const due = Math.min(...pending.map((d) => Date.parse(d.next_attempt_at ?? '') || now));
  return Math.min(30_000, Math.max(2_000, due - now + 1_000));
}
