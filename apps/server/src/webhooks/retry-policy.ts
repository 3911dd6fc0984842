import type { AttemptNext } from '../storage/outbox-store.js';
import type { AttemptOutcome } from './sender.js';
import { DAY_MS } from '../time.js';

/** A Retry-After longer than this is treated as this (a receiver cannot park a delivery for a month). */
const MAX_RETRY_AFTER_MS = DAY_MS;

export interface RetryPolicy {
  /** SVC_WEBHOOK_RETRY_SCHEDULE: the delays after attempt 1, 2, … */
  scheduleMs: number[];
  /** Random in [0, 1) for the jitter; tests may fix it. */
  random: () => number;
}

/** The delay before retry number `retry` (1-based) with ±20 % jitter, or undefined once the schedule is spent. */
export function retryDelay(scheduleMs: number[], retry: number, random: () => number = Math.random): number | undefined {
  const base = scheduleMs[retry - 1];
  if (base === undefined) return undefined;
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * What a delivery becomes after attempt number `attempt` made at `now`: delivered on a 2xx; else pending
 * until the next retry of the schedule (or the receiver's longer Retry-After), failed once the schedule is
 * spent or when `retries` is false (a test send).
 *
 * @example
 * nextStep({ scheduleMs: [5000], random: Math.random }, outcome, 1, Date.now(), true) // { status: 'pending', nextAttemptAt: … }
 */
export function nextStep(policy: RetryPolicy, outcome: AttemptOutcome, attempt: number, now: number, retries: boolean): AttemptNext {
  if (outcome.ok) return { status: 'delivered' };
  const delay = retries ? retryDelay(policy.scheduleMs, attempt, policy.random) : undefined;
  if (delay === undefined) return { status: 'failed' };
  const retryAfter = Math.min(outcome.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS);
  return { status: 'pending', nextAttemptAt: now + Math.max(delay, retryAfter) };
}
