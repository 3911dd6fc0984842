import { afterEach, describe, expect, it, vi } from 'vitest';
import { assertDropGraceMs, claimedDelivery, DEFAULT_DROP_GRACE_MS } from './claimed-delivery.js';
import { createDeduper, type DedupeStore } from './deduper.js';

const GRACE = 60_000;

/** A deduper with `id` claimed, and the claim to follow. */
async function claimed(id = 'whd_1', store?: DedupeStore) {
  const dedupe = createDeduper({ store });
  expect(await dedupe.claim(id)).toBe(true);
  return { dedupe, claim: claimedDelivery(dedupe, id, GRACE) };
}

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('claimedDelivery', () => {
  it('answered with a 2xx: processed, a later drop changes nothing', async () => {
    vi.useFakeTimers();
    const { dedupe, claim } = await claimed();
    await claim.settled(true);
    claim.dropped();
    expect(vi.getTimerCount()).toBe(0);
    expect(dedupe.processing('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_1')).toBe(false);
  });

  it('answered with a failure: released, the retry is processed', async () => {
    const { dedupe, claim } = await claimed();
    await claim.settled(false);
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('dropped before an answer: still in progress for the grace period (a retry meanwhile is a duplicate, answered 409), released after it', async () => {
    vi.useFakeTimers();
    const { dedupe, claim } = await claimed();
    claim.dropped();
    claim.dropped(); // a second close changes nothing: one timer
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(GRACE - 1);
    expect(dedupe.processing('whd_1')).toBe(true);
    expect(await dedupe.claim('whd_1')).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(dedupe.processing('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('dropped, then a 2xx within the grace period: processed as if svc had waited, the timer cleared', async () => {
    vi.useFakeTimers();
    const { dedupe, claim } = await claimed();
    claim.dropped();
    await vi.advanceTimersByTimeAsync(GRACE / 2);
    await claim.settled(true);
    expect(vi.getTimerCount()).toBe(0);
    expect(dedupe.processing('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_1')).toBe(false);
  });

  it('dropped, then a failure within the grace period: released at once, the timer cleared', async () => {
    vi.useFakeTimers();
    const { dedupe, claim } = await claimed();
    claim.dropped();
    await claim.settled(false);
    expect(vi.getTimerCount()).toBe(0);
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('dropped, then a 2xx after the grace period: recorded as processed again, so svc\'s next retry is a duplicate', async () => {
    vi.useFakeTimers();
    const { dedupe, claim } = await claimed();
    claim.dropped();
    await vi.advanceTimersByTimeAsync(GRACE);
    await claim.settled(true);
    expect(dedupe.processing('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_1')).toBe(false);
  });

  it('dropped, then a 2xx after the grace period and after a retry claimed the id: the retry keeps its claim (still in progress)', async () => {
    vi.useFakeTimers();
    const { dedupe, claim } = await claimed();
    claim.dropped();
    await vi.advanceTimersByTimeAsync(GRACE);
    expect(await dedupe.claim('whd_1')).toBe(true);
    await claim.settled(true);
    expect(dedupe.processing('whd_1')).toBe(true);
  });

  it('dropped, then a failure after the grace period: stays released', async () => {
    vi.useFakeTimers();
    const { dedupe, claim } = await claimed();
    claim.dropped();
    await vi.advanceTimersByTimeAsync(GRACE);
    await claim.settled(false);
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('a release the store refuses after the grace period is not thrown; the id stays claimed until its TTL', async () => {
    vi.useFakeTimers();
    const { claim } = await claimed('whd_1', { setIfAbsent: () => true, delete: () => Promise.reject(new Error('store down')) });
    claim.dropped();
    await vi.advanceTimersByTimeAsync(GRACE);
    await expect(claim.settled(false)).resolves.toBeUndefined();
  });

  it('does not keep the process alive while the grace period runs', async () => {
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    const { claim } = await claimed();
    claim.dropped();
    const timer = setTimeoutSpy.mock.results[0]!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    await claim.settled(true);
  });

  it('caps a grace period longer than a timer can wait (setTimeout would fire at once)', async () => {
    vi.useFakeTimers();
    const dedupe = createDeduper();
    await dedupe.claim('whd_1');
    claimedDelivery(dedupe, 'whd_1', 1e12).dropped();
    await vi.advanceTimersByTimeAsync(1000);
    expect(dedupe.processing('whd_1')).toBe(true);
    await vi.advanceTimersByTimeAsync(2 ** 31);
    expect(dedupe.processing('whd_1')).toBe(false);
  });
});

describe('assertDropGraceMs', () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, '60000', null])('rejects %s', (ms) => {
    expect(() => assertDropGraceMs(ms)).toThrow(new TypeError('[@svc/verify] dropGraceMs must be a positive number of milliseconds.'));
  });

  it.each([1, 0.5, DEFAULT_DROP_GRACE_MS])('accepts %s', (ms) => {
    expect(() => assertDropGraceMs(ms)).not.toThrow();
  });

  it('defaults to 60 s', () => {
    expect(DEFAULT_DROP_GRACE_MS).toBe(60_000);
  });
});
