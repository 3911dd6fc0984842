import { describe, expect, it } from 'vitest';
import { jsonShapeProblem, JsonShapeScan, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, nestsDeeperThan, Positions } from '../../src/json-depth.js';

describe('nestsDeeperThan', () => {
  const nested = (depth: number) => `{"a":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
  it.each([
    [nested(MAX_JSON_DEPTH), false],
    [nested(MAX_JSON_DEPTH + 1), true],
    [`{"text":"${'['.repeat(1000)}"}`, false],
    [`{"text":"a \\" ${'{'.repeat(1000)}"}`, false],
    [`{"text":"ends in a backslash \\\\","deep":${'['.repeat(300)}${']'.repeat(300)}}`, true],
    ['[1,2,[3,[4]]]', false],
    ['{"unterminated": "[[[[', false],
    [`{"text":"é€😀 [[[ \\"","deep":${'['.repeat(300)}${']'.repeat(300)}}`, true],
  ])('%#: %s → %s', (json, deeper) => {
    expect(nestsDeeperThan(json)).toBe(deeper);
    expect(nestsDeeperThan(Buffer.from(json))).toBe(deeper);
  });

  it('the same on JSON.stringify of a deep value as on the text', () => {
    let value: unknown = 'leaf "with [ brackets" \\ and a backslash';
    for (let i = 0; i < 300; i++) value = i % 2 ? [value] : { k: value };
    const json = JSON.stringify(value);
    expect(nestsDeeperThan(json, 299)).toBe(true);
    expect(nestsDeeperThan(json, 300)).toBe(false);
  });
});

describe('jsonShapeProblem', () => {
  const object = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":[1,2]`).join(',')}}`;
  it.each([
    [object(MAX_JSON_MEMBERS), undefined],
    [object(MAX_JSON_MEMBERS + 1), { kind: 'members' }],
    [`{"model":"m","metadata":{"a":${object(MAX_JSON_MEMBERS + 1)}}}`, { kind: 'members', field: 'metadata' }],
    [`{"tools":[{"x":1},{"y":${object(MAX_JSON_MEMBERS + 1)}}]}`, { kind: 'members', field: 'tools' }],
    // Commas of arrays, of strings and of the enclosing object's other levels are not an object's members.
    [`[${Array.from({ length: 3 * MAX_JSON_MEMBERS }, (_, i) => i).join(',')}]`, undefined],
    [`{"text":"${','.repeat(3 * MAX_JSON_MEMBERS)}"}`, undefined],
    [`{"a":{${Array.from({ length: MAX_JSON_MEMBERS }, (_, i) => `"k${i}":1`).join(',')}},"b":{${Array.from({ length: MAX_JSON_MEMBERS }, (_, i) => `"k${i}":1`).join(',')}}}`, undefined],
    [`${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}`, { kind: 'depth' }],
    [`{"x":"a value, not a name","x_extra":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}`, { kind: 'depth', field: 'x_extra' }],
    ['}}}],,,{"a":1}', undefined],
  ])('%#', (json, problem) => {
    expect(jsonShapeProblem(json)).toEqual(problem);
    expect(jsonShapeProblem(Buffer.from(json))).toEqual(problem);
  });
});

describe('jsonShapeProblem with a limit of array items', () => {
  const zeros = (n: number) => `[${new Array<number>(n).fill(0).join(',')}]`;
  it.each([
    [zeros(10), undefined],
    [zeros(11), { kind: 'items' }],
    [`{"model":"m","x_extra":{"a":${zeros(11)}}}`, { kind: 'items', field: 'x_extra' }],
    // An object's members, a string's commas and the items of two arrays apart are not one array's items.
    [`{"a":${zeros(10)},"b":${zeros(10)},"c":"${','.repeat(30)}","d":{${Array.from({ length: 20 }, (_, i) => `"k${i}":1`).join(',')}}}`, undefined],
    [`[${new Array<string>(10).fill(zeros(10)).join(',')}]`, undefined],
  ])('%#', (json, problem) => {
    expect(jsonShapeProblem(json, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, 10)).toEqual(problem);
    expect(jsonShapeProblem(Buffer.from(json), MAX_JSON_DEPTH, MAX_JSON_MEMBERS, 10)).toEqual(problem);
    // Not limited unless asked (an upstream's answers, svc's own stored JSON).
    expect(jsonShapeProblem(json)).toBeUndefined();
  });
});

describe('Positions', () => {
  it('keeps what is pushed across chunks, and a sealed list (its last chunk cut) reads the same', () => {
    for (const n of [0, 1, 65_535, 65_536, 65_537, 200_000]) {
      const positions = new Positions();
      for (let i = 0; i < n; i++) positions.push(3 * i + 1);
      positions.seal();
      expect(positions.length).toBe(n);
      const wrong = Array.from({ length: n }, (_, i) => i).filter((i) => positions.at(i) !== 3 * i + 1);
      expect(wrong).toEqual([]);
    }
  });

  it("a large container's commas, past one chunk, as they stand in the text; the level's next container starts empty", () => {
    const json = `[[${new Array<number>(100_000).fill(7).join(',')}],[1,2]]`;
    const scan = new JsonShapeScan(Buffer.from(json), MAX_JSON_DEPTH, Infinity, 1);
    scan.scan(json.length);
    const [inner, small] = scan.roots[0]!.large;
    const expected = [...json.slice(0, inner!.close)].flatMap((c, i) => (c === ',' && i > inner!.open ? [i] : []));
    expect(inner!.commas.length).toBe(99_999);
    expect(Array.from({ length: inner!.commas.length }, (_, k) => inner!.commas.at(k))).toEqual(expected);
    expect(small!.commas.length).toBe(1);
    expect(small!.commas.at(0)).toBe(json.lastIndexOf(','));
  });
});
