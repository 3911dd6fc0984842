import { existsSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { defaultDataPaths } from './eval-cli.js';
import { checkGrounding } from './check.js';
import { evaluate, fit, leaveOneDatasetOut, measure, parseRows, byDataset, rowClaims, rowScore, toInput, type DatasetReport, type EvalRow, type Measured, type RowClaims } from './evaluate.js';
import { DEFAULT_MODEL, FEATURE_NAMES, type Model } from './model.js';

// The dev evaluation as a regression test. Figures reached by this build (`node dist/eval-cli.js`, 2124 rows,
// threshold 0.5, 2026-11-25): a change may not lose more than TOLERANCE on any dataset. When the check gets
// better, raise them.
const TOLERANCE = 0.02;
const REACHED: Record<string, { lodo: number; inSample: number }> = {
  'halueval-qa': { lodo: 0.8, inSample: 0.84 },
  faithbench: { lodo: 0.568, inSample: 0.583 },
  summedits: { lodo: 0.565, inSample: 0.57 },
  'faithdial-audit': { lodo: 0.704, inSample: 0.715 },
  'q2-wow': { lodo: 0.68, inSample: 0.68 },
  wice: { lodo: 0.647, inSample: 0.673 },
};
/** Probes whose right answer is known (copy → grounded, appended unsupported sentence → score not higher). */
const PROBE_MAX = 0.05;
/** How far each fitted weight may be from DEFAULT_MODEL's. */
const WEIGHT_TOLERANCE = 0.05;

const paths = defaultDataPaths();
const missing = paths.filter((p) => !existsSync(p));
if (missing.length > 0) console.warn(`@svc/grounding dev evaluation skipped: no data file at ${missing.join(', ')}`);

describe.skipIf(missing.length > 0)('dev evaluation (../shared/eval)', () => {
  const datasets = Object.keys(REACHED);
  let rows: EvalRow[];
  let claims: RowClaims[];
  let lodo: Map<string, Measured & { model: Model }>;
  let inSample: Map<string, Measured>;
  let reports: Map<string, DatasetReport>;
  let fitted: Model;

  beforeAll(() => {
    rows = paths.flatMap((p) => parseRows(readFileSync(p, 'utf8')));
    claims = rowClaims(rows);
    lodo = leaveOneDatasetOut(claims);
    inSample = new Map([...byDataset(claims)].map(([d, list]) => [d, measure(DEFAULT_MODEL, list)]));
    reports = new Map(evaluate(rows).map((r) => [r.dataset, r]));
    fitted = fit(claims);
  }, 180_000);

  it('has the datasets the figures are for', () => {
    expect([...byDataset(claims).keys()].sort()).toEqual([...datasets].sort());
  });

  it('scores every row as checkGrounding does, so the figures published are the check\'s', () => {
    const differ = rows.flatMap((r, i) => {
      const evaluated = round(rowScore(DEFAULT_MODEL, claims[i]!));
      const checked = checkGrounding(toInput(r)).score;
      return evaluated === checked ? [] : [{ id: r.id, evaluated, checked }];
    });
    expect(differ).toEqual([]);
  });

  it.each(datasets)('%s: leave-one-dataset-out balanced accuracy holds', (d) => {
    expect(lodo.get(d)!.balancedAccuracy).toBeGreaterThanOrEqual(REACHED[d]!.lodo - TOLERANCE);
  });

  it.each(datasets)('%s: in-sample balanced accuracy with DEFAULT_MODEL holds', (d) => {
    expect(inSample.get(d)!.balancedAccuracy).toBeGreaterThanOrEqual(REACHED[d]!.inSample - TOLERANCE);
    // The check itself (rounded scores, threshold) agrees with the measure on the row features.
    expect(Math.abs(reports.get(d)!.balancedAccuracy - inSample.get(d)!.balancedAccuracy)).toBeLessThanOrEqual(0.01);
  });

  it.each(datasets)('%s: copy, yeah+copy and append probes', (d) => {
    const p = reports.get(d)!.probes;
    expect(p.copyFlagged).toBeLessThanOrEqual(PROBE_MAX);
    expect(p.yeahCopyFlagged).toBeLessThanOrEqual(PROBE_MAX);
    expect(p.appendRose).toBeLessThanOrEqual(PROBE_MAX);
  });

  it('the shipped calibration is the one the tool fits on all rows', () => {
    expect(Math.abs(fitted.bias - DEFAULT_MODEL.bias)).toBeLessThanOrEqual(WEIGHT_TOLERANCE);
    expect(fitted.weights).toHaveLength(FEATURE_NAMES.length);
    expect(DEFAULT_MODEL.weights).toHaveLength(FEATURE_NAMES.length);
    fitted.weights.forEach((w, i) => expect(Math.abs(w - DEFAULT_MODEL.weights[i]!), FEATURE_NAMES[i]).toBeLessThanOrEqual(WEIGHT_TOLERANCE));
  });
});

const round = (x: number) => Math.round(x * 1000) / 1000;

describe('rowScore', () => {
  const TRAIN = 'The train to Bristol leaves from platform 4 at 9:15.';
  const OFFICE = 'Our office is open from Monday to Friday.';
  const WARRANTY = 'The warranty covers parts and labour for two years.';
  const bare = (s: string) => s.slice(0, -1);
  const row = (id: string, context: string[], answer: string, question: string | null = null): EvalRow => ({ id, dataset: 'd', context, question, answer, hallucinated: false });
  // Each is scored by checkGrounding other than as a list of its sentences' own measures: a claim wrapped over
  // lines (its weakest line, not every line a claim of its own), a translation (its numbers alone), an answer
  // past MAX_ANSWER_CHARS (not read past it) and one with no word (not checked).
  it.each([
    ['a claim wrapped over lines', row('wrapped', [TRAIN, OFFICE, WARRANTY], `${bare(TRAIN)}\n${bare(OFFICE)}\nthe office also repairs bicycles.`)],
    ['a claim wrapped over lines beside another', row('two', [TRAIN, OFFICE, WARRANTY], `${WARRANTY} ${bare(TRAIN)}\n${OFFICE}`)],
    ['a translation', row('fr', ['The museum opens at 9 and has 40 rooms.'], 'Le musée ouvre à 9 heures et compte 41 salles.', 'Translate to French.')],
    ['an answer past the bound', row('long', [TRAIN], `${TRAIN} `.repeat(400) + 'Otters juggle saxophones.')],
    ['an answer with no word', row('dots', [TRAIN], '…')],
  ])('is checkGrounding\'s score: %s', (_name, r) => {
    const [claims] = rowClaims([r]);
    expect(round(rowScore(DEFAULT_MODEL, claims!))).toBe(checkGrounding(toInput(r)).score);
  });
});

describe('fit', () => {
  // Single-claim rows whose label follows the first and last measures, deterministic.
  function kind(dataset: string, shift: number): RowClaims[] {
    const rows: RowClaims[] = [];
    for (let i = 0; i < 200; i++) {
      const a = (((i * 37) % 101) / 100) * 0.7;
      const b = (i * 53) % 97 / 96;
      const label = 2 * a + b + ((i * 29) % 7) / 7 > 1.6;
      rows.push({ dataset, label, claims: [[[a + shift, 0, 0, 0, b]]] });
    }
    return rows;
  }

  it('a kind of text whose every answer scores lower does not change the weights, only the bias', () => {
    // Unpenalised, as the penalty is on standardised weights and the shifted kind spreads the measure wider.
    const same = fit([...kind('a', 0), ...kind('b', 0)], 0);
    const shifted = fit([...kind('a', 0), ...kind('b', 0.3)], 0);
    expect(same.weights[0]).toBeGreaterThan(1);
    expect(shifted.weights[0]).toBeCloseTo(same.weights[0]!, 4);
    expect(shifted.weights[4]).toBeCloseTo(same.weights[4]!, 4);
    // The bias sits halfway between the two kinds' intercepts, as the two weigh the same.
    expect(shifted.bias).toBeCloseTo(same.bias - (0.3 * same.weights[0]!) / 2, 4);
  });
});

describe('evaluate: spans and other detectors', () => {
  const source = 'The Oberoi Group is a hotel company with its head office in Delhi. It runs thirty hotels.';
  const row = (id: string, answer: string, hallucinated: boolean, spans: EvalRow['spans'], baselines: Record<string, number>): EvalRow => ({
    id,
    dataset: 'spans',
    context: [source],
    question: null,
    answer,
    hallucinated,
    spans,
    baselines,
  });
  const wrong = 'The Oberoi Group has its head office in Mumbai.';
  const rows = [
    row('a', wrong, true, [{ start: wrong.indexOf('Mumbai'), end: wrong.indexOf('Mumbai') + 6, label: 'Unwanted.Intrinsic' }], { always: 0.9, never: 0.1 }),
    row('b', 'The Oberoi Group is a hotel company.', false, [], { always: 0.8, never: 0.2 }),
  ];

  it('scores the flagged spans by character against the annotators’ spans, beside flagging everything', () => {
    const [r] = evaluate(rows);
    const mumbai = 'Mumbai'.length;
    expect(r!.spans!.flaggedSpans).toEqual({ precision: 1, recall: 1, f1: 1 });
    // The claim not grounded is the whole first answer: all of the gold, and more.
    expect(r!.spans!.ungroundedClaims.recall).toBe(1);
    expect(r!.spans!.ungroundedClaims.precision).toBeCloseTo(mumbai / wrong.length, 6);
    const all = wrong.length + rows[1]!.answer.length;
    expect(r!.spans!.everything.precision).toBeCloseTo(mumbai / all, 6);
  });

  it('a Benign span is not a hallucination; rows without spans report none', () => {
    const benign = [{ ...rows[0]!, hallucinated: false, spans: [{ start: 0, end: 3, label: 'Benign' }] }, rows[1]!];
    expect(evaluate(benign)[0]!.spans!.everything.recall).toBe(0);
    expect(evaluate(rows.map(({ spans: _s, ...r }) => r))[0]!.spans).toBeUndefined();
  });

  it("reports each detector's balanced accuracy at 0.5 on the same rows, only where every row has it", () => {
    expect(evaluate(rows)[0]!.detectors).toEqual({ always: 0.5, never: 0.5 });
    const partly = [rows[0]!, { ...rows[1]!, baselines: { always: 0.1 } }];
    expect(evaluate(partly)[0]!.detectors).toEqual({ always: 1 });
    expect(evaluate(rows.map(({ baselines: _b, ...r }) => r))[0]!.detectors).toBeUndefined();
  });
});
