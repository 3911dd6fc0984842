import { describe, expect, it } from 'vitest';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD } from './index.js';

// How the answer's lines become claims: a sentence wrapped over lines is one claim, but no line of it is covered
// by another's support; list items run together on one line are claims of their own.

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

describe('list items run together on one line', () => {
  const items = SOURCES.map(bare);
  it.each([
    ['dashes', `- ${items.join(' - ')}`],
    ['asterisks', `* ${items.join(' * ')}`],
    ['bullets', `\u2022 ${items.join(' \u2022 ')}`],
    ['numbers and full stops', `1. ${items[0]} 2. ${items[1]} 3. ${items[2]}`],
    ['numbers and brackets', `1) ${items[0]} 2) ${items[1]} 3) ${items[2]}`],
    ['after a colon', `Key facts: - ${items.join(' - ')}`],
    // The first number, after the colon, was read as the number 1 ("Key facts: 1." a claim, flagged).
    ['numbers after a colon', `Key facts: 1. ${items[0]} 2. ${items[1]} 3. ${items[2]}`],
  ])('copied from the sources are grounded, each item a claim (%s)', (_name, answer) => {
    const r = checkGrounding({ sources: SOURCES, answer });
    expect(r.grounded).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
    expect(r.claims).toHaveLength(3);
    // The next item's number is the list's, not a number the item before claims ("… Friday 3.").
    for (const c of r.claims) expect(c.text).not.toMatch(/\s\d[.)]$/);
  });

  it.each([
    ['dashes', (u: string) => `- ${items[0]} - ${u} - ${items[1]}`],
    ['numbers', (u: string) => `1. ${items[0]} 2. ${u} 3. ${items[1]}`],
  ])('with one item no source supports are flagged in that item (%s)', (_name, build) => {
    const unsupported = 'Otters juggle turquoise saxophones in the harbour';
    const answer = build(unsupported);
    const r = checkGrounding({ sources: SOURCES, answer });
    expect(r.grounded).toBe(false);
    expect(within(r, unsupported, answer)).toBe(true);
  });

  it('a dash in prose does not start an item', () => {
    const r = checkGrounding({ sources: ['Paris is the capital of France and its largest city.'], answer: 'Paris - the capital of France - is its largest city.' });
    expect(r.claims).toHaveLength(1);
    expect(r.grounded).toBe(true);
  });

  it.each([
    ['dashes', (u: string) => `- Hours: - ${items[0]} - ${u} - ${items[1]}`],
    ['numbers', (u: string) => `1. Hours: 1. ${items[0]} 2. ${u} 3. ${items[1]}`],
  ])('a run-on list after a colon in a run-on list keeps claims and spans on the answer (%s)', (_name, build) => {
    // Both the line's list and the colon's list break before the same items: each break is made once, or the text
    // read grows by a copy of what lies between them and every offset after it points past its words.
    const unsupported = 'Otters juggle turquoise saxophones in the harbour';
    const answer = build(unsupported);
    const r = checkGrounding({ sources: SOURCES, answer });
    for (const c of [...r.claims, ...r.flaggedSpans]) {
      expect(c.end).toBeLessThanOrEqual(answer.length);
      expect(c.text).toBe(answer.slice(c.start, c.end));
    }
    expect(r.claims.map((c) => c.text)).toContain(unsupported);
    const at = answer.indexOf(unsupported);
    expect(r.flaggedSpans.some((s) => s.start >= at && s.end <= at + unsupported.length)).toBe(true);
  });

  describe('a number after an item that wants it is the item\'s, not the next item\'s', () => {
    const ITEMS = ['Bring your ticket.', 'Keep your receipt.', 'Log in to the portal with your booking code.'];
    const DOORS = ['Doors open at 7.', ...ITEMS];
    const TALK = ['The talk starts at 2.', ...ITEMS];
    it.each([
      // The reviewer's case: "2" is when the doors open, and no source says 2; read as the list's next number it
      // was dropped, and the wrong time was never checked.
      ['a wrong time equal to the next number', DOORS, '1. Doors open at 2. Bring your ticket.', false, ['2']],
      ['a wrong time equal to the next number, then the list goes on', DOORS, '1. Doors open at 2. 2. Bring your ticket 3. Keep your receipt', false, ['2']],
      ['the right time equal to the next number', TALK, '1. The talk starts at 2. Bring your ticket.', true, []],
      ['the right time equal to the next number, then the list goes on', TALK, '1. The talk starts at 2. 2. Bring your ticket 3. Keep your receipt', true, []],
      // Real run-on lists: each item a claim, the numbers the list's.
      ['a real list, the items unpunctuated', DOORS, '1. Doors open at 7 2. Bring your ticket 3. Keep your receipt', true, []],
      ['a real list, the items punctuated', DOORS, '1. Doors open at 7. 2. Bring your ticket. 3. Keep your receipt.', true, []],
      ['a wrong time in a real list', DOORS, '1. Doors open at 8 2. Bring your ticket 3. Keep your receipt', false, ['8']],
      // An item that ends on a particle ("Log in") is whole: the next number is the list's.
      ['a real list with an item ending on a particle', DOORS, '1. Log in 2. Bring your ticket 3. Keep your receipt', true, []],
    ])('%s', (_name, sources, answer, grounded, flagged) => {
      const r = checkGrounding({ sources, answer });
      expect(r.grounded).toBe(grounded);
      expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
      for (const c of [...r.claims, ...r.flaggedSpans]) expect(c.text).toBe(answer.slice(c.start, c.end));
    });
  });

  it('one dash after a colon does not start a list', () => {
    const answer = 'Note: - Our office is open from Monday to Friday';
    expect(checkGrounding({ sources: SOURCES, answer }).claims).toHaveLength(1);
  });
});
