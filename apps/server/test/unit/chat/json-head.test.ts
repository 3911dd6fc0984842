import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonHead } from '../../../src/chat/request.js';

describe('jsonHead (how an error message quotes a role or type that is not a string)', () => {
  it('is JSON.stringify where that is short, and starts as it does where it is long', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 1, max: 300 }), (value, max) => {
        const whole = JSON.stringify(value);
        const head = jsonHead(value, max);
        if (whole.length <= max) expect(head).toBe(whole);
        else expect(head.startsWith(whole.slice(0, max))).toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });

  it('stops near its limit on a megabytes-long array or object, and does not cut an emoji in half', () => {
    const array = Array.from({ length: 200_000 }, (_, i) => `item ${i}`);
    expect(jsonHead(array, 256).length).toBeLessThan(300);
    const object = Object.fromEntries(array.map((v, i) => [`k${i}`, v]));
    expect(jsonHead(object, 256).length).toBeLessThan(300);
    expect(jsonHead(['x'.repeat(10_000_000)], 256).length).toBeLessThan(300);
    expect(jsonHead(['x'.repeat(255) + '😀'.repeat(10)], 256)).toBe(`["${'x'.repeat(255)}😀"]`);
  });
});
