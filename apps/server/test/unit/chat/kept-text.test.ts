import { describe, expect, it } from 'vitest';
import { KeptTexts, MAX_KEPT_TEXT_CHARS } from '../../../src/chat/kept-text.js';

describe('KeptTexts', () => {
  it("keeps each choice's pieces in order, read at any point", () => {
    const texts = new KeptTexts();
    const words = Array.from({ length: 1000 }, (_, i) => ` w${i}`);
    words.forEach((word, i) => {
      texts.append(0, word);
      if (i % 3 === 0) texts.append(2, word.toUpperCase());
      if (i === 500) expect(texts.text(0)).toBe(words.slice(0, 501).join(''));
    });
    expect(texts.text(0)).toBe(words.join(''));
    expect(texts.text(1)).toBe('');
    expect(texts.text(2)).toBe(words.filter((_, i) => i % 3 === 0).join('').toUpperCase());
    const all = texts.all();
    expect(all).toHaveLength(3);
    expect(1 in all).toBe(false);
    expect(all[0]).toBe(words.join(''));
  });

  it('a choice with only empty pieces has an empty text', () => {
    const texts = new KeptTexts();
    texts.append(1, '');
    const all = texts.all();
    expect(all).toHaveLength(2);
    expect(0 in all).toBe(false);
    expect(all[1]).toBe('');
  });

  it(`stops keeping at ${MAX_KEPT_TEXT_CHARS} characters, cutting the piece that crosses it`, () => {
    const texts = new KeptTexts();
    const big = 'x'.repeat(2 ** 27);
    texts.append(0, big);
    texts.append(0, big.slice(0, 2 ** 27 - 3));
    texts.append(0, 'abcdef');
    texts.append(0, 'more');
    const text = texts.text(0);
    expect(text.length).toBe(MAX_KEPT_TEXT_CHARS);
    expect(text.endsWith('xabc')).toBe(true);
  });
});
