/** Binary classification figures with "hallucinated" as the positive class. */
export interface BinaryMetrics {
  n: number;
  balancedAccuracy: number;
  f1: number;
  precision: number;
  recall: number;
}

export function binaryMetrics(predicted: readonly boolean[], gold: readonly boolean[]): BinaryMetrics {
  let tp = 0, fp = 0, tn = 0, fn = 0;
  for (let i = 0; i < gold.length; i++) {
    if (gold[i]) predicted[i] ? tp++ : fn++;
    else predicted[i] ? fp++ : tn++;
  }
  const tpr = tp + fn > 0 ? tp / (tp + fn) : 0;
  const tnr = tn + fp > 0 ? tn / (tn + fp) : 0;
  const precision = tp + fp > 0 ? tp / (tp + fp) : 0;
  return {
    n: gold.length,
    balancedAccuracy: (tpr + tnr) / 2,
    f1: precision + tpr > 0 ? (2 * precision * tpr) / (precision + tpr) : 0,
    precision,
    recall: tpr,
  };
}

export interface Range {
  start: number;
  end: number;
}

/** Character-level counts of predicted vs gold ranges in one text (overlaps merged). */
export function charCounts(predicted: readonly Range[], gold: readonly Range[], length: number): { tp: number; fp: number; fn: number } {
  const p = mask(predicted, length);
  const g = mask(gold, length);
  let tp = 0, fp = 0, fn = 0;
  for (let i = 0; i < length; i++) {
    if (p[i] && g[i]) tp++;
    else if (p[i]) fp++;
    else if (g[i]) fn++;
  }
  return { tp, fp, fn };
}

export function f1FromCounts(c: { tp: number; fp: number; fn: number }): number {
  return c.tp > 0 ? (2 * c.tp) / (2 * c.tp + c.fp + c.fn) : 0;
}

function mask(ranges: readonly Range[], length: number): Uint8Array {
  const m = new Uint8Array(length);
  for (const r of ranges) m.fill(1, Math.max(0, r.start), Math.min(length, r.end));
  return m;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
