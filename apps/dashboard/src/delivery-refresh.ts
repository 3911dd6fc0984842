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

/**
 * When an open delivery's details should load again, or null: never once it is finished; while it is pending, once
 * its attempt has had time — its first 1.5 s on, a retry (or a redelivery, due now) a second after it is due, at
 * least 2 s apart. The details carry the whole payload, so a retry hours away is not asked about every few seconds.
 */
export function detailRefreshMs(d: Pick<DashboardDelivery, 'status' | 'attempts' | 'next_attempt_at'>, now: number): number | null {
  if (d.status !== 'pending') return null;
  if (d.attempts === 0) return 1_500;
  const due = Date.parse(d.next_attempt_at ?? '') || now;
  return Math.min(LONGEST_TIMER_MS, Math.max(2_000, due - now + 1_000));
}

/**
 * The longest delay a timer keeps: past it (about 24.8 days) setTimeout fires at once. A retry weeks away (a
 * retry schedule's step in days, SVC_WEBHOOK_RETRY_SCHEDULE, with its jitter) then reloaded the details, payload
 * and all, in a loop for as long as they were open.
 */
const LONGEST_TIMER_MS = 2 ** 31 - 1;
