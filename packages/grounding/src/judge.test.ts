import { describe, expect, it } from 'vitest';
import { checkGrounding, JUDGE_REASON, mergeJudgeSpans, type GroundingResult } from './index.js';

const sources = ['The bridge opened in 1932 and carries eight lanes of traffic across the harbour.'];
const answer = 'The bridge opened in 1932 and carries eight lanes across the harbour.';

describe('mergeJudgeSpans', () => {
  it('adds only exact substrings of the answer and marks the answer ungrounded', () => {
    const offline = checkGrounding({ sources, answer });
    expect(offline.grounded).toBe(true);
    const merged = mergeJudgeSpans(offline, answer, ['eight lanes', 'ten lanes', '', 'eight lanes']);
    expect(merged.flaggedSpans).toEqual([{ start: 38, end: 49, text: 'eight lanes', reason: JUDGE_REASON, score: 0 }]);
    expect(merged.grounded).toBe(false);
    expect(merged.score).toBeLessThan(0.5);
    expect(merged.score).toBeLessThanOrEqual(offline.score);
  });

  it('lowers the score further the more of the answer is rejected', () => {
    const offline = checkGrounding({ sources, answer });
    const little = mergeJudgeSpans(offline, answer, ['1932']);
    const much = mergeJudgeSpans(offline, answer, ['The bridge opened in 1932 and carries eight lanes']);
    expect(much.score).toBeLessThan(little.score);
  });

  it('returns the result unchanged when no phrase is a substring, and never mutates it', () => {
    const offline = checkGrounding({ sources, answer });
    const copy: GroundingResult = structuredClone(offline);
    expect(mergeJudgeSpans(offline, answer, ['not there', 'The Bridge'])).toBe(offline);
    mergeJudgeSpans(offline, answer, ['eight lanes']);
    expect(offline).toEqual(copy);
  });

  it('keeps offline spans and orders all spans by position', () => {
    const wrong = 'The bridge opened in 1933 and carries eight lanes across the harbour.';
    const offline = checkGrounding({ sources, answer: wrong });
    const merged = mergeJudgeSpans(offline, wrong, ['across the harbour']);
    expect(merged.flaggedSpans.map((s) => s.text)).toEqual(['1933', 'across the harbour']);
  });

  it('leaves an unchecked result alone', () => {
    const unchecked = checkGrounding({ sources: [], answer });
    expect(mergeJudgeSpans(unchecked, answer, ['eight lanes'])).toBe(unchecked);
  });
});
