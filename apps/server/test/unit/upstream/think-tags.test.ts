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

  // Each frame used to trim all the white space held before it: 2 MB of it in 64-character frames took minutes
  // of one core, and an upstream sending 9 MB of new lines held a stream for 18 s of CPU. The characters every
  // trim is handed are counted (no clock): each frame's own text, so linear in the stream's size.
  it('holds white space streamed in small frames scanning each character a bounded number of times, then decides', () => {
    const space = ' \n'.repeat(128 * 1024);
    const frames = (after: string) => [...(space + after).match(/[^]{1,64}/g)!.map((p) => [{ index: 0, content: p }]), [{ index: 0, finish: 'stop' }]];
    const trimStart = String.prototype.trimStart;
    let scanned = 0;
    String.prototype.trimStart = function (this: string) {
      scanned += this.length;
      return trimStart.call(this);
    };
    try {
      expect(streamed(frames('<think>why</think>\n\nanswer')).get(0)).toEqual({ reasoning: 'why', content: 'answer' });
      const plain = streamed(frames('answer')).get(0)!;
      expect(plain.reasoning).toBe('');
      expect(plain.content === `${space}answer`).toBe(true);
    } finally {
      String.prototype.trimStart = trimStart;
    }
    expect(scanned).toBeLessThan(2 * 2 * (space.length + 64));
  });

  it('sends white space alone held to the end of a stream without a finish from flush', () => {
    const tags = new ThinkTags();
    for (const content of ['\n', ' ', '\n\n']) {
      const chunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }] } as unknown as ChatCompletionChunk;
      tags.apply(chunk);
      expect(chunk.choices[0]!.delta.content).toBe('');
    }
    expect(tags.flush()).toEqual([{ index: 0, delta: { content: '\n \n\n' }, finish_reason: null, logprobs: null }]);
  });
});
