import { aggregate, checkGrounding, DEFAULT_GROUNDING_THRESHOLD, readClaims } from './check.js';
import { fitLogistic, type Sample } from './fit.js';
import { binaryMetrics, charCounts, f1FromCounts, percentile, type BinaryMetrics } from './metrics.js';
import { DEFAULT_MODEL, FEATURE_NAMES, features, PERFECT, type Model } from './model.js';

const PERFECT_FEATURES = features(PERFECT);

/** One labelled row of the evaluation files (see shared/eval/README.md). */
export interface EvalRow {
  id: string;
  dataset: string;
  context: string[];
  question: string | null;
  answer: string;
  hallucinated: boolean;
  /** Gold unsupported spans of the answer (UTF-16 offsets, one per annotator, may overlap); FaithBench only. */
  spans?: { start: number; end: number; label?: string }[];
  /** Other detectors' P(hallucinated) on the same row, by name; FaithBench only. */
  baselines?: Record<string, number>;
}

/** Character-level precision, recall and F1 of predicted spans against gold spans, summed over rows. */
export interface SpanScores {
  precision: number;
  recall: number;
  f1: number;
}

export interface DatasetReport extends BinaryMetrics {
  dataset: string;
  rows: number;
  auroc: number;
  /** Share of rows flagged (not grounded). */
  flagged: number;
  latencyMs: { p50: number; p99: number };
  probes: Probes;
  /**
   * Where the dataset has gold spans: the flagged spans (what a UI draws) and, coarser, the claims that are not
   * grounded, against the union of the annotators' spans (labels other than Benign); `everything` flags every
   * character of every answer, the floor a span detector has to beat.
   */
  spans?: { flaggedSpans: SpanScores; ungroundedClaims: SpanScores; everything: SpanScores };
  /** Where the rows carry other detectors' P(hallucinated): each one's balanced accuracy at 0.5 on the same rows. */
  detectors?: Record<string, number>;
}

/** Controlled probes whose right answer is known (see shared/eval/README.md). */
export interface Probes {
  /** A sentence copied from the first source: share flagged. */
  copyFlagged: number;
  /** The same after "Yeah. ": share flagged. */
  yeahCopyFlagged: number;
  /** The answer plus a sentence no source supports: share of rows whose score rose. */
  appendRose: number;
}

/** Parses JSON Lines text into rows; blank lines are skipped. */
export function parseRows(text: string): EvalRow[] {
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as EvalRow);
}

export function byDataset<T extends { dataset: string }>(rows: readonly T[]): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const r of rows) {
    const list = out.get(r.dataset) ?? [];
    list.push(r);
    out.set(r.dataset, list);
  }
  return out;
}

export function toInput(r: EvalRow): { sources: string[]; answer: string; question?: string } {
  return r.question ? { sources: r.context, answer: r.answer, question: r.question } : { sources: r.context, answer: r.answer };
}

/** Area under the ROC curve of `score` (higher = more likely positive), ties counted half. */
export function auroc(score: readonly number[], gold: readonly boolean[]): number {
  const idx = score.map((_, i) => i).sort((a, b) => score[a]! - score[b]!);
  let rankSum = 0;
  let i = 0;
  while (i < idx.length) {
    let j = i;
    while (j + 1 < idx.length && score[idx[j + 1]!] === score[idx[i]!]) j++;
    const rank = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++) if (gold[idx[k]!]) rankSum += rank;
    i = j + 1;
  }
  const pos = gold.filter(Boolean).length;
  const neg = gold.length - pos;
  return pos === 0 || neg === 0 ? 0.5 : (rankSum - (pos * (pos + 1)) / 2) / (pos * neg);
}

/** A row's claims as feature vectors (what the calibration sees), computed once. */
export interface RowClaims {
  dataset: string;
  label: boolean;
  /** Per claim, the feature vectors of its readings (the claim, then its wrapped lines): the claim scores as its weakest. */
  claims: number[][][];
}

/** Each row's claims as `checkGrounding` reads them (`readClaims`), so that `rowScore` is the check's score. */
export function rowClaims(rows: readonly EvalRow[]): RowClaims[] {
  return rows.map((r) => {
    const read = readClaims(toInput(r));
    const claims = read.checked ? read.readings.map((readings) => readings.map((x) => features(x.measures))) : [];
    return { dataset: r.dataset, label: r.hallucinated, claims };
  });
}

function supportOf(model: Model, x: readonly number[]): number {
  let z = model.bias;
  for (let i = 0; i < x.length; i++) z += (model.weights[i] ?? 0) * x[i]!;
  return 1 / (1 + Math.exp(z));
}

/** The row's score under `model`, as `checkGrounding` computes it (before rounding): each claim its weakest reading. */
export function rowScore(model: Model, r: RowClaims): number {
  return aggregate(r.claims.map((readings) => Math.min(...readings.map((x) => supportOf(model, x)))), supportOf(model, PERFECT_FEATURES));
}

