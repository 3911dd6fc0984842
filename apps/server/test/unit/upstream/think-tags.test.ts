import { describe, expect, it } from 'vitest';
import type { ChatCompletionChunk } from '@svc/protocol';
import { splitThink, ThinkTags } from '../../../src/upstream/think-tags.js';

/** Runs `pieces` (content per frame, one choice per index) through one ThinkTags, the last frame finishing each choice. */
function streamed(pieces: Array<Array<{ index: number; content?: string; finish?: string }>>) {
  const tags = new ThinkTags();
  const out = new Map<number, { content: string; reasoning: string }>();
  for (const frame of pieces) {
    const chunk = {
      id: 'c',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: frame.map(({ index, content, finish }) => ({ index, delta: content === undefined ? {} : { content }, logprobs: null, finish_reason: finish ?? null })),
    } as unknown as ChatCompletionChunk;
    tags.apply(chunk);
    for (const choice of chunk.choices) {
      const got = out.get(choice.index) ?? { content: '', reasoning: '' };
      got.content += choice.delta.content ?? '';
      got.reasoning += (choice.delta as { reasoning_content?: string }).reasoning_content ?? '';
      out.set(choice.index, got);
    }
  }
  return out;
}

describe('splitThink', () => {
  it('splits a leading block, drops the white space before the answer, and leaves other text alone', () => {
    expect(splitThink('\n<think>why</think>\n\nanswer')).toEqual({ reasoning: 'why', content: 'answer' });
    expect(splitThink('<think>cut off by max_tokens')).toEqual({ reasoning: 'cut off by max_tokens', content: '' });
    expect(splitThink('<think></think>answer')).toEqual({ reasoning: '', content: 'answer' });
    expect(splitThink('answer with <think>inside</think>')).toBeNull();
  });
});

describe('ThinkTags', () => {
  it('follows tags split anywhere, for each of n choices on its own', () => {
    const text = '<think>a < b </th</think>\n\nx </think> y';
    for (let size = 1; size <= 9; size++) {
      const pieces = text.match(new RegExp(`[^]{1,${size}}`, 'g'))!;
      const frames: Array<Array<{ index: number; content?: string; finish?: string }>> = pieces.map((p) => [{ index: 0, content: p }, { index: 1, content: `plain ${p}` }]);
      frames.push([{ index: 0, finish: 'stop' }, { index: 1, finish: 'stop' }]);
      const out = streamed(frames);
      expect(out.get(0), `pieces of ${size}`).toEqual({ reasoning: 'a < b </th', content: 'x </think> y' });
      expect(out.get(1)!.content).toBe(pieces.map((p) => `plain ${p}`).join(''));
      expect(out.get(1)!.reasoning).toBe('');
    }
  });

  it('sends what it held back with the finish: a tag prefix that never completed, white space alone', () => {
    expect(streamed([[{ index: 0, content: '<thi' }], [{ index: 0, finish: 'length' }]]).get(0)).toEqual({ content: '<thi', reasoning: '' });
    expect(streamed([[{ index: 0, content: '\n' }], [{ index: 0, finish: 'stop' }]]).get(0)).toEqual({ content: '\n', reasoning: '' });
    expect(streamed([[{ index: 0, content: '<think>still thinking </thi' }], [{ index: 0, finish: 'length' }]]).get(0)).toEqual({
      content: '',
      reasoning: 'still thinking </thi',
    });
  });
});
