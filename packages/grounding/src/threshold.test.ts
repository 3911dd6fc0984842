import { describe, expect, it } from 'vitest';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD, unsupportedTermScore } from './check.js';
import { binaryMetrics } from './metrics.js';
import { chooseThreshold, labelledScores, ThresholdError, thresholdMetrics, type LabelledScore } from './threshold.js';

/** Rows from "score:label" pairs, label h (hallucinated) or g (grounded); each pair repeated `times`. */
function rows(spec: string, times = 1): LabelledScore[] {
  const out: LabelledScore[] = [];
  for (let i = 0; i < times; i++) {
    for (const pair of spec.trim().split(/\s+/)) {
      const [score, label] = pair.split(':');
      out.push({ score: Number(score), hallucinated: label === 'h' });
    }
  }
  return out;
}

interface Case {
  name: string;
  rows: LabelledScore[];
  threshold: number;
  low: number;
  high: number;
  balancedAccuracy: number;
  flagged: number;
}

const cases: Case[] = [
  {
    name: 'separable: the middle of the gap between the classes',
    rows: rows('0.1:h 0.2:h 0.3:h 0.6:g 0.7:g 0.8:g', 4),
    threshold: 0.45,
    low: 0.3,
    high: 0.6,
    balancedAccuracy: 1,
    flagged: 0.5,
  },
  {
    name: 'separable far below the default (a kind of text that scores low)',
    rows: rows('0.02:h 0.05:h 0.08:h 0.22:g 0.25:g 0.3:g', 4),
    threshold: 0.15,
    low: 0.08,
    high: 0.22,
    balancedAccuracy: 1,
    flagged: 0.5,
  },
  {
    name: 'separable above it (answers that copy their sources)',
    rows: rows('0.5:h 0.6:h 0.68:h 0.88:g 0.89:g 0.893:g', 4),
    threshold: 0.78,
    low: 0.68,
    high: 0.88,
    balancedAccuracy: 1,
    flagged: 0.5,
  },
  {
    name: 'a narrow gap: as many decimals as the middle half needs',
    rows: rows('0.1:h 0.231:h 0.232:g 0.9:g', 5),
    threshold: 0.2315,
    low: 0.231,
    high: 0.232,
    balancedAccuracy: 1,
    flagged: 0.5,
  },
  {
    name: 'overlap: the range with the best balanced accuracy, not the best accuracy',
    // 8 hallucinated, 2 grounded per repeat. Flagging below 0.35 catches 6/8 and spares 2/2 (BA 0.875);
    // flagging below 0.65 catches 8/8 and spares 1/2 (BA 0.75, though accuracy is higher there: 0.9 > 0.8).
    rows: rows('0.1:h 0.15:h 0.2:h 0.25:h 0.3:h 0.32:h 0.4:g 0.5:h 0.6:h 0.7:g', 2),
    threshold: 0.36,
    low: 0.32,
    high: 0.4,
    balancedAccuracy: 0.875,
    flagged: 0.6,
  },
  {
    name: 'tied ranges apart: the widest interval wins',
    // Flagging below 0.2 or below 0.8 both give BA 0.75; (0.1, 0.2] is narrower than (0.4, 0.8].
    rows: rows('0.1:h 0.2:g 0.4:h 0.8:g', 5),
    threshold: 0.6,
    low: 0.4,
    high: 0.8,
    balancedAccuracy: 0.75,
    flagged: 0.75,
  },
  {
    name: 'tied ranges of one width: the one nearer the default threshold',
    rows: rows('0.1:h 0.3:g 0.6:h 0.8:g', 5),
    threshold: 0.7,
    low: 0.6,
    high: 0.8,
    balancedAccuracy: 0.75,
    flagged: 0.75,
  },
  {
    name: 'tied scores stay on one side',
    rows: rows('0.3:h 0.3:h 0.3:g 0.6:g 0.6:g 0.6:h', 4),
    threshold: 0.45,
    low: 0.3,
    high: 0.6,
    balancedAccuracy: 2 / 3,
    flagged: 0.5,
  },
  {
    name: 'reversed scores: flagging nothing is as good as it gets, at the lowest range',
    rows: rows('0.9:h 0.8:h 0.2:g 0.1:g', 5),
    threshold: 0.05,
    low: 0,
    high: 0.1,
    balancedAccuracy: 0.5,
    flagged: 0,
  },
];

