import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonDepthScanner, MAX_JSON_DEPTH, nestsDeeperThan } from '../../src/json-depth.js';

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

/** Character by character: a backslash in a string escapes what follows it. */
function reference(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (const c of text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') {
      if (++depth > limit) return true;
    } else if (c === ']' || c === '}') depth--;
  }
  return false;
}

describe('JsonDepthScanner', () => {
  it('answers as nestsDeeperThan over the whole text, however the UTF-8 bytes are cut into pieces', () => {
    // Brackets, quotes and runs of backslashes inside and outside strings, and multi-byte characters to cut through.
    const piece = fc.constantFrom('[', ']', '{', '}', '"', '\\', '\\\\', '\\"', 'a', ' ', 'é', '😀', ':', ',');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 80 }), fc.array(fc.nat(), { maxLength: 6 }), fc.integer({ min: 0, max: 6 }), (pieces, cuts, limit) => {
        const bytes = Buffer.from(pieces.join(''));
        const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const scanner = new JsonDepthScanner(limit);
        let from = 0;
        for (const cut of [...at, bytes.length]) {
          scanner.feed(bytes.subarray(from, cut));
          from = cut;
        }
        const expected = reference(pieces.join(''), limit);
        expect(scanner.exceeded).toBe(expected);
        expect(nestsDeeperThan(bytes, limit)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });
});
