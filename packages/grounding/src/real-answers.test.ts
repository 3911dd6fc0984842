import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkGrounding } from './index.js';

// Answers real applications get that no labelled data set has: each a source, a faithful answer a model would
// give, and unfaithful twins with one figure, name or negation changed. `flagged` lists texts that must be
// among the flagged spans (others may be too); a grounded answer has none.

interface Case {
  source: string | string[];
  answer: string;
  grounded: boolean;
  flagged?: string[];
  question?: string;
}

function expectCase({ source, answer, grounded, flagged = [], question }: Case): void {
  const r = checkGrounding({ sources: Array.isArray(source) ? source : [source], answer, question });
  const spans = r.flaggedSpans.map((s) => s.text);
  const claims = JSON.stringify(r.claims.map((c) => [c.text, c.score]));
  expect(r.grounded, `${answer} → ${claims} ${JSON.stringify(spans)}`).toBe(grounded);
  if (grounded) expect(spans).toEqual([]);
  for (const f of flagged) expect(spans.some((s) => s.includes(f)), `${f} among ${JSON.stringify(spans)}`).toBe(true);
}

const SEED = Number(process.env.GROUNDING_PROPS_SEED ?? 20261129);

describe('numbers with a scale word', () => {
  const POPULATION = 'The city has a population of 2.1 million.';
  it.each<Case>([
    { source: POPULATION, answer: 'The city has a population of 2.1 million.', grounded: true },
    { source: POPULATION, answer: 'The city has about 2,100,000 inhabitants.', grounded: true },
    { source: POPULATION, answer: 'The city has a population of 2.1M.', grounded: true },
    { source: 'The city has 2,100,000 residents.', answer: 'The city has 2.1 million residents.', grounded: true },
    { source: POPULATION, answer: 'The city has a population of 2.1 billion.', grounded: false, flagged: ['2.1 billion'] },
    { source: POPULATION, answer: 'The city has a population of 2.1 thousand.', grounded: false, flagged: ['2.1 thousand'] },
    { source: 'Revenue was $48.2 billion in 2023.', answer: 'Revenue was $48.2 million in 2023.', grounded: false, flagged: ['48.2 million'] },
  ])('$source → $answer', (c) => expectCase(c));

  it('a figure given a scale its source number does not have is flagged, whatever the figure', () => {
    const scales = ['thousand', 'million', 'billion'] as const;
    fc.assert(
      fc.property(fc.integer({ min: 11, max: 999 }), fc.constantFrom(...scales), fc.constantFrom(...scales), (n, a, b) => {
        fc.pre(a !== b);
        const figure = `${Math.floor(n / 10)}.${n % 10}`;
        const r = checkGrounding({ sources: [`The fund manages $${figure} ${a} in assets.`], answer: `The fund manages $${figure} ${b} in assets.` });
        expect(r.grounded).toBe(false);
        const same = checkGrounding({ sources: [`The fund manages $${figure} ${a} in assets.`], answer: `The fund manages $${figure} ${a} in assets.` });
        expect(same.grounded).toBe(true);
      }),
      { seed: SEED, numRuns: 40 },
    );
  });
});

