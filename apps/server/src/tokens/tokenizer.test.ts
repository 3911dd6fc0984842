import { beforeAll, describe, expect, it } from 'vitest';
import { encode as reference } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens, decodeGenerator, encode, loadTokenizer } from './tokenizer.js';

beforeAll(loadTokenizer);

const decode = (tokens: number[]) => [...decodeGenerator(tokens)].join('');

describe('encode', () => {
  it('equals plain o200k_base on ordinary text', () => {
    for (const text of ['Hello world', 'The Eiffel Tower (330 m) was completed in 1889.', 'naïve café 🎉 日本語', '']) {
      expect(encode(text)).toEqual(reference(text));
    }
  });

  it('round-trips long runs, including surrogate pairs at piece boundaries', () => {
    const runs = ['a'.repeat(1000), `${'x'.repeat(63)}😀${'y'.repeat(200)}`, `pre ${'ab'.repeat(500)} post`, '😀'.repeat(300)];
    for (const text of runs) expect(decode(encode(text))).toBe(text);
  });

  it('stays linear on a 2 MB single word (plain BPE would take hours)', () => {
    const text = 'a'.repeat(2_000_000);
    const count = countTokens(text);
    expect(count).toBeGreaterThan(2_000_000 / 64);
    expect(count).toBeLessThan(2_000_000);
  });
});
