import { describe, expect, it } from 'vitest';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD, type GroundingResult } from './index.js';

const expectValidSpans = (answer: string, r: GroundingResult): void => {
  for (const s of r.flaggedSpans) {
    expect(s.start).toBeGreaterThanOrEqual(0);
    expect(s.end).toBeLessThanOrEqual(answer.length);
    expect(s.start).toBeLessThan(s.end);
    expect(s.text).toBe(answer.slice(s.start, s.end));
    expect(s.score).toBeGreaterThanOrEqual(0);
    expect(s.score).toBeLessThanOrEqual(1);
    expect(s.reason).not.toBe('');
  }
};

const reasons = (r: GroundingResult): string[] => r.flaggedSpans.map((s) => s.reason);

const OBEROI = 'The Oberoi family is an Indian family famous for its hotels. The Oberoi Group is a hotel company with its head office in Delhi.';
const POSEIDON = 'Poseidon (film). Poseidon grossed $ 181,674,817 at the worldwide box office on a budget of $ 160 million.';

describe('checkGrounding', () => {
  it('does not check when there is no answer text or no non-empty source', () => {
    const notChecked = { checked: false, grounded: true, score: 1, flaggedSpans: [] };
    expect(checkGrounding({ sources: ['Paris is in France.'], answer: '' })).toEqual(notChecked);
    expect(checkGrounding({ sources: ['Paris is in France.'], answer: ' \n… ' })).toEqual(notChecked);
    expect(checkGrounding({ sources: [], answer: 'Paris is in France.' })).toEqual(notChecked);
    expect(checkGrounding({ sources: ['', '   '], answer: 'Paris is in France.' })).toEqual(notChecked);
  });

  it('accepts an answer taken from the sources', () => {
    const r = checkGrounding({ sources: [OBEROI], question: 'Where is the Oberoi Group head office?', answer: 'Delhi' });
    expect(r).toMatchObject({ checked: true, grounded: true, flaggedSpans: [] });
    expect(r.score).toBeGreaterThanOrEqual(DEFAULT_GROUNDING_THRESHOLD);
  });

  it("flags a name that is not in the sources, with the name's offsets", () => {
    const answer = 'Mumbai, the financial capital of India.';
    const r = checkGrounding({ sources: [OBEROI], question: 'The Oberoi Group has its head office in what city?', answer });
    expect(r.grounded).toBe(false);
    expect(r.score).toBeLessThan(0.5);
    expect(r.flaggedSpans).toContainEqual({ start: 0, end: 6, text: 'Mumbai', reason: "'Mumbai' is not in the sources", score: 0 });
    expectValidSpans(answer, r);
  });

  it('flags a number that is not in the sources', () => {
    const answer = 'Alf Clausen was born in 1942.';
    const r = checkGrounding({ sources: ['Alf Heiberg Clausen (born March 28, 1941) is an American composer.'], answer });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans).toContainEqual({ start: 24, end: 28, text: '1942', reason: 'number 1942 is not in the sources', score: 0 });
  });

  it('matches number forms: thousands separators, scale words, currency and roundings', () => {
    const answer = 'Poseidon grossed $181.7 million worldwide on a $160,000,000 budget.';
    const r = checkGrounding({ sources: [POSEIDON], answer });
    expect(r.flaggedSpans.filter((s) => s.reason.startsWith('number'))).toEqual([]);
    const wrong = checkGrounding({ sources: [POSEIDON], answer: 'Poseidon had a budget of $150 million.' });
    expect(wrong.flaggedSpans).toContainEqual(expect.objectContaining({ text: '$150 million', reason: 'number 150 million is not in the sources' }));
  });

  it('matches dates written in another order', () => {
    const source = 'The treaty was signed on 2 March 1991 in Vienna.';
    const same = checkGrounding({ sources: [source], answer: 'The treaty was signed in Vienna on March 2, 1991.' });
    expect(same).toMatchObject({ grounded: true, flaggedSpans: [] });
    const other = checkGrounding({ sources: [source], answer: 'The treaty was signed on 2 March 1993.' });
    expect(reasons(other)).toContain('number 1993 is not in the sources');
    const month = checkGrounding({ sources: [source], answer: 'The treaty was signed on 2 April 1991 in Vienna.' });
    expect(reasons(month)).toContain("'April' is not in the sources");
  });

  it('flags a negation the sources do not have', () => {
    const answer = 'The museum did not open in 1998.';
    const r = checkGrounding({ sources: ['The museum opened in 1998 after a long renovation.'], answer });
    expect(r.flaggedSpans).toEqual([{ start: 15, end: 18, text: 'not', reason: "negation 'not' is not in the sources", score: 0 }]);
    const kept = checkGrounding({ sources: ['The museum did not open in 1998 because of the floods.'], answer });
    expect(kept.flaggedSpans).toEqual([]);
  });

  it('flags a quantifier the sources do not have', () => {
    const r = checkGrounding({ sources: ['Most residents of the town work in farming.'], answer: 'All residents of the town work in farming.' });
    expect(reasons(r)).toContain("'All' is not in the sources");
  });

  it('does not flag a paraphrase built from the sources’ words', () => {
    const source = 'Lake Providence is a town in and the parish seat of East Carroll Parish in northeastern Louisiana, United States.';
    const answer = 'The passage states that Lake Providence, a town in northeastern Louisiana, USA, is the parish seat of East Carroll Parish.';
    const r = checkGrounding({ sources: [source], answer });
    expect(r).toMatchObject({ checked: true, grounded: true, flaggedSpans: [] });
    expect(r.score).toBeGreaterThan(0.5);
  });

  it('does not flag inflections of source words', () => {
    const r = checkGrounding({
      sources: ['The company was founded by two brothers and produces bicycles in Utrecht.'],
      answer: 'Founded by brothers, the company is producing bicycles in Utrecht.',
    });
    expect(r.flaggedSpans).toEqual([]);
  });

  it("does not take the question's own words as evidence of hallucination", () => {
    const sources = ['Kato is a fictional character from The Green Hornet series, portrayed by Bruce Lee in the television series.'];
    const question = 'Which character did Lee Jun-fan play in the television series?';
    const withQuestion = checkGrounding({ sources, question, answer: 'Lee Jun-fan played Kato.' });
    expect(withQuestion.flaggedSpans).toEqual([]);
    const without = checkGrounding({ sources, answer: 'Lee Jun-fan played Kato.' });
    expect(reasons(without)).toContain("'Jun' is not in the sources");
    expect(withQuestion.score).toBeGreaterThan(without.score);
  });

  it('keeps UTF-16 offsets exact around emoji and accents', () => {
    const sources = ['Le café Zoé a ouvert à Genève en 2011. 🎉 Il sert du thé.'];
    const answer = '🎉🎉 Le café Zoé a ouvert à Genève en 2013 ☕, près de Zürich.';
    const r = checkGrounding({ sources, answer });
    expectValidSpans(answer, r);
    const texts = r.flaggedSpans.map((s) => s.text);
    expect(texts).toContain('2013');
    expect(texts).toContain('Zürich');
    expect(r.flaggedSpans.find((s) => s.text === '2013')?.start).toBe(answer.indexOf('2013'));
  });

  it('treats accented and unaccented spellings as the same word', () => {
    const r = checkGrounding({ sources: ['José Martí was born in Havana.'], answer: 'Jose Marti was born in Havana.' });
    expect(r.flaggedSpans).toEqual([]);
  });

  it('marks a sentence with little support as a whole', () => {
    const source = 'The bridge opened in 1932 and carries eight lanes of traffic across the harbour.';
    const answer = 'The bridge opened in 1932. Critics praised its elegant design, calling it an engineering masterpiece admired worldwide.';
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(false);
    const claim = r.flaggedSpans.find((s) => s.reason.startsWith('little support'));
    expect(claim?.text).toBe('Critics praised its elegant design, calling it an engineering masterpiece admired worldwide');
    expect(claim?.reason).toMatch(/^little support \(0\.\d\d\)$/);
    expectValidSpans(answer, r);
  });

  it('honours a custom threshold', () => {
    const input = { sources: [OBEROI], answer: 'Delhi' };
    expect(checkGrounding(input, { threshold: 1.01 }).grounded).toBe(false);
    expect(checkGrounding(input, { threshold: 0 }).grounded).toBe(true);
  });

  it('handles 100 KB of sources and a 4 KB answer', () => {
    const sentence = 'The committee met in Geneva on 4 May 2019 to review 38 proposals on water policy. ';
    const sources = [sentence.repeat(Math.ceil(100_000 / sentence.length)).slice(0, 100_000)];
    const answer = 'The committee reviewed 38 proposals in Geneva. It rejected 12 of them in Oslo. '.repeat(50).slice(0, 4_000);
    const r = checkGrounding({ sources, answer });
    expect(r.checked).toBe(true);
    expect(reasons(r)).toContain('number 12 is not in the sources');
    expectValidSpans(answer, r);
  });
});
