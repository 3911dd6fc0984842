import { describe, expect, it } from 'vitest';
import { contentParts } from '../../../src/upstream/content-parts.js';

describe('contentParts', () => {
  it("splits Mistral's thinking and text parts; a thinking part's text may be a string; other parts are left out", () => {
    const parts = [
      { type: 'thinking', thinking: [{ type: 'text', text: 'One. ' }, { type: 'image' }, { type: 'text', text: 'Two.' }] },
      { type: 'thinking', thinking: ' Three.' },
      { type: 'text', text: 'Hello' },
      { type: 'reference', reference_ids: [1] },
      null,
      { type: 'text', text: 'there' },
    ];
    expect(contentParts(parts, ' ')).toEqual({ text: 'Hello there', reasoning: 'One. Two. Three.' });
    expect(contentParts([{ type: 'thinking', thinking: 7 }], '')).toEqual({ text: '', reasoning: '' });
  });
});
