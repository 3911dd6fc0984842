import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkGrounding, SourceIndexCache } from './index.js';

const SOURCE = [
  'Items bought during the winter clearance sale can be returned within 30 days and are refunded as store credit only.',
  'Return shipping is free for members of the Northwind Trail Club; other customers pay a flat fee of 6.95 dollars.',
  'Refunds are issued within 5 business days after the warehouse in Reno, Nevada receives and inspects the parcel.',
].join(' ');
const ANSWER = [
  'Sale items can be returned within 30 days, and they are refunded as store credit only.',
  'Return shipping is free for Trail Club members; others pay a flat fee of 6.95 dollars.',
  'Northwind also offers a lifetime warranty on all hiking boots.',
].join(' ');

/** `count` sentences of their own, each naming its number: sources far larger than a chat's. */
function manySentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `Parcel ${i + 1} left the warehouse in Reno on day ${i + 2}.`).join(' ');
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the passage search buffers', () => {
  it('are not made anew for each check: a repeated check with a cached index makes no typed array', () => {
    const cache = new SourceIndexCache();
    const input = { sources: [SOURCE], answer: ANSWER, question: 'Can I return sale items?' };
    const first = checkGrounding(input, { sourceIndexCache: cache });
    const made = vi.spyOn(globalThis, 'Int32Array');
    const again = checkGrounding(input, { sourceIndexCache: cache });
    expect(made).not.toHaveBeenCalled();
    expect(again).toEqual(first);
  });

  it('give the same results whatever checks ran before, larger or smaller, and however many claims', () => {
    const input = { sources: [SOURCE], answer: ANSWER, question: 'Can I return sale items?' };
    const alone = checkGrounding(input);
    const large = { sources: [manySentences(6000)], answer: 'Parcel 4000 left the warehouse in Reno on day 4001. Parcel 12 left Boise on day 99.' };
    const largeAlone = checkGrounding(large);
    expect(largeAlone.checked).toBe(true);
    expect(largeAlone.claims).toHaveLength(2);
    // Small after large (the buffers sized for 6,000 sentences are let go), large after small, again and again.
    for (let i = 0; i < 3; i++) {
      expect(checkGrounding(input)).toEqual(alone);
      expect(checkGrounding(large)).toEqual(largeAlone);
    }
  });
});
