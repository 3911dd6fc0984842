import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD, type GroundingInput } from './check.js';
import { binaryMetrics, type BinaryMetrics } from './metrics.js';
import type { Model } from './model.js';
import { MIN_CALIBRATION_ROWS } from './min-calibration-rows.js';

/** A checked answer's score and its gold label (true: the sources do not support it). */
export interface LabelledScore {
  score: number;
  hallucinated: boolean;
}

/** How a threshold does on labelled scores; "hallucinated" is the positive class, as in `binaryMetrics`. */
export interface ThresholdMetrics extends BinaryMetrics {
  threshold: number;
  /** Share of the rows flagged (score below the threshold). */
  flagged: number;
}

/** The threshold that does best on labelled scores, and the range of thresholds that do as well. */
export interface ThresholdChoice extends ThresholdMetrics {
  /** Every threshold t with `low < t <= high` flags the same rows as `threshold`. */
  low: number;
  high: number;
}

/** Why labelled rows cannot pick a threshold. */
export type ThresholdErrorCode = 'TOO_FEW_ROWS' | 'ONE_CLASS' | 'INVALID_SCORE';

export class ThresholdError extends Error {
  readonly code: ThresholdErrorCode;
  constructor(code: ThresholdErrorCode, message: string) {
    super(message);
    this.name = 'ThresholdError';
    this.code = code;
  }
}

export { MIN_CALIBRATION_ROWS };

/**
 * Balanced accuracy, F1 and share flagged of `threshold` on labelled scores (flagged: `score < threshold`, the
 * check's own rule).
 *
 * @example
 * thresholdMetrics([{ score: 0.2, hallucinated: true }, { score: 0.8, hallucinated: false }], 0.5).balancedAccuracy; // 1
 */
export function thresholdMetrics(rows: readonly LabelledScore[], threshold: number): ThresholdMetrics {
  const predicted = rows.map((r) => r.score < threshold);
  const m = binaryMetrics(predicted, rows.map((r) => r.hallucinated));
  return { ...m, threshold, flagged: rows.length ? predicted.filter(Boolean).length / rows.length : 0 };
}

/**
 * The threshold in (0, 1) that maximises balanced accuracy on labelled scores. Thresholds between two adjacent
 * scores flag the same rows, so the candidates are the ranges between them; adjacent ranges that do equally
 * well form one interval, and of several intervals that do equally well the widest wins (then the one nearest
 * the default threshold, then the lowest). The threshold returned is the interval's middle, written with as
 * few decimals as keep it within the middle tenth of the interval (`0.23` rather than `0.2304`): as far as
 * the labelled rows can tell from either class.
 *
 * Throws ThresholdError on fewer than `minRows` rows, rows of one class only, or a score outside 0..1.
 *
 * @example
 * const choice = chooseThreshold(labelledScores(rows).filter((r) => r.checked));
 * `SVC_GROUNDING_THRESHOLD=${choice.threshold}`; // with choice.balancedAccuracy, choice.f1, choice.flagged
 */
export function chooseThreshold(rows: readonly LabelledScore[], options: { minRows?: number } = {}): ThresholdChoice {
  const minRows = options.minRows ?? MIN_CALIBRATION_ROWS;
  if (rows.length < minRows) throw new ThresholdError('TOO_FEW_ROWS', `${rows.length} labelled rows: at least ${minRows} are needed to pick a threshold`);
  for (const [i, r] of rows.entries()) {
    if (!Number.isFinite(r.score) || r.score < 0 || r.score > 1) throw new ThresholdError('INVALID_SCORE', `row ${i + 1}: score ${r.score} is not in 0..1`);
  }
  const positives = rows.filter((r) => r.hallucinated).length;
  if (positives === 0 || positives === rows.length) {
    const only = positives === 0 ? 'grounded (hallucinated: false)' : 'hallucinated (hallucinated: true)';
    throw new ThresholdError('ONE_CLASS', `all ${rows.length} rows are ${only}: a threshold needs labelled examples of both`);
  }
  const distinct = [...new Set(rows.map((r) => r.score))].sort((a, b) => a - b);
  // Range j flags the j lowest distinct scores: thresholds in (distinct[j-1], distinct[j]], within (0, 1).
  const ranges: { low: number; high: number; ba: number }[] = [];
  for (let j = 0; j <= distinct.length; j++) {
    const low = j === 0 ? 0 : distinct[j - 1]!;
    const high = j === distinct.length ? 1 : distinct[j]!;
    if (high <= low) continue;
    ranges.push({ low, high, ba: thresholdMetrics(rows, (low + high) / 2).balancedAccuracy });
  }
  const best = Math.max(...ranges.map((r) => r.ba));
  const isBest = (ba: number) => ba >= best - 1e-12;
  let chosen: { low: number; high: number } | undefined;
  const better = (a: { low: number; high: number }, b: { low: number; high: number }) => {
    const width = a.high - a.low - (b.high - b.low);
    if (Math.abs(width) > 1e-12) return width > 0;
    const nearer = Math.abs((b.low + b.high) / 2 - DEFAULT_GROUNDING_THRESHOLD) - Math.abs((a.low + a.high) / 2 - DEFAULT_GROUNDING_THRESHOLD);
    return nearer > 1e-12;
  };
  for (let i = 0; i < ranges.length; i++) {
    if (!isBest(ranges[i]!.ba)) continue;
    let j = i;
    while (j + 1 < ranges.length && isBest(ranges[j + 1]!.ba) && ranges[j + 1]!.low === ranges[j]!.high) j++;
    const interval = { low: ranges[i]!.low, high: ranges[j]!.high };
    if (!chosen || better(interval, chosen)) chosen = interval;
    i = j;
  }
  const { low, high } = chosen!;
  return { ...thresholdMetrics(rows, shortDecimal(low, high)), low, high };
}

/** The middle of (low, high] with the fewest decimals that keep it in the interval's middle tenth. */
function shortDecimal(low: number, high: number): number {
  const middle = (low + high) / 2;
  for (let decimals = 1; decimals <= 12; decimals++) {
    const t = Number(middle.toFixed(decimals));
    if (Math.abs(t - middle) <= (high - low) / 20 && t > 0 && t < 1) return t;
  }
  return middle;
}

/** A labelled answer as the evaluation files hold it (see shared/eval/README.md). */
export interface LabelledAnswer extends GroundingInput {
  hallucinated: boolean;
}

/**
 * Scores labelled answers with the check itself (as the server runs it), for `chooseThreshold`. `checked` is
 * false where the check has nothing to score (no source text, no answer text): such answers score 1 at any
 * threshold, so they tell nothing about where it should be.
 *
 * @example
 * const choice = chooseThreshold(labelledScores([{ sources: [doc], question, answer, hallucinated: false }, …]).filter((r) => r.checked));
 */
export function labelledScores(rows: readonly LabelledAnswer[], options: { model?: Model } = {}): (LabelledScore & { checked: boolean })[] {
  return rows.map((r) => {
    const result = checkGrounding({ sources: r.sources, answer: r.answer, question: r.question }, options.model ? { model: options.model } : {});
    return { score: result.score, hallucinated: r.hallucinated, checked: result.checked };
  });
}
