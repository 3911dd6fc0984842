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
 * (class-balanced, L2-regularised, weights constrained to be non-negative).
 */
export const DEFAULT_MODEL: Model = {
  bias: -1.6696,
  weights: [0.5199, 1.1893, 1.9196, 1.9196, 1.1785],
};

export function features(c: ClaimSupport): number[] {
  return [
    1 - c.coverage,
    1 - Math.max(0, c.passage?.score ?? 0),
    c.unsupportedNumbers,
    c.unsupportedNames,
    1 - c.pairCoverage,
  ];
}

/** Support of a claim in 0..1: 1 − P(unsupported). */
export function claimSupport(model: Model, c: ClaimSupport): number {
  const x = features(c);
  let z = model.bias;
  for (let i = 0; i < x.length; i++) z += (model.weights[i] ?? 0) * x[i]!;
  return 1 / (1 + Math.exp(z));
}
