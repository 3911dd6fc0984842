import { describe, expect, it } from 'vitest';
import { jsonValuesText, MAX_JSON_ANSWER_CHARS } from '../../../src/chat/json-answer.js';

describe('jsonValuesText', () => {
  it.each([
    ['{"city":"Paris","year":1889}', ['Paris', '1889'], ['city', 'year']],
    ['[{"name": "Tōkyō 🗼", "tags": ["a\\"b", "c"]}, {"ok": true, "n": null, "x": -1.5e3}]', ['Tōkyō 🗼', 'a\\"b', 'c', '-1.5e3'], ['name', 'tags', 'ok', 'true', 'null']],
    ['  {\n  "k\\u0041": "v: {x}, [y]"\n}\n', ['v: {x}, [y]'], ['kA', 'k\\u0041']],
  ])('%s keeps its values at their offsets, and nothing else', (answer, values, gone) => {
    const text = jsonValuesText(answer)!;
    expect(text).toHaveLength(answer.length);
    for (const value of values) expect(text.slice(answer.indexOf(value), answer.indexOf(value) + value.length)).toBe(value);
    for (const word of gone) expect(text).not.toContain(word);
  });

  it.each(['Paris, 1889.', '"Paris"', '1889', '{"city": "Paris"', '{"a":1} and more', ''])('%j is not a JSON object or array: undefined', (answer) => {
    expect(jsonValuesText(answer)).toBeUndefined();
  });

  it('an answer over the limit is left alone (not parsed)', () => {
    const big = `{"a":"${'x'.repeat(MAX_JSON_ANSWER_CHARS)}"}`;
    expect(jsonValuesText(big)).toBeUndefined();
  });
});
