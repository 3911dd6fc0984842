/** Logistic weights: P(positive) = σ(bias + Σ wᵢ·xᵢ). */
export interface Logistic {
  bias: number;
  weights: readonly number[];
}

export interface Sample {
  features: readonly number[];
  label: boolean;
  weight: number;
}

/**
 * L2-regularised logistic regression by Newton's method. Features are standardised for the fit and
 * the returned model is expressed on the raw features, so `predict` needs no scaler. `lambda` is one
 * penalty for every weight or one per feature (a larger one shrinks that feature's weight harder).
 */
export function fitLogistic(samples: readonly Sample[], lambda: number | readonly number[] = 1, nonNegative: ReadonlySet<number> = new Set()): Logistic {
  // Constrained weights that come out negative are pinned to 0 and the rest refitted.
  const pinned = new Set<number>();
  for (;;) {
    const model = fitFree(samples, lambda, pinned);
    const wrong = [...nonNegative].filter((j) => !pinned.has(j) && (model.weights[j] ?? 0) < 0);
    if (wrong.length === 0) return model;
    for (const j of wrong) pinned.add(j);
  }
}

function fitFree(samples: readonly Sample[], lambda: number | readonly number[], pinned: ReadonlySet<number>): Logistic {
  const d = samples[0]?.features.length ?? 0;
  const mean = new Array<number>(d).fill(0);
  const sd = new Array<number>(d).fill(0);
  let wsum = 0;
  for (const s of samples) {
    wsum += s.weight;
    for (let j = 0; j < d; j++) mean[j]! += s.weight * s.features[j]!;
  }
  for (let j = 0; j < d; j++) mean[j]! /= wsum;
  for (const s of samples) for (let j = 0; j < d; j++) sd[j]! += s.weight * (s.features[j]! - mean[j]!) ** 2;
  for (let j = 0; j < d; j++) sd[j] = Math.sqrt(sd[j]! / wsum) || 1;
  const x = samples.map((s) => [1, ...s.features.map((v, j) => (pinned.has(j) ? 0 : (v - mean[j]!) / sd[j]!))]);
  const beta = new Array<number>(d + 1).fill(0);
  for (let iter = 0; iter < 50; iter++) {
    const grad = new Array<number>(d + 1).fill(0);
    const hess = Array.from({ length: d + 1 }, () => new Array<number>(d + 1).fill(0));
    for (let i = 0; i < samples.length; i++) {
      const xi = x[i]!;
      let z = 0;
      for (let j = 0; j <= d; j++) z += beta[j]! * xi[j]!;
      const p = 1 / (1 + Math.exp(-z));
      const w = samples[i]!.weight;
      const r = w * ((samples[i]!.label ? 1 : 0) - p);
      const h = w * p * (1 - p);
      for (let j = 0; j <= d; j++) {
        grad[j]! += r * xi[j]!;
        for (let k = 0; k <= d; k++) hess[j]![k]! += h * xi[j]! * xi[k]!;
      }
    }
    for (let j = 1; j <= d; j++) {
      const l = typeof lambda === 'number' ? lambda : (lambda[j - 1] ?? 0);
      grad[j]! -= l * beta[j]!;
      hess[j]![j]! += l;
    }
    hess[0]![0]! += 1e-9;
    const step = solve(hess, grad);
    let change = 0;
    for (let j = 0; j <= d; j++) {
      beta[j]! += step[j]!;
      change = Math.max(change, Math.abs(step[j]!));
    }
    if (change < 1e-8) break;
  }
  const weights = beta.slice(1).map((b, j) => b / sd[j]!);
  const bias = beta[0]! - weights.reduce((acc, w, j) => acc + w * mean[j]!, 0);
  return { bias, weights };
}

/** Gaussian elimination with partial pivoting; `a` is symmetric positive definite here. */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[p]![c]!)) p = r;
    [m[c], m[p]] = [m[p]!, m[c]!];
    const pivot = m[c]![c]! || 1e-12;
    for (let r = c + 1; r < n; r++) {
      const f = m[r]![c]! / pivot;
      for (let k = c; k <= n; k++) m[r]![k]! -= f * m[c]![k]!;
    }
  }
  const out = new Array<number>(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    let s = m[r]![n]!;
    for (let k = r + 1; k < n; k++) s -= m[r]![k]! * out[k]!;
    out[r] = s / (m[r]![r]! || 1e-12);
  }
  return out;
}
