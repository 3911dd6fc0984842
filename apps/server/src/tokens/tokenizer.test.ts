import { beforeAll, describe, expect, it } from 'vitest';
import { encode as reference } from 'gpt-tokenizer/encoding/o200k_base';
import referenceRanks from 'gpt-tokenizer/bpeRanks/o200k_base';
import { readFileSync } from 'node:fs';
import { countTokens, decodeGenerator, encode, loadTokenizer, readRanks } from './tokenizer.js';

beforeAll(loadTokenizer);

const decode = (tokens: number[]) => [...decodeGenerator(tokens)].join('');

describe('readRanks', () => {
  it("gives exactly the ranks of gpt-tokenizer's generated o200k_base module", async () => {
    const ranks = await readRanks();
    expect(ranks.length).toBe(referenceRanks.length);
    let differing = 0;
    let bytes = 0;
    for (let i = 0; i < ranks.length; i++) {
      const [mine, theirs] = [ranks[i]!, referenceRanks[i]!];
      if (typeof theirs !== 'string') bytes++;
      if (typeof mine === 'string' ? mine !== theirs : typeof theirs === 'string' || mine.join() !== theirs.join()) differing++;
    }
    expect(bytes).toBeGreaterThan(1000); // tokens that are not UTF-8 on their own are byte arrays in both
    expect(differing).toBe(0);
  });
});

/**
 * Deterministic text over scripts, emoji, combining marks, digits, white space runs and special-token text,
 * with no run of more than 64 non-space characters (those are encoded in pieces on purpose, tested below).
 */
function mixedText(seed: number, length: number): string {
  const pieces = ['the ', 'The', ' tower', '1889', ' 3.14', 'naïve', 'café', 'e\u0301', '日本語', '中文', 'Привет', 'مرحبا', '🎉', '👩‍💻', '\n', '\n\n', '   ', '\t', "'s", "n't", '<|endoftext|>', '<|im_start|>', '$', '%', '—', '…', 'https://example.com/a?b=c', 'CamelCase', 'snake_case', '\u00a0', '\ud83d\ude00'];
  let x = seed;
  let out = '';
  while (out.length < length) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += pieces[x % pieces.length];
    if (/\S{40,}$/.test(out)) out += ' ';
  }
  return out;
}

describe('encode', () => {
  it('equals plain o200k_base on mixed text and on this repository\'s README (lines without 65-character runs)', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const text = mixedText(seed, 40 + (seed % 7) * 60);
      expect(text).not.toMatch(/\S{65,}/);
      expect(encode(text)).toEqual(reference(text, { disallowedSpecial: new Set() }));
    }
    const readme = readFileSync(new URL('../../../../README.md', import.meta.url), 'utf8')
      .split('\n')
      .filter((line) => !/\S{65,}/.test(line))
      .join('\n');
    expect(readme.length).toBeGreaterThan(10_000);
    // The README spells special tokens (how usage is counted): as ordinary text, as in the mixed text above.
    expect(encode(readme)).toEqual(reference(readme, { disallowedSpecial: new Set() }));
  });

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
