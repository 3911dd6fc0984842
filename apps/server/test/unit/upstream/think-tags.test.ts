import { describe, expect, it } from 'vitest';
import type { ChatCompletionChunk } from '@svc/protocol';
import { opensThinkInPrompt, splitThink, ThinkTags } from '../../../src/upstream/think-tags.js';

/** Runs `pieces` (content per frame, one choice per index) through one ThinkTags, the last frame finishing each choice. */
function streamed(pieces: Array<Array<{ index: number; content?: string; finish?: string; reasoning?: string }>>, opened = false) {
  const tags = new ThinkTags(opened);
  const out = new Map<number, { content: string; reasoning: string }>();
  for (const frame of pieces) {
    const chunk = {
      id: 'c',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: frame.map(({ index, content, finish, reasoning }) => ({
        index,
        delta: { ...(content === undefined ? {} : { content }), ...(reasoning === undefined ? {} : { reasoning_content: reasoning }) },
        logprobs: null,
        finish_reason: finish ?? null,
      })),
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

// DeepSeek-R1 distills, QwQ and Qwen3's Thinking-2507 models: their template ends the prompt with `<think>\n`, so a
// server without a reasoning parser sends "reasoning…</think>answer", no opening tag. Every case was content before.
describe('a block the chat template opened in the prompt', () => {
  it('knows the families whose templates open it, and not the hybrids that close it when thinking is off', () => {
    for (const model of ['deepseek-ai/DeepSeek-R1-Distill-Qwen-7B', 'DeepSeek-R1', 'deepseek-r1:14b', 'Qwen/QwQ-32B', 'qwq', 'Qwen/Qwen3-30B-A3B-Thinking-2507-FP8', 'Qwen/Qwen3-Next-80B-A3B-Thinking', 'qwen3:4b-thinking-2507-q4_K_M', 'openrouter/deepseek/deepseek-r1']) {
      expect(opensThinkInPrompt(model), model).toBe(true);
    }
    for (const model of ['deepseek-reasoner', 'deepseek-chat', 'Qwen/Qwen3-8B', 'deepseek-ai/DeepSeek-V3.1', 'Qwen/Qwen3-235B-A22B-Instruct-2507', 'moonshotai/Kimi-K2-Thinking', 'gpt-4o-mini', 'o4-mini', 'my-r1x']) {
      expect(opensThinkInPrompt(model), model).toBe(false);
    }
  });

  const cases: Array<{ text: string; finish: string; reasoning: string; content: string }> = [
    { text: 'The doc says Paris. Or 1925?</think>\n\nParis.', finish: 'stop', reasoning: 'The doc says Paris. Or 1925?', content: 'Paris.' },
    // R1-0528 and Ollama's builds write the tag themselves.
    { text: '\n<think>\nHm.\n</think>\n\nParis.', finish: 'stop', reasoning: '\nHm.\n', content: 'Paris.' },
    // Cut by max_tokens while thinking: all reasoning, no answer.
    { text: 'Let me think about </th', finish: 'length', reasoning: 'Let me think about </th', content: '' },
    // No </think> and a finish of its own: an answer (a host that parsed the reasoning away, or hides it).
    { text: 'Paris, by the Seine.', finish: 'stop', reasoning: '', content: 'Paris, by the Seine.' },
    // An answer mentioning the tag after the block keeps it.
    { text: 'Explain tags.</think>Close it with </think>, open with <think>.', finish: 'stop', reasoning: 'Explain tags.', content: 'Close it with </think>, open with <think>.' },
    { text: '  ', finish: 'stop', reasoning: '', content: '  ' },
  ];

  it('splits at the first </think>, streamed in pieces of any size exactly as splitThink splits the whole text', () => {
    for (const { text, finish, reasoning, content } of cases) {
      const whole = splitThink(text, true, finish) ?? { reasoning: '', content: text };
      expect(whole, text).toEqual({ reasoning, content });
      for (let size = 1; size <= 10; size++) {
        const frames: Array<Array<{ index: number; content?: string; finish?: string }>> = text.match(new RegExp(`[^]{1,${size}}`, 'g'))!.map((p) => [{ index: 0, content: p }]);
        frames.push([{ index: 0, finish }]);
        expect(streamed(frames, true).get(0), `${JSON.stringify(text)} in pieces of ${size}`).toEqual({ reasoning, content });
      }
    }
  });

  it('holds nothing back for a server that separates the reasoning itself, and leaves other models alone', () => {
    const parsed = streamed([[{ index: 0, content: '' }], [{ index: 0, reasoning: 'Hm.' }], [{ index: 0, content: 'Paris' }], [{ index: 0, content: '.', finish: 'stop' }]], true);
    expect(parsed.get(0)).toEqual({ reasoning: 'Hm.', content: 'Paris.' });
    expect(splitThink('Hm.</think>Paris.')).toBeNull();
    expect(streamed([[{ index: 0, content: 'Hm.</think>Paris.' }], [{ index: 0, finish: 'stop' }]]).get(0)).toEqual({ reasoning: '', content: 'Hm.</think>Paris.' });
  });

  it('holds at most a million characters of an unclosed block: past that it streams on as reasoning', () => {
    const tags = new ThinkTags(true);
    const frame = 'Let me think about it some more. '.repeat(1000);
    let reasoning = 0;
    let content = 0;
    let sentBeforeTheEnd = false;
    for (let i = 0; i * frame.length < 1_200_000; i++) {
      const chunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: frame }, logprobs: null, finish_reason: null }] } as unknown as ChatCompletionChunk;
      tags.apply(chunk);
      const delta = chunk.choices[0]!.delta as { content?: string; reasoning_content?: string };
      reasoning += delta.reasoning_content?.length ?? 0;
      content += delta.content?.length ?? 0;
      if (reasoning > 0 && (i + 1) * frame.length < 1_200_000) sentBeforeTheEnd = true;
    }
    expect(sentBeforeTheEnd).toBe(true);
    expect(reasoning).toBeGreaterThan(1024 * 1024);
    expect(content).toBe(0);
  });

  it('ends a stream without a finish (flush) as a stop: the text it held is the answer', () => {
    const tags = new ThinkTags(true);
    const chunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'Paris.' }, logprobs: null, finish_reason: null }] } as unknown as ChatCompletionChunk;
    tags.apply(chunk);
    expect(chunk.choices[0]!.delta.content).toBe('');
    expect(tags.flush()).toEqual([{ index: 0, delta: { content: 'Paris.' }, finish_reason: null, logprobs: null }]);
  });
});
