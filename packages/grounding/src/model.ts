/** Logistic weights: P(hallucinated) = σ(bias + Σ wᵢ·xᵢ) over the analysis features. */
export interface Logistic {
  bias: number;
  weights: readonly number[];
}

/**
 * Short answers (a name, a date, one sentence) and long ones (summaries) fail in different ways, so
 * each gets its own weights; `shortMaxWords` content words is the boundary.
 */
export interface Model {
  shortMaxWords: number;
  short: Logistic;
  long: Logistic;
}

/**
 * Weights fitted by `eval-cli --fit` (L2-regularised, class-balanced logistic regression on the dev
 * set); the cross-validated figures in README.md refit them on each training fold.
 */
export const DEFAULT_MODEL: Model = {
  shortMaxWords: 15,
  // Weights follow FEATURE_NAMES in analyze.ts.
  short: { bias: -8.5265, weights: [0, 2.147, -12.2067, 5.8028, 5.1291, 2.8041, 2.6447, 7.6864, 3.2731, 6.4509, -1.2885, 0, -7.4531, 1.0511, 0, 1.532] },
  // Long answers use only the coverage features and the hard signals (see LONG_FEATURES in evaluate.ts).
  long: { bias: -1.1397, weights: [0.0746, 0, 0, 0, 0, 0.0226, 0.6579, 1.3091, 0, 0, 0, 0, 0, 0, 0, 0] },
};

/** P(hallucinated) for a feature vector with `contentWords` content words in the answer. */
export function predict(model: Model, features: readonly number[], contentWords: number): number {
  const m = contentWords <= model.shortMaxWords ? model.short : model.long;
  let z = m.bias;
  for (let i = 0; i < features.length; i++) z += (m.weights[i] ?? 0) * features[i]!;
  return 1 / (1 + Math.exp(-z));
}
