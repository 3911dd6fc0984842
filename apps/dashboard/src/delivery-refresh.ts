import type { DashboardDelivery } from '@svc/protocol';

/** How often a view of deliveries (a list, a key's Last delivery) looks again: new deliveries appear without a click. */
export const IDLE_REFRESH_MS = 5_000;

/**
 * How long until a list of deliveries should load again: 1.5 s while a pending one has not been tried yet (its
 * first attempt is under way), one second after the earliest next attempt of a pending one, and at least every
 * IDLE_REFRESH_MS whatever is pending (new deliveries arrive on their own), never sooner than 2 s otherwise.
 */
export function nextRefreshMs(rows: Pick<DashboardDelivery, 'status' | 'attempts' | 'next_attempt_at'>[], now: number): number {
  const pending = rows.filter((d) => d.status === 'pending');
  if (pending.length === 0) return IDLE_REFRESH_MS;
  if (pending.some((d) => d.attempts === 0)) return 1_500;
  // A missing or unreadable time counts as due now (never NaN, which would make the timer fire at once, forever).
  const due = Math.min(...pending.map((d) => Date.parse(d.next_attempt_at ?? '') || now));
  return Math.min(IDLE_REFRESH_MS, Math.max(2_000, due - now + 1_000));
}
