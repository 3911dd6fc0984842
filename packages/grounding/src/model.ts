import type { ClaimSupport } from './support.js';

/** The measures of a claim the calibration reads, in the order of `Model.weights`. */
export const FEATURE_NAMES = ['uncovered', 'passage_uncovered', 'unsupported_numbers', 'unsupported_names', 'pairs_uncovered'] as const;

/**
 * P(a claim is unsupported) = σ(bias + Σ wᵢ·xᵢ). Every weight is non-negative and every feature can only
 * fall as sources are added, so support never falls when a source is added.
 */
export interface Model {
  bias: number;
  weights: readonly number[];
}

/**
 * Fitted by `eval-cli --fit` on all dev datasets together, each dataset and class weighing the same
 * (class-balanced, L2-regularised, weights constrained to be non-negative, an intercept per dataset of which
 * the bias is the mean).
 */
export const DEFAULT_MODEL: Model = {
  bias: -2.1167,
  weights: [0.1191, 2.2476, 2.3667, 2.3667, 1.5368],
};

/** What the calibration reads of a claim's support. */
export type ClaimMeasures = Pick<ClaimSupport, 'coverage' | 'passage' | 'unsupportedNumbers' | 'unsupportedNames' | 'pairCoverage'>;

export function features(c: ClaimMeasures): number[] {
  return [
    1 - c.coverage,
    1 - Math.max(0, c.passage?.score ?? 0),
    c.unsupportedNumbers,
    c.unsupportedNames,
    1 - c.pairCoverage,
  ];
}

/** A claim every measure of which is as good as it gets: the sources hold all of it, in one sentence. */
export const PERFECT: ClaimMeasures = {
  coverage: 1,
  passage: { source: 0, start: 0, end: 0, score: 1, negationMismatch: false, sentences: 0 },
  unsupportedNumbers: 0,
  unsupportedNames: 0,
  pairCoverage: 1,
};

/** Support of a claim in 0..1: 1 − P(unsupported). */
export function claimSupport(model: Model, c: ClaimMeasures): number {
  const x = features(c);
  let z = model.bias;
  for (let i = 0; i < x.length; i++) z += (model.weights[i] ?? 0) * x[i]!;
  return 1 / (1 + Math.exp(z));
}
