import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ChoiceIndexes } from '../../src/choice-indexes.js';

describe('ChoiceIndexes', () => {
  it('holds small, large, negative and fractional indexes as a Set would', () => {
    const set = new ChoiceIndexes();
    for (const index of [0, 3, 30, 31, 1000, -1, 1.5, 0, 31]) set.add(index);
    expect(set.size).toBe(7);
    for (const index of [0, 3, 30, 31, 1000, -1, 1.5]) expect(set.has(index)).toBe(true);
    for (const index of [1, 29, 32, 2 ** 31, -2, 0.5]) expect(set.has(index)).toBe(false);
  });

  it('agrees with Set on any sequence of adds', () => {
    const index = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: -5, max: 2 ** 32 }), fc.double({ noNaN: true }));
    fc.assert(
      fc.property(fc.array(index, { maxLength: 60 }), fc.array(index, { maxLength: 20 }), (added, probes) => {
        const ours = new ChoiceIndexes();
        const theirs = new Set<number>();
        for (const i of added) {
          ours.add(i);
          theirs.add(i);
        }
        expect(ours.size).toBe(theirs.size);
        for (const i of [...added, ...probes]) expect(ours.has(i)).toBe(theirs.has(i));
      }),
    );
  });
});
