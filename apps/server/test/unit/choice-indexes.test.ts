import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ChoiceIndexes, ChoiceNumbers } from '../../src/choice-indexes.js';

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

describe('ChoiceNumbers', () => {
  /** The numbers of `seen`, given as a stream reader gives them: held until settled (or the end), then in order. */
  const numbered = (n: number, seen: number[]) => {
    const numbers = new ChoiceNumbers(n);
    const out: number[] = [];
    let held: number[] = [];
    for (const index of seen) {
      numbers.see(index);
      held.push(index);
      if (numbers.settled) {
        out.push(...held.map((i) => numbers.of(i)));
        held = [];
      }
    }
    numbers.settle();
    return [...out, ...held.map((i) => numbers.of(i))];
  };

  it('keeps 0 … n − 1 in any order; numbers a server counting from 1 by its order; the rest from the lowest free number in the order they appear', () => {
    expect(numbered(2, [1, 0, 0, 1])).toEqual([1, 0, 0, 1]);
    expect(numbered(1, [1, 1, 2])).toEqual([0, 0, 1]);
    expect(numbered(2, [2, 1, 2])).toEqual([1, 0, 1]);
    expect(numbered(3, [3, 1, 2, 1])).toEqual([2, 0, 1, 0]);
    expect(numbered(1, [0, 2 ** 31 - 1, 0])).toEqual([0, 1, 0]);
    // A stray choice took 0 before the upstream's own choice 0 came: that one, and then 1, take the next free numbers.
    expect(numbered(2, [5, 0, 1])).toEqual([0, 1, 2]);
  });

  it('is settled by index 0, or by indexes n − 1 apart; else at the end, from the lowest seen', () => {
    const numbers = new ChoiceNumbers(3);
    numbers.see(2);
    numbers.see(3);
    expect(numbers.settled).toBe(false);
    numbers.see(4);
    expect(numbers.settled).toBe(true);
    expect([2, 3, 4].map((i) => numbers.of(i))).toEqual([0, 1, 2]);
    const zero = new ChoiceNumbers(3);
    zero.see(2);
    zero.see(0);
    expect(zero.settled).toBe(true);
    const short = new ChoiceNumbers(3);
    short.see(2);
    short.settle();
    expect(short.of(2)).toBe(0);
    expect(short.of(1)).toBe(1);
    // Asked before anything settled it: the index asked for is the first.
    expect(new ChoiceNumbers(2).of(1)).toBe(0);
  });

  it('gives distinct indexes distinct numbers, the same index the same number, and keeps a permutation of 0 … n − 1', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 2 }), fc.array(fc.integer({ min: 0, max: 80 }), { maxLength: 80 }), (n, base, raw) => {
        const seen = raw.map((index) => index + base);
        const numbers = new ChoiceNumbers(n);
        for (const index of seen) numbers.see(index);
        numbers.settle();
        const given = new Map<number, number>();
        for (const index of seen) {
          const number = numbers.of(index);
          expect(given.get(index) ?? number).toBe(number);
          given.set(index, number);
        }
        expect(new Set(given.values()).size).toBe(given.size);
        // Indexes base … base + n − 1 with the first of them among them: numbered in their order from 0.
        if (seen.includes(base) && seen.every((index) => index >= base && index < base + n)) for (const [index, number] of given) expect(number).toBe(index - base);
      }),
    );
  });
});