/**
 * Fits the calibration on rows whose labels are per answer while support is per claim: an answer is
 * unsupported when its weakest claim is. Alternates between picking each answer's weakest claim under the
 * current model and refitting on those claims (each dataset, and each class within it, weighing the same;
 * weights non-negative so that support stays monotone in the sources).
 *
 * Each dataset gets an intercept of its own in the fit, and the shipped bias is their mean. Kinds of text differ
 * in how much a faithful answer rewords its sources (a QA answer copies, a summary paraphrases), which moves
 * every score of a kind up or down together; with one shared intercept that shift is confounded with the
 * weights, so the kinds best represented pull the weights and the threshold their way. With an intercept per
 * kind the weights say only how the measures rank answers within a kind, and the threshold sits at the
 * average kind, which is the best guess for a kind not seen.
 */
export function fit(rows: readonly RowClaims[], lambda = 1): Model {
  const usable = rows.filter((r) => r.claims.length > 0);
  const counts = new Map<string, number>();
  for (const r of usable) counts.set(`${r.dataset}/${r.label}`, (counts.get(`${r.dataset}/${r.label}`) ?? 0) + 1);
  const d = FEATURE_NAMES.length;
  const nonNegative = new Set(FEATURE_NAMES.map((_, i) => i));
  // The first dataset's intercept is the fit's bias; every other one's is the bias plus its indicator's weight.
  const others = [...new Set(usable.map((r) => r.dataset))].slice(1);
  const penalties = [...new Array<number>(d).fill(lambda), ...new Array<number>(others.length).fill(0)];
  let model: Model = DEFAULT_MODEL;
  for (let round = 0; round < 6; round++) {
    const samples: Sample[] = usable.map((r) => {
      let weakest = r.claims[0]![0]!;
      let low = Infinity;
      for (const x of r.claims.flat()) {
        const s = supportOf(model, x);
        if (s < low) {
          low = s;
          weakest = x;
        }
      }
      const indicators = others.map((o) => (r.dataset === o ? 1 : 0));
      return { features: [...weakest, ...indicators], label: r.label, weight: usable.length / counts.size / counts.get(`${r.dataset}/${r.label}`)! };
    });
    const fitted = fitLogistic(samples, penalties, nonNegative);
    const shifts = fitted.weights.slice(d);
    model = { bias: fitted.bias + shifts.reduce((a, x) => a + x, 0) / (shifts.length + 1), weights: fitted.weights.slice(0, d) };
  }
  // A number or a name that no source has is a claim no source supports, whatever else the claim gets right:
  // one such term alone takes its claim below the threshold (a rule of the product, not fitted).
  const weights = model.weights.slice();
  for (const name of ['unsupported_numbers', 'unsupported_names'] as const) {
    const i = FEATURE_NAMES.indexOf(name);
    weights[i] = Math.max(weights[i]!, -model.bias + HARD_MARGIN);
  }
  // So is a claim of which no source holds a single term ("Bananas.").
  const uncovered = FEATURE_NAMES.indexOf('uncovered');
  const passage = FEATURE_NAMES.indexOf('passage_uncovered');
  weights[passage] = Math.max(weights[passage]!, -model.bias + HARD_MARGIN - weights[uncovered]!);
  return { bias: model.bias, weights };
}

export interface Measured extends BinaryMetrics {
  auroc: number;
  flagged: number;
}

export function measure(model: Model, rows: readonly RowClaims[], threshold = DEFAULT_GROUNDING_THRESHOLD): Measured {
  const scores = rows.map((r) => rowScore(model, r));
  const gold = rows.map((r) => r.label);
  const predicted = scores.map((s) => s < threshold);
  const m = binaryMetrics(predicted, gold);
  return { ...m, auroc: auroc(scores.map((s) => 1 - s), gold), flagged: predicted.filter(Boolean).length / rows.length };
}

/** Leave-one-dataset-out: for each dataset, the model fitted on all the others, measured on it. */
export function leaveOneDatasetOut(rows: readonly RowClaims[], lambda = 1): Map<string, Measured & { model: Model }> {
  const out = new Map<string, Measured & { model: Model }>();
  for (const [dataset, held] of byDataset(rows)) {
    const model = fit(rows.filter((r) => r.dataset !== dataset), lambda);
    out.set(dataset, { ...measure(model, held), model });
  }
  return out;
}

/** How far below the threshold's logit one unsupported number or name puts a claim. */
const HARD_MARGIN = 0.25;

const APPENDED = 'Visitors adore its romantic evening sparkle.';

