import { DEFAULT_GROUNDING_THRESHOLD } from './check.js';
import { byDataset, rowScore, type RowClaims } from './evaluate.js';
import { percentile } from './metrics.js';
import type { Model } from './model.js';
import { seededRandom } from './seeded-random.js';
import { chooseThreshold, ThresholdError, thresholdMetrics, type LabelledScore, type ThresholdChoice } from './threshold.js';

/** What a threshold picked on k labelled rows of a dataset does on the rest of it, over many draws. */
export interface DrawsAtK {
  k: number;
  /** Mean and 10th percentile over the draws of the balanced accuracy on the rows not drawn. */
  mean: number;
  p10: number;
  /** Median of the thresholds picked. */
  medianThreshold: number;
  /** Draws of one class only, drawn again (the calibration refuses them). */
  redrawn: number;
}

export interface DatasetDraws {
  dataset: string;
  rows: number;
  /** Balanced accuracy at DEFAULT_GROUNDING_THRESHOLD on all its rows. */
  atDefault: number;
  /** The dataset's own best threshold on all its rows (the ceiling for any threshold). */
  oracle: ThresholdChoice;
  byK: DrawsAtK[];
}

/** k distinct indices of 0..n-1 drawn uniformly (partial Fisher–Yates), and the others. */
function draw(n: number, k: number, next: () => number): { drawn: number[]; rest: number[] } {
  const idx = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(next() * (n - i));
    [idx[i], idx[j]] = [idx[j]!, idx[i]!];
  }
  return { drawn: idx.slice(0, k), rest: idx.slice(k) };
}

/**
 * How much an operator gains by picking the threshold on k labelled rows of their own traffic: for each dataset,
 * with the model fitted without it (`models`, from `leaveOneDatasetOut`), `draws` times draw k of its rows
 * uniformly at random (not stratified: as labelled traffic comes; a draw of one class only is drawn again, as
 * the calibration refuses it), pick the threshold on them with `chooseThreshold`, and measure balanced
 * accuracy on the dataset's other rows.
 *
 * @example
 * const lodo = leaveOneDatasetOut(claims);
 * calibrationDraws(claims, new Map([...lodo].map(([d, m]) => [d, m.model])), [20, 50, 100]);
 */
export function calibrationDraws(
  rows: readonly RowClaims[],
  models: ReadonlyMap<string, Model>,
  ks: readonly number[],
  options: { draws?: number; seed?: number } = {},
): DatasetDraws[] {
  const draws = options.draws ?? 200;
  const seed = options.seed ?? 1;
  const out: DatasetDraws[] = [];
  for (const [dataset, list] of byDataset(rows)) {
    const model = models.get(dataset);
    if (!model) throw new Error(`no model for ${dataset}`);
    const scored: LabelledScore[] = list.map((r) => ({ score: rowScore(model, r), hallucinated: r.label }));
    const byK: DrawsAtK[] = [];
    for (const k of ks) {
      if (!Number.isInteger(k) || k < 2 || k >= scored.length) throw new RangeError(`k = ${k}: draw from 2 to ${scored.length - 1} rows of ${dataset}`);
      const next = seededRandom(seed * 1_000_003 + k * 7919 + out.length);
      const accuracies: number[] = [];
      const thresholds: number[] = [];
      let redrawn = 0;
      while (accuracies.length < draws) {
        const { drawn, rest } = draw(scored.length, k, next);
        let choice: ThresholdChoice;
        try {
          choice = chooseThreshold(drawn.map((i) => scored[i]!), { minRows: k });
        } catch (err) {
          if (err instanceof ThresholdError && err.code === 'ONE_CLASS' && ++redrawn < 100 * draws) continue;
          throw err;
        }
        thresholds.push(choice.threshold);
        accuracies.push(thresholdMetrics(rest.map((i) => scored[i]!), choice.threshold).balancedAccuracy);
      }
      accuracies.sort((a, b) => a - b);
      thresholds.sort((a, b) => a - b);
      byK.push({ k, mean: accuracies.reduce((a, x) => a + x, 0) / draws, p10: percentile(accuracies, 10), medianThreshold: percentile(thresholds, 50), redrawn });
    }
    out.push({
      dataset,
      rows: list.length,
      atDefault: thresholdMetrics(scored, DEFAULT_GROUNDING_THRESHOLD).balancedAccuracy,
      oracle: chooseThreshold(scored, { minRows: 2 }),
      byK,
    });
  }
  return out;
}
