import { describe, expect, it } from 'vitest';
import { claimedDelivery } from './claimed-delivery.js';
import { createDeduper } from './deduper.js';

/** A deduper with `id` claimed, and the claim to follow. */
async function claimed(id = 'whd_1') {
  const dedupe = createDeduper();
  expect(await dedupe.claim(id)).toBe(true);
  return { dedupe, claim: claimedDelivery(dedupe, id) };
}

describe('claimedDelivery', () => {
  it('answered with a 2xx: processed, a later drop changes nothing', async () => {
    const { dedupe, claim } = await claimed();
    await claim.settled(true);
    claim.dropped();
    expect(dedupe.processing('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_1')).toBe(false);
  });

  it('answered with a failure: released, the retry is processed', async () => {
    const { dedupe, claim } = await claimed();
    await claim.settled(false);
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('dropped before an answer: released at once, so the retry is processed instead of 409', async () => {
    const { dedupe, claim } = await claimed();
    claim.dropped();
    expect(dedupe.processing('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('dropped, then a late 2xx: recorded as processed again, so svc\'s next retry is a duplicate', async () => {
    const { dedupe, claim } = await claimed();
    claim.dropped();
    await claim.settled(true);
    expect(dedupe.processing('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_1')).toBe(false);
  });

  it('dropped, then a late 2xx after a retry claimed the id: the retry keeps its claim (still in progress)', async () => {
    const { dedupe, claim } = await claimed();
    claim.dropped();
    expect(await dedupe.claim('whd_1')).toBe(true);
    await claim.settled(true);
    expect(dedupe.processing('whd_1')).toBe(true);
  });

  it('dropped, then a late failure: stays released', async () => {
    const { dedupe, claim } = await claimed();
    claim.dropped();
    await claim.settled(false);
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('a release the store refuses on a drop is not thrown; the id stays claimed until its TTL', async () => {
    const dedupe = createDeduper({ store: { setIfAbsent: () => true, delete: () => Promise.reject(new Error('store down')) } });
    await dedupe.claim('whd_1');
    const claim = claimedDelivery(dedupe, 'whd_1');
    expect(() => claim.dropped()).not.toThrow();
    await expect(claim.settled(false)).resolves.toBeUndefined();
  });
});
