import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../src/json-depth.js';

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
