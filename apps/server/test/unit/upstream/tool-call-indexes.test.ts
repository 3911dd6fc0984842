import { describe, expect, it } from 'vitest';
import { ToolCallIndexes } from '../../../src/upstream/tool-call-indexes.js';

/** Each frame: the tool calls of choice 0's delta; the indexes they get. */
const cases: Array<{ name: string; frames: Array<Array<Record<string, unknown>>>; indexes: number[][] }> = [
  { name: 'indexes given are kept', frames: [[{ index: 0, id: 'a' }, { index: 1, id: 'b' }], [{ index: 1 }]], indexes: [[0, 1], [1]] },
  { name: 'one call per frame, new ids (Gemini)', frames: [[{ id: 'a' }], [{ id: 'b' }], [{ id: 'c' }]], indexes: [[0], [1], [2]] },
  { name: 'fragments without an id go on the last call', frames: [[{ id: 'a' }], [{}], [{ id: 'b' }], [{}]], indexes: [[0], [0], [1], [1]] },
  { name: 'an id seen before keeps its index', frames: [[{ id: 'a' }], [{ id: 'b' }], [{ id: 'a' }]], indexes: [[0], [1], [0]] },
  { name: 'several calls in one frame, then their fragments, by position', frames: [[{ id: 'a' }, { id: 'b' }], [{}, {}]], indexes: [[0, 1], [0, 1]] },
];

describe('ToolCallIndexes', () => {
  it.each(cases)('$name', ({ frames, indexes }) => {
    const numbering = new ToolCallIndexes();
    expect(frames.map((calls) => calls.map((call, i) => numbering.of(0, call, i, calls.length)))).toEqual(indexes);
  });

  it('numbers each choice on its own', () => {
    const numbering = new ToolCallIndexes();
    expect([numbering.of(0, { id: 'a' }, 0, 1), numbering.of(1, { id: 'b' }, 0, 1), numbering.of(1, { id: 'c' }, 0, 1)]).toEqual([0, 0, 1]);
  });
});
