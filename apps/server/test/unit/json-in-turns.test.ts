import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonShapeScan } from '../../src/json-depth.js';
import { EscapedString, parseJsonInTurns, stringifyInTurns } from '../../src/json-in-turns.js';
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

describe('parseJsonInTurns', () => {
  /** JSON.parse's outcome (the value, or that it throws), and parseJsonInTurns' with containers of `largeBytes` or more parsed in parts. */
  async function both(text: string, largeBytes: number, partBytes: number): Promise<[unknown, unknown]> {
    const outcome = async (parse: () => unknown) => {
      try {
        return { value: await parse() };
      } catch (err) {
        return { threw: err instanceof SyntaxError };
      }
    };
    const buffer = Buffer.from(text);
    const scan = new JsonShapeScan(buffer, 10_000, Infinity, largeBytes);
    scan.scan(buffer.length);
    return [await outcome(() => JSON.parse(text)), await outcome(() => parseJsonInTurns(buffer, scan.roots, () => true, 0, partBytes))];
  }

  it('gives what JSON.parse gives, for valid JSON and for JSON spoilt by a character added or taken away anywhere', async () => {
    const spoil = fc.constantFrom(',', '[', ']', '{', '}', ':', '"', '\\', ' ', '0', 'a', '');
    await fc.assert(
      fc.asyncProperty(
        fc.jsonValue(),
        fc.constantFrom(0, 1, '\t'),
        fc.option(fc.tuple(fc.nat(), spoil, fc.boolean())),
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 32 }),
        async (value, indent, change, largeBytes, partBytes) => {
          let text = JSON.stringify({ list: [value, value], value }, null, indent);
          if (change) {
            const [at, char, remove] = change;
            const i = at % (text.length + 1);
            text = text.slice(0, i) + char + text.slice(remove ? i + 1 : i);
          }
          const [expected, actual] = await both(text, largeBytes, partBytes);
          expect(actual).toEqual(expected);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("gives JSON.parse's value exactly (member order, -0, 1e400, __proto__, lone surrogates, every white space) or throws where it does", async () => {
    /** A value as JSON.parse made it, comparable with toEqual: -0 told from 0, members in order, the prototype said. */
    const exact = (v: unknown): unknown => {
      if (Object.is(v, -0)) return '-0';
      if (Array.isArray(v)) return v.map(exact);
      if (v === null || typeof v !== 'object') return v;
      const own = Object.getOwnPropertyNames(v).map((k) => [k, exact((v as Record<string, unknown>)[k])]);
      return { plain: Object.getPrototypeOf(v) === Object.prototype, own };
    };
    const outcome = async (parse: () => unknown) => {
      try {
        return { value: exact(await parse()) };
      } catch (err) {
        return { threw: err instanceof SyntaxError };
      }
    };
    const space = fc.constantFrom('', ' ', '\t', '\n', '\r', '\u00a0', '\ufeff', '\u2028');
    const name = fc.constantFrom('a', 'b', '__proto__', 'constructor', '0', '1', 'x\\"y', '\\u0061');
    const scalar = fc.oneof(
      fc.constantFrom('1e400', '-0', '-0.0e-0', '123456789012345678901234567890', '"\\ud800"', '"\\udc00\\ud800"', '"😀"', '"a,b]}"', '"\\\\"', '"\\""'),
      fc.jsonValue().map((v) => JSON.stringify(v)),
    );
    const { json } = fc.letrec((tie) => ({
      json: fc.oneof(
        { depthSize: 'small' },
        scalar,
        fc.array(fc.tuple(space, tie('json') as fc.Arbitrary<string>, space), { maxLength: 5 }).map((items) => `[${items.map((i) => i.join('')).join(',')}]`),
        fc.array(fc.tuple(space, name, space, tie('json') as fc.Arbitrary<string>), { maxLength: 5 }).map((members) => `{${members.map(([a, k, b, v]) => `${a}"${k}"${b}:${v}`).join(',')}}`),
      ),
    }));
    const spoil = fc.constantFrom(',', '[', ']', '{', '}', ':', '"', '\\', ' ', '\u00a0', '0', '');
    await fc.assert(
      fc.asyncProperty(space, json, space, fc.option(fc.tuple(fc.nat(), spoil, fc.boolean())), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 20 }), async (before, value, after, change, largeBytes, partBytes) => {
        let text = before + value + after;
        if (change) {
          const [at, char, remove] = change;
          const i = at % (text.length + 1);
          text = text.slice(0, i) + char + text.slice(remove ? i + 1 : i);
        }
        // Bytes, as a body arrives (a change may have cut a surrogate pair, which UTF-8 cannot hold).
        const buffer = Buffer.from(text);
        const scan = new JsonShapeScan(buffer, 10_000, Infinity, largeBytes);
        scan.scan(buffer.length);
        const expected = await outcome(() => JSON.parse(buffer.toString('utf8')));
        expect(await outcome(() => parseJsonInTurns(buffer, scan.roots, () => true, 0, partBytes)), text).toEqual(expected);
      }),
      { numRuns: 5000 },
    );
  });

  it("keeps JSON.parse's member order, the later of two members of one name, and a member named __proto__ as its own", async () => {
    const text = '{"b": [1, 2, 3, 4, 5, 6], "1": {"x": [7, 8, 9]}, "b": [10, 11, 12, 13], "__proto__": [{"polluted": true}, 2, 3], "a": []}';
    const [expected, actual] = await both(text, 4, 3);
    expect(actual).toEqual(expected);
    const value = (actual as { value: Record<string, unknown> }).value;
    expect(Object.keys(value)).toEqual(Object.keys(JSON.parse(text) as object));
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses what joins the parts when it is not JSON: trailing or doubled commas, brackets that do not match, text after the value', async () => {
    for (const text of ['[1, 2, 3,]', '[1,, 2, 3]', '[[1, 2, 3], , [4, 5, 6]]', '{"a": [1, 2, 3], }', '{"a" [1, 2, 3]}', '{"a": [1, 2, 3}', '{"a": [1, 2, 3]} x', 'x {"a": [1, 2, 3]}', '{"a": [1, 2, 3] [4]}', '[1, 2, 3] [4, 5, 6]']) {
      const [expected, actual] = await both(text, 2, 2);
      expect(expected, text).toEqual({ threw: true });
      expect(actual, text).toEqual({ threw: true });
    }
  });
});
