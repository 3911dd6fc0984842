import { describe, expect, it } from 'vitest';
import { idMatches, shortId, truncate } from '../src/short-id.js';

describe('short ids', () => {
  it('keep the random tail of an id', () => {
    expect(shortId('whd_0193a1b2c3d4e5f60718293a4b5c6d7e')).toBe('4b5c6d7e');
    expect(shortId('abc')).toBe('abc');
  });

  it.each([
    ['whd_0193a1b2c3d4e5f60718293a4b5c6d7e', true],
    ['4b5c6d7e', true],
    ['…4b5c6d7e', true],
    ['6d7e', true],
    ['d7e', false],
    ['4b5c6d7f', false],
  ])('%s names the delivery: %s', (candidate, expected) => {
    expect(idMatches('whd_0193a1b2c3d4e5f60718293a4b5c6d7e', candidate)).toBe(expected);
  });

  it('truncate ends a cut text with …', () => {
    expect(truncate('chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9', 14)).toBe('chatcmpl-3Jx0…');
    expect(truncate('short', 14)).toBe('short');
  });
});