describe('chooseThreshold', () => {
  it.each(cases)('$name', (c) => {
    const choice = chooseThreshold(c.rows);
    expect(choice.threshold).toBe(c.threshold);
    expect(choice.low).toBeCloseTo(c.low, 12);
    expect(choice.high).toBeCloseTo(c.high, 12);
    expect(choice.balancedAccuracy).toBeCloseTo(c.balancedAccuracy, 12);
    expect(choice.flagged).toBeCloseTo(c.flagged, 12);
    expect(choice.n).toBe(c.rows.length);
    // No threshold on a fine grid does better, and every one in the interval flags the same rows.
    for (let t = 0.001; t < 1; t += 0.001) expect(thresholdMetrics(c.rows, t).balancedAccuracy).toBeLessThanOrEqual(choice.balancedAccuracy + 1e-12);
    for (const t of [choice.low + (choice.high - choice.low) / 4, choice.high]) {
      if (t > 0 && t < 1) expect(thresholdMetrics(c.rows, t)).toMatchObject({ balancedAccuracy: choice.balancedAccuracy, flagged: choice.flagged });
    }
  });

  it('reports the F1, precision and recall of binaryMetrics at the threshold', () => {
    const r = rows('0.1:h 0.15:h 0.2:h 0.25:h 0.3:h 0.32:h 0.4:g 0.5:h 0.6:h 0.7:g', 2);
    const choice = chooseThreshold(r);
    const m = binaryMetrics(r.map((x) => x.score < choice.threshold), r.map((x) => x.hallucinated));
    expect(choice).toMatchObject({ f1: m.f1, precision: m.precision, recall: m.recall, balancedAccuracy: m.balancedAccuracy });
  });

  const refusals: { name: string; rows: LabelledScore[]; code: string; message: RegExp; minRows?: number }[] = [
    { name: 'no rows', rows: [], code: 'TOO_FEW_ROWS', message: /0 labelled rows: at least 20/ },
    { name: 'fewer than 20 rows', rows: rows('0.1:h 0.9:g', 9), code: 'TOO_FEW_ROWS', message: /18 labelled rows: at least 20/ },
    { name: 'fewer than minRows', rows: rows('0.1:h 0.9:g', 2), code: 'TOO_FEW_ROWS', message: /4 labelled rows: at least 5/, minRows: 5 },
    { name: 'grounded rows only', rows: rows('0.1:g 0.9:g', 10), code: 'ONE_CLASS', message: /all 20 rows are grounded/ },
    { name: 'hallucinated rows only', rows: rows('0.1:h 0.9:h', 10), code: 'ONE_CLASS', message: /all 20 rows are hallucinated/ },
    { name: 'a score above 1', rows: [...rows('0.1:h 0.9:g', 10), { score: 1.5, hallucinated: false }], code: 'INVALID_SCORE', message: /row 21: score 1.5/ },
    { name: 'a score that is not a number', rows: [{ score: NaN, hallucinated: true }, ...rows('0.1:h 0.9:g', 10)], code: 'INVALID_SCORE', message: /row 1: score NaN/ },
  ];

  it.each(refusals)('refuses $name', (c) => {
    let error: unknown;
    try {
      chooseThreshold(c.rows, c.minRows === undefined ? {} : { minRows: c.minRows });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ThresholdError);
    expect(error).toMatchObject({ code: c.code, name: 'ThresholdError' });
    expect((error as Error).message).toMatch(c.message);
  });
});

describe('thresholdMetrics', () => {
  it.each([
    { threshold: 0.05, balancedAccuracy: 0.5, flagged: 0 },
    { threshold: 0.5, balancedAccuracy: 1, flagged: 0.5 },
    { threshold: 0.95, balancedAccuracy: 0.5, flagged: 1 },
  ])('at $threshold', ({ threshold, balancedAccuracy, flagged }) => {
    expect(thresholdMetrics(rows('0.1:h 0.3:h 0.7:g 0.9:g'), threshold)).toMatchObject({ threshold, balancedAccuracy, flagged, n: 4 });
  });

  it('flags a score below the threshold, as the check does (a score equal to it is grounded)', () => {
    expect(thresholdMetrics(rows('0.4:h 0.5:g'), 0.5).flagged).toBe(0.5);
  });
});

describe('labelledScores', () => {
  it('scores each answer with checkGrounding', () => {
    const sources = ['The Oberoi Group is a hotel company with its head office in Delhi.'];
    const question = 'Where is the head office of the Oberoi Group?';
    const answers = [
      { sources, question, answer: 'The head office is in Delhi.', hallucinated: false },
      { sources, question, answer: 'The head office is in Mumbai.', hallucinated: true },
    ];
    const scored = labelledScores(answers);
    expect(scored).toEqual(answers.map((a) => ({ score: checkGrounding(a).score, hallucinated: a.hallucinated, checked: true })));
    expect(scored[0]!.score).toBeGreaterThanOrEqual(DEFAULT_GROUNDING_THRESHOLD);
    expect(scored[1]!.score).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
  });

  it('marks answers the check has nothing to score', () => {
    expect(labelledScores([{ sources: [], answer: 'Paris.', hallucinated: true }, { sources: ['Paris.'], answer: '…', hallucinated: false }])).toEqual([
      { score: 1, hallucinated: true, checked: false },
      { score: 1, hallucinated: false, checked: false },
    ]);
  });
});

describe('unsupportedTermScore', () => {
  // The check's own examples of one wrong number or name (src/check.test.ts).
  const wrong = [
    { sources: ['A gallon of milk costs $2.79 at the corner store.'], answer: 'A gallon of milk costs $3.79 at the corner store.' },
    { sources: ['The hotel opened in 1952.'], answer: 'The hotel opened in 1925.' },
    { sources: ['The Oberoi Group is a hotel company with its head office in Delhi.'], answer: 'The Oberoi Group has its head office in Mumbai.' },
    { sources: ['The Boeing 737 MAX 8 entered service in 2017.'], answer: 'The Boeing 737 MAX 9 entered service in 2017.' },
  ];

  it('is below the default threshold, and above every answer with a number or name no source has', () => {
    const ceiling = unsupportedTermScore();
    expect(ceiling).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
    for (const input of wrong) {
      const r = checkGrounding(input);
      expect(r.score, input.answer).toBeLessThan(ceiling);
      // Any threshold above it flags the answer; one at the answer's score does not.
      expect(checkGrounding(input, { threshold: ceiling + 0.001 }).grounded).toBe(false);
      expect(checkGrounding(input, { threshold: r.score }).grounded).toBe(true);
    }
  });
});
