import { describe, expect, it } from 'vitest';
import { nextStep, retryDelay } from '../../../src/webhooks/retry-policy.js';
import type { AttemptOutcome } from '../../../src/webhooks/sender.js';

const T0 = 1_700_000_000_000;
const policy = { scheduleMs: [5_000, 300_000], random: () => 0.5 };
const ok: AttemptOutcome = { ok: true, statusCode: 200, durationMs: 5, error: null, responseBody: '' };
const failed = (retryAfterMs?: number): AttemptOutcome => ({
  ok: false,
  kind: 'http',
  code: 'SVC_WEBHOOK_HTTP_STATUS',
  statusCode: 503,
  durationMs: 5,
  error: 'HTTP 503',
  responseBody: '',
  ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
});

describe('retry policy', () => {
  it('jitters each delay by ±20 % and ends with the schedule', () => {
    expect(retryDelay([1_000], 1, () => 0)).toBe(800);
    expect(retryDelay([1_000], 1, () => 0.999_999)).toBe(1_200);
    expect(retryDelay([1_000], 2, () => 0.5)).toBeUndefined();
  });

  const steps: Array<[string, AttemptOutcome, number, boolean, ReturnType<typeof nextStep>]> = [
    ['a 2xx is delivered', ok, 1, true, { status: 'delivered' }],
    ['a failure waits for the next delay of the schedule', failed(), 1, true, { status: 'pending', nextAttemptAt: T0 + 5_000 }],
    ['a longer Retry-After wins', failed(60_000), 1, true, { status: 'pending', nextAttemptAt: T0 + 60_000 }],
    ['a shorter Retry-After does not', failed(1_000), 2, true, { status: 'pending', nextAttemptAt: T0 + 300_000 }],
    ['a Retry-After is capped at a day', failed(90 * 86_400_000), 1, true, { status: 'pending', nextAttemptAt: T0 + 86_400_000 }],
    ['the schedule spent: failed', failed(), 3, true, { status: 'failed' }],
    ['no retries (a test send): failed at once', failed(), 1, false, { status: 'failed' }],
  ];

  it.each(steps)('%s', (_name, outcome, attempt, retries, expected) => {
    expect(nextStep(policy, outcome, attempt, T0, retries)).toEqual(expected);
  });
});
