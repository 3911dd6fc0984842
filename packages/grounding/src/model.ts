import { FEATURE_NAMES } from './analyze.js';

/** A logistic model over the analysis features: P(hallucinated) = σ(bias + Σ wᵢ·xᵢ). */
export interface Model {
  bias: number;
  weights: readonly number[];
}

/**
 * Weights fitted by `eval-cli --fit` (L2-regularised logistic regression on the dev set; the
 * cross-validated figures in README.md come from refitting on each training fold).
 */
export const DEFAULT_MODEL: Model = {
  bias: -2,
  weights: FEATURE_NAMES.map((name) =>
    name === 'unsupportedFraction' ? 6 : name === 'badNumbers' || name === 'badEntities' ? 1 : 0,
  ),
};

/** P(hallucinated) for a feature vector. */
export function predict(model: Model, features: readonly number[]): number {
  let z = model.bias;
  for (let i = 0; i < features.length; i++) z += (model.weights[i] ?? 0) * features[i]!;
  return 1 / (1 + Math.exp(-z));
}
