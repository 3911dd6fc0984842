import { describe, expect, it } from 'vitest';
import { calibrationDraws } from './calibration-draws.js';
import type { RowClaims } from './evaluate.js';
import type { Model } from './model.js';

// One measure decides: support falls as the first feature rises, and is 0.5 where it is 0.25. Kind 'low' is
// separable at a support of about 0.1, far below the default threshold; kind 'mid' at 0.5, 10 % of its labels
// on the wrong side.
const MODEL: Model = { bias: -1, weights: [4, 0, 0, 0, 0] };

function kind(dataset: string, cut: number, noise: number): RowClaims[] {
  const rows: RowClaims[] = [];
  for (let i = 0; i < 120; i++) {
    const x = ((i * 37) % 120) / 120;
    const flipped = (i * 53) % 100 < noise * 100;
    rows.push({ dataset, label: x > cut !== flipped, claims: [[[x, 0, 0, 0, 0]]] });
  }
  return rows;
}

const rows = [...kind('low', 0.85, 0), ...kind('mid', 0.25, 0.1)];
const models = new Map([
  ['low', MODEL],
  ['mid', MODEL],
]);

describe('calibrationDraws', () => {
  const results = calibrationDraws(rows, models, [20, 60], { draws: 50 });
  const low = results.find((r) => r.dataset === 'low')!;

  it('on a kind the default threshold misses, a threshold picked on 20 rows recovers most of the gap', () => {
    expect(low.atDefault).toBeLessThan(0.7);
    expect(low.oracle.balancedAccuracy).toBe(1);
    expect(low.byK[0]!.k).toBe(20);
    expect(low.byK[0]!.mean).toBeGreaterThan(0.9);
    expect(low.byK[1]!.mean).toBeGreaterThanOrEqual(low.byK[0]!.mean);
    expect(low.byK[0]!.p10).toBeLessThanOrEqual(low.byK[0]!.mean);
    expect(low.byK[0]!.medianThreshold).toBeLessThan(0.5);
  });

  it('is the same on every run (fixed seed), and another seed draws other rows', () => {
    expect(calibrationDraws(rows, models, [20, 60], { draws: 50 })).toEqual(results);
    expect(calibrationDraws(rows, models, [20, 60], { draws: 50, seed: 2 })).not.toEqual(results);
  });

  it.each([1, 120, 2.5])('refuses k = %s', (k) => {
    expect(() => calibrationDraws(rows, models, [k])).toThrow(RangeError);
  });

  it('needs a model for every dataset', () => {
    expect(() => calibrationDraws(rows, new Map([['low', MODEL]]), [20])).toThrow(/no model for mid/);
  });
});
