import { describe, expect, it } from 'vitest';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD } from './index.js';

// How the answer's lines become claims: a sentence wrapped over lines is one claim, but no line of it is covered
// by another's support.

const TRAIN = 'The train to Bristol leaves from platform 4 at 9:15.';
const OFFICE = 'Our office is open from Monday to Friday.';
const WARRANTY = 'The warranty covers parts and labour for two years.';
const SOURCES = [TRAIN, OFFICE, WARRANTY];
const bare = (s: string) => s.slice(0, -1);
const UNSUPPORTED = 'otters juggle turquoise saxophones in the harbour.';

const within = (r: ReturnType<typeof checkGrounding>, text: string, answer: string) => {
  const at = answer.indexOf(text);
  return r.flaggedSpans.length > 0 && r.flaggedSpans.every((s) => s.start >= at && s.end <= at + text.length);
};

describe('a sentence wrapped over lines', () => {
  it.each([
    ['after one unpunctuated line', `${bare(TRAIN)}\n${UNSUPPORTED}`, UNSUPPORTED],
    // Joined, the office's line held most of the claim's words, and it scored 0.66.
    ['after two unpunctuated lines', `${bare(TRAIN)}\n${bare(OFFICE)}\nthe office also repairs bicycles.`, 'the office also repairs bicycles.'],
    ['with every line in lower case', `the train to Bristol leaves from platform 4 at 9:15\nour office is open from Monday to Friday\n${UNSUPPORTED}`, UNSUPPORTED],
  ])('is flagged when one of its lines is unsupported, %s, and the span is in that line', (_name, answer, line) => {
    const r = checkGrounding({ sources: SOURCES, answer });
    expect(r.grounded).toBe(false);
    expect(r.score).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
    expect(within(r, line, answer)).toBe(true);
  });

  it('copied as a source wraps it is grounded, and is one claim', () => {
    const source = 'The licence grants every user the right to copy, modify and\ndistribute the software, provided that this notice\nis kept in all copies.';
    const r = checkGrounding({ sources: [source], answer: source });
    expect(r.grounded).toBe(true);
    expect(r.claims).toHaveLength(1);
    expect(r.flaggedSpans).toEqual([]);
  });

  it('copied with a negation that reaches over the line break is grounded; the negation dropped is flagged', () => {
    const source = "Bash tries to unset a function if the name cannot be a variable name because it's not\nan identifier.";
    expect(checkGrounding({ sources: [source], answer: source }).grounded).toBe(true);
    const dropped = "Bash tries to unset a function if the name cannot be a variable name because it's\nan identifier.";
    expect(checkGrounding({ sources: [source], answer: dropped }).grounded).toBe(false);
  });

  it('copied with other line breaks than the source has is grounded', () => {
    const source = 'The licence grants every user the right to copy, modify and distribute the software, provided that this notice is kept in all copies.';
    const answer = 'The licence grants every user the right\nto copy, modify and distribute the software,\nprovided that this notice is kept in all copies.';
    expect(checkGrounding({ sources: [source], answer }).grounded).toBe(true);
  });
});
