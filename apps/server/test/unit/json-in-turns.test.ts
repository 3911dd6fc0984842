import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EscapedString, stringifyInTurns } from '../../src/json-in-turns.js';
import { turns } from '../../src/turns.js';

describe('stringifyInTurns', () => {
  it('gives what JSON.stringify gives, long strings and all (quotes, control characters, surrogate pairs cut at any slice)', async () => {
    const text = fc.string({ unit: fc.constantFrom('a', ' ', '"', '\\', '\n', '\u0001', '\u2028', 'é', '😀', '\ud800', '\udc00'), maxLength: 60 });
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.array(text, { maxLength: 4 }), fc.integer({ min: 1, max: 12 }), async (json, texts, longString) => {
        const value = { texts, json, nested: [{ deep: texts[0] ?? null }] };
        // A clock that always says yield: every slice boundary is crossed. Arrays go an item at a time.
        expect(await stringifyInTurns(value, () => true, longString)).toBe(JSON.stringify(value));
        const list = [value, json, ...texts, undefined, null];
        expect(await stringifyInTurns(list, () => true, longString)).toBe(JSON.stringify(list));
      }),
      { numRuns: 500 },
    );
  });

  it('EscapedString: JSON.stringify of any value holding the string, wherever and however often', async () => {
    const text = fc.string({ unit: fc.constantFrom('a', '"', '\\', '\n', '\u0001', '😀', '\ud800'), minLength: 1, maxLength: 40 });
    await fc.assert(
      fc.asyncProperty(text, fc.jsonValue(), async (long, json) => {
        const escaped = await EscapedString.of(long, () => true);
        const value = { a: long, json, list: [long, 'other', { deep: long }] };
        expect(escaped.stringify(value)).toBe(JSON.stringify(value));
        expect(escaped.stringify(json)).toBe(JSON.stringify(json));
      }),
      { numRuns: 300 },
    );
  });

  it('lets the event loop run while 9 MiB of text is escaped', async () => {
    const instructions = 'The "tower" was finished in 1889.\nIt is 330 metres tall. '.repeat(170_000);
    let served = 0;
    let working = true;
    const other = (async () => {
      while (working) {
        await new Promise((resolve) => setImmediate(resolve));
        served++;
      }
    })();
    const json = await stringifyInTurns({ id: 'resp_1', instructions, output: [] }, turns());
    working = false;
    await other;
    expect(json).toBe(JSON.stringify({ id: 'resp_1', instructions, output: [] }));
    // One JSON.stringify in one step lets the other loop run once, after it.
    expect(served).toBeGreaterThan(1);
  });
});
