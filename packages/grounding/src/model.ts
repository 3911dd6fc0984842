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
  short: { bias: -8.803, weights: [0, 1.4693, -9.1296, 5.6935, 5.545, 0, 3.6069, 8.2174, 3.1385, 3.3294, -0.5954, 0, -7.2837, 0.9387, 0, 1.585] },
  long: { bias: 3.817, weights: [0.0631, -8.4247, 0.5553, 0, 0, 0.0507, 0.83, 1.1003, -0.1456, 1.6042, 0.0597, 0.0166, -3.6466, 0.8292, 0.1484, -0.4526] },
};

/** P(hallucinated) for a feature vector with `contentWords` content words in the answer. */
export function predict(model: Model, features: readonly number[], contentWords: number): number {
  const m = contentWords <= model.shortMaxWords ? model.short : model.long;
  let z = m.bias;
  for (let i = 0; i < features.length; i++) z += (m.weights[i] ?? 0) * features[i]!;
  return 1 / (1 + Math.exp(-z));
}
