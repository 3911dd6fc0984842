import { describe, expect, it } from 'vitest';
import { jsonShapeProblem, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, nestsDeeperThan } from '../../src/json-depth.js';

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
