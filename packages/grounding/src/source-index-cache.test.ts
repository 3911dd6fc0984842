import { describe, expect, it } from 'vitest';
import { checkGrounding, SourceIndexCache } from './index.js';

const OBEROI = 'The Oberoi family is an Indian family famous for its hotels. The Oberoi Group is a hotel company with its head office in Delhi.';
const POSEIDON = 'Poseidon (film). Poseidon grossed $ 181,674,817 at the worldwide box office on a budget of $ 160 million.';

describe('SourceIndexCache', () => {
  it('gives the same results as a fresh index, on a hit and on a miss', () => {
    const cache = new SourceIndexCache();
    const cases = [
      { sources: [OBEROI], answer: 'Mumbai, the financial capital of India.', question: 'Where is the head office of the Oberoi Group?' },
      { sources: [OBEROI], answer: 'The head office of the Oberoi Group is in Delhi.' },
      { sources: [POSEIDON], answer: 'Poseidon grossed $181.7 million worldwide on a $160 million budget.' },
      { sources: [OBEROI, POSEIDON], answer: 'Poseidon grossed $200 million; the Oberoi Group is based in Delhi.' },
    ];
    for (let round = 0; round < 2; round++) {
      for (const input of cases) expect(checkGrounding(input, { sourceIndexCache: cache })).toEqual(checkGrounding(input));
    }
    expect(cache.size).toBe(3);
  });

  it('keys by the exact list of sources (no two lists share an entry)', () => {
    const cache = new SourceIndexCache();
    expect(cache.get(['ab', 'c'])).not.toBe(cache.get(['a', 'bc']));
    expect(cache.get(['a\u0000b'])).not.toBe(cache.get(['a', 'b']));
    expect(cache.get([OBEROI])).toBe(cache.get([OBEROI]));
  });

  it('drops the least recently used entry beyond its entry and character budgets', () => {
    const cache = new SourceIndexCache(2, 10_000);
    const a = cache.get(['Alpha is a letter.']);
    cache.get(['Beta is a letter.']);
    expect(cache.get(['Alpha is a letter.'])).toBe(a); // a is now the most recent
    cache.get(['Gamma is a letter.']); // evicts beta
    expect(cache.size).toBe(2);
    expect(cache.get(['Alpha is a letter.'])).toBe(a);
    const big = 'Delta is a letter. '.repeat(200); // ~3,800 characters: over a quarter of the budget, not kept
    expect(cache.get([big])).not.toBe(cache.get([big]));
    expect(cache.size).toBe(2);
  });

  it('serves a repeated list from its entry, and a list changed in place from its own', () => {
    const cache = new SourceIndexCache();
    const sources = [OBEROI];
    const oberoi = cache.get(sources);
    expect(cache.get([OBEROI.slice(0, 20) + OBEROI.slice(20)])).toBe(oberoi); // equal text, another string
    sources[0] = POSEIDON;
    const poseidon = cache.get(sources);
    expect(poseidon).not.toBe(oberoi);
    expect(cache.get([POSEIDON])).toBe(poseidon);
    expect(cache.get([OBEROI])).toBe(oberoi);
    expect(cache.size).toBe(2);
  });
});
