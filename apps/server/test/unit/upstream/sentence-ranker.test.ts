import { describe, expect, it } from 'vitest';
import { stem } from '@svc/grounding';
import { contentWords, rankPassages, splitSentences, terms } from '../../../src/upstream/sentence-ranker.js';

describe('contentWords and terms', () => {
  it("drop function words, negations and the request's own words; keep the rest as written", () => {
    expect(contentWords("Please tell me why the towers of Paris don't fall, and what's not known about Eiffel's design?")).toEqual([
      'towers',
      'paris',
      'fall',
      'known',
      'eiffel',
      'design',
    ]);
  });

  it('are the content words stemmed as the grounding check stems them: plurals meet their singular', () => {
    expect(terms('What is the capital of France? Capitals, towers')).toEqual(['capital', 'france', 'capitals', 'towers'].map(stem));
    expect(terms('towers')).toEqual(terms('tower'));
  });
});

describe('rankPassages', () => {
  it('ranks the passage sharing the rarer query terms first, matching plural to singular', () => {
    const passages = ['The tower is in Paris.', 'Paris has many bridges.', 'Lyon has a cathedral.'].map((text, position) => ({ text, source: 0, position }));
    const ranked = rankPassages('Where are the towers of Paris?', passages);
    expect(ranked.map((p) => p.position)).toEqual([0, 1]);
    expect(ranked[0]!.matched).toEqual([stem('towers'), stem('paris')]);
  });
});

describe('splitSentences on runs of stops that end no sentence', () => {
  // Each ". A" is skipped as an initial: the word before each stop is read back from the stop, so 50,000 of
  // them are read once each (reading from the sentence's start made this quadratic: minutes, not milliseconds).
  it.each([['A. '], ['Dr. ']])('"%s" repeated 50,000 times is one sentence', (unit) => {
    const text = unit.repeat(50_000);
    expect(splitSentences(text)).toEqual([text.trim()]);
  });
});
