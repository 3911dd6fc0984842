import { describe, expect, it } from 'vitest';
import { seededRandom } from './seeded-random.js';

describe('seededRandom', () => {
  it("is mulberry32: seed 0's first number is the published one", () => {
    expect(seededRandom(0)()).toBe(0.26642920868471265);
  });

  it('gives the same sequence for the same seed, within [0, 1)', () => {
    const a = seededRandom(34);
    const b = seededRandom(34);
    const drawn = Array.from({ length: 1000 }, () => a());
    expect(drawn).toEqual(Array.from({ length: 1000 }, () => b()));
    expect(drawn.slice(0, 3)).toEqual([0.6068435220513493, 0.8235559528693557, 0.11563770682550967]);
    expect(drawn.every((x) => x >= 0 && x < 1)).toBe(true);
  });
});
