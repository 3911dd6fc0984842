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
    // The choices that have text, in order of index.
    expect(texts.all()).toEqual([words.join(''), words.filter((_, i) => i % 3 === 0).join('').toUpperCase()]);
  });

  it('a choice with only empty pieces has an empty text', () => {
    const texts = new KeptTexts();
    texts.append(1, '');
    expect(texts.all()).toEqual(['']);
  });

  it("takes the upstream's choice index as it comes: 2^31 − 1 is one choice, not two billion", () => {
    const texts = new KeptTexts();
    texts.append(2 ** 31 - 1, 'far');
    texts.append(0, 'near');
    texts.append(1e300, 'farther');
    expect(texts.all()).toEqual(['near', 'far', 'farther']);
    expect(texts.text(2 ** 31 - 1)).toBe('far');
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
