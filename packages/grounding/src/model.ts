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
  long: { bias: 3.974, weights: [0.0543, -8.8448, 0.6247, 0, 0, 0.0459, 0.8231, 1.2082, -0.1729, 1.6277, 0.2064, 0.0164, -3.6564, 0.8504, 0.1641, -0.4676] },
};

/** P(hallucinated) for a feature vector with `contentWords` content words in the answer. */
export function predict(model: Model, features: readonly number[], contentWords: number): number {
  const m = contentWords <= model.shortMaxWords ? model.short : model.long;
  let z = m.bias;
  for (let i = 0; i < features.length; i++) z += (m.weights[i] ?? 0) * features[i]!;
  return 1 / (1 + Math.exp(-z));
}
