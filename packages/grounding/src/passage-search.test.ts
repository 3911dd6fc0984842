import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkGrounding, SourceIndexCache } from './index.js';
import { MAX_POSTING } from './support.js';

// The passage search at its edges: claims of more terms than one 32-bit mask holds, words in more sentences
// than a posting is read for, negations and quantifiers that a sentence holds without a posting, and an index
// merged from cached parts. Each case is one the search must get right whatever its bookkeeping.

const WORDS = ['granite', 'ferry', 'orchard', 'lantern', 'meadow', 'copper', 'violin', 'harvest', 'glacier', 'tunnel', 'falcon', 'saddle'];

/** `n` sentences that all hold `common` and two other words, none of which the claims below use together. */
function crowd(common: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `The ${common} stood beside the ${WORDS[i % WORDS.length]} near the ${WORDS[(i * 7 + 3) % WORDS.length]}.`);
}

const LONG_CLAIM =
  'The harbour commission of Valletta approved forty granite breakwaters, nineteen copper lighthouses, seven timber ' +
  'warehouses, twelve customs sheds, three dry docks, two coal wharves, a signal tower, a quarantine station, a ' +
  'ferry terminal, an orchard garden, a lantern museum, a meadow park, a violin school, a harvest market, a glacier ' +
  'exhibit, a tunnel entrance and a falcon aviary in 1907.';

describe('the passage search at its edges', () => {
  it('finds the one sentence that holds a claim of over 32 terms among 1,200 sharing its words', () => {
    const sources = [[...crowd('harbour', 600), LONG_CLAIM, ...crowd('harbour', 600)].join(' ')];
    const result = checkGrounding({ sources, answer: LONG_CLAIM });
    expect(result.grounded).toBe(true);
    expect(result.claims[0]!.evidence?.text).toBe(LONG_CLAIM);
  });

  it(`finds the sentence of a word in more than ${MAX_POSTING} sentences by the claim's other words`, () => {
    const target = 'The harbour of Valletta opened twelve piers in 1907.';
    const sources = [[...crowd('harbour', MAX_POSTING + 200), target].join(' ')];
    const result = checkGrounding({ sources, answer: target });
    expect(result.grounded).toBe(true);
    expect(result.claims[0]!.evidence?.text).toBe(target);
  });

  it('tells a claim that drops the negation of its sentence from the copy, among many sentences of its words', () => {
    const negated = 'The lantern museum is not open on Mondays.';
    const sources = [[...crowd('museum', MAX_POSTING + 200), negated, 'Every lantern museum opens on Tuesdays.'].join(' ')];
    const copy = checkGrounding({ sources, answer: negated });
    const dropped = checkGrounding({ sources, answer: 'The lantern museum is open on Mondays.' });
    expect(copy.grounded).toBe(true);
    expect(copy.claims[0]!.evidence?.text).toContain(negated);
    expect(dropped.score).toBeLessThan(copy.score);
  });

  // A run-on sentence that says the same few words hundreds of times (an upstream stuck in a loop) was charged
  // its passage search once per word written: it spent the whole budget, and a sentence copied from the sources
  // after it got no evidence and was flagged (0.444). Its repeats now cost what its distinct words do (a 16 KB
  // run-on sentence against 100 KB of sources: 88 ms before, 5 ms after; `node bench/grounding-hostile.mjs`).
  it('keeps the evidence of a copied sentence after a run-on sentence that repeats its words hundreds of times', () => {
    const sources = ['The cat sat on the mat. The dog lay on the rug. '.repeat(2_000)];
    fc.assert(
      fc.property(fc.integer({ min: 60, max: 300 }), fc.constantFrom('the cat sat on the mat and ', 'the dog lay on the rug, ', 'the mat and the rug and '), (times, phrase) => {
        const copied = 'The dog lay on the rug.';
        const result = checkGrounding({ sources, answer: `${phrase.repeat(times)}so on. ${copied}` });
        const claim = result.claims.find((c) => c.text === copied)!;
        expect(claim.grounded).toBe(true);
        expect(claim.evidence?.text).toBe(copied);
      }),
      { numRuns: 20, seed: 20261129 },
    );
  });

  it('gives the same result from an index merged from cached parts as from one built whole', () => {
    const parts = [crowd('harbour', 700).join(' '), `${LONG_CLAIM} The lantern museum is not open on Mondays.`, crowd('museum', 500).join(' ')];
    const answers = [LONG_CLAIM, 'The lantern museum is open on Mondays.', 'The harbour stood beside the granite near the lantern.'];
    const cache = new SourceIndexCache();
    for (const answer of answers) {
      expect(checkGrounding({ sources: parts, answer }, { sourceIndexCache: cache })).toEqual(checkGrounding({ sources: parts, answer }));
    }
  });
});