/** Runs the check itself on every row (latency, probes) and reports per dataset. */
export function evaluate(rows: readonly EvalRow[], model: Model = DEFAULT_MODEL, threshold = DEFAULT_GROUNDING_THRESHOLD): DatasetReport[] {
  for (const r of rows) checkGrounding(toInput(r), { model });
  const reports: DatasetReport[] = [];
  for (const [dataset, list] of byDataset(rows)) {
    const times: number[] = [];
    const scores: number[] = [];
    let copyN = 0;
    let copyFlagged = 0;
    let yeahFlagged = 0;
    let appendN = 0;
    let rose = 0;
    const hasSpans = list.some((r) => r.spans && r.spans.length > 0);
    const spanCounts = { flaggedSpans: { tp: 0, fp: 0, fn: 0 }, ungroundedClaims: { tp: 0, fp: 0, fn: 0 }, everything: { tp: 0, fp: 0, fn: 0 } };
    for (const r of list) {
      const t0 = performance.now();
      const res = checkGrounding(toInput(r), { model, threshold });
      times.push(performance.now() - t0);
      scores.push(res.score);
      if (hasSpans) {
        const gold = (r.spans ?? []).filter((g) => g.label !== 'Benign');
        const n = r.answer.length;
        add(spanCounts.flaggedSpans, charCounts(res.flaggedSpans, gold, n));
        add(spanCounts.ungroundedClaims, charCounts(res.grounded ? [] : res.claims.filter((c) => !c.grounded), gold, n));
        add(spanCounts.everything, charCounts([{ start: 0, end: n }], gold, n));
      }
      const sentence = probeSentence(r.context[0] ?? '');
      if (sentence) {
        copyN++;
        if (!checkGrounding({ ...toInput(r), answer: sentence }, { model, threshold }).grounded) copyFlagged++;
        if (!checkGrounding({ ...toInput(r), answer: `Yeah. ${sentence}` }, { model, threshold }).grounded) yeahFlagged++;
      }
      if (!/visitor|adore|romantic|evening|sparkle/i.test(r.context.join(' '))) {
        appendN++;
        const text = r.answer.trim();
        const more = checkGrounding({ ...toInput(r), answer: `${text}${/[.!?]$/.test(text) ? '' : '.'} ${APPENDED}` }, { model, threshold });
        if (more.score > res.score) rose++;
      }
    }
    times.sort((a, b) => a - b);
    const gold = list.map((r) => r.hallucinated);
    const m = binaryMetrics(scores.map((s) => s < threshold), gold);
    reports.push({
      dataset,
      rows: list.length,
      ...m,
      auroc: auroc(scores.map((s) => 1 - s), gold),
      flagged: scores.filter((s) => s < threshold).length / list.length,
      latencyMs: { p50: percentile(times, 50), p99: percentile(times, 99) },
      probes: { copyFlagged: copyN ? copyFlagged / copyN : 0, yeahCopyFlagged: copyN ? yeahFlagged / copyN : 0, appendRose: appendN ? rose / appendN : 0 },
      ...(hasSpans
        ? { spans: { flaggedSpans: spanScores(spanCounts.flaggedSpans), ungroundedClaims: spanScores(spanCounts.ungroundedClaims), everything: spanScores(spanCounts.everything) } }
        : {}),
      ...detectorsOf(list),
    });
  }
  return reports;
}

function add(sum: { tp: number; fp: number; fn: number }, c: { tp: number; fp: number; fn: number }): void {
  sum.tp += c.tp;
  sum.fp += c.fp;
  sum.fn += c.fn;
}

function spanScores(c: { tp: number; fp: number; fn: number }): SpanScores {
  const precision = c.tp + c.fp > 0 ? c.tp / (c.tp + c.fp) : 0;
  const recall = c.tp + c.fn > 0 ? c.tp / (c.tp + c.fn) : 0;
  return { precision, recall, f1: f1FromCounts(c) };
}

/** The balanced accuracy at 0.5 of every detector whose P(hallucinated) every row of `list` carries. */
function detectorsOf(list: readonly EvalRow[]): { detectors?: Record<string, number> } {
  const names = Object.keys(list[0]?.baselines ?? {}).filter((name) => list.every((r) => typeof r.baselines?.[name] === 'number'));
  if (names.length === 0) return {};
  const gold = list.map((r) => r.hallucinated);
  const detectors = Object.fromEntries(names.map((name) => [name, binaryMetrics(list.map((r) => r.baselines![name]! >= 0.5), gold).balancedAccuracy]));
  return { detectors };
}

/** The first sentence of 6–40 words of a source, as a copy probe. */
function probeSentence(source: string): string | undefined {
  for (const s of source.split(/(?<=[.!?])\s+|\n+/)) {
    const words = s.trim().split(/\s+/).length;
    if (words >= 6 && words <= 40 && /[.!?]$/.test(s.trim())) return s.trim();
  }
  return undefined;
}

/**
 * Time for one check of `sourceBytes` of sources and `answerBytes` of answer built from the rows: median
 * wall-clock time and median CPU time of the process (steadier on a shared machine).
 */
export function largeInputMs(rows: readonly EvalRow[], sourceBytes = 100_000, answerBytes = 4_000): { wallMs: number; cpuMs: number } {
  let sources = '';
  let answer = '';
  for (let i = 0; sources.length < sourceBytes && rows.length > 0; i++) sources += rows[i % rows.length]!.context.join('\n') + '\n';
  for (let i = 0; answer.length < answerBytes && rows.length > 0; i++) answer += rows[(i * 7) % rows.length]!.answer + '\n';
  const input = { sources: [sources.slice(0, sourceBytes)], answer: answer.slice(0, answerBytes) };
  const times: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < 5; i++) checkGrounding(input);
  for (let i = 0; i < 15; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    checkGrounding(input);
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  times.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  return { wallMs: percentile(times, 50), cpuMs: percentile(cpu, 50) };
}
