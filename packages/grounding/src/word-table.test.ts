import { describe, expect, it } from 'vitest';
import { WordTable } from './word-table.js';

describe('WordTable', () => {
  it('finds a spelling by its range in any text: short ASCII, long and non-ASCII spellings', () => {
    const table = new WordTable<number>(100, 40);
    const words = ['boots', 'Northwind', 'Zoe\u0301', 'Café', 'a', "Omura's", 'receipts', '181,674,817'];
    words.forEach((w, i) => table.set(w, i));
    words.forEach((w, i) => expect(table.get(`[${w}]`, 1, w.length + 1)).toBe(i));
    expect(table.get('boot', 0, 4)).toBeUndefined();
    expect(table.get('boots!', 0, 6)).toBeUndefined();
    expect(table.get('Northwinds', 0, 10)).toBeUndefined();
    expect(table.get('\u0000boots', 1, 6)).toBe(0);
  });

  it('keeps at most maxEntries spellings of at most maxKeyLength characters', () => {
    const table = new WordTable<number>(1000, 8);
    for (let i = 0; i < 5000; i++) {
      const w = `w${i}`;
      if (table.get(w, 0, w.length) === undefined) table.set(w, i);
      expect(table.size).toBeLessThanOrEqual(1000);
      expect(table.get(w, 0, w.length)).toBe(i);
    }
    table.set('overlong-word', 1);
    expect(table.get('overlong-word', 0, 13)).toBeUndefined();
  });
});
