import type { ChatCompletionChunk } from '@svc/protocol';
import { describe, expect, it } from 'vitest';
import { plainChunk } from '../../../src/upstream/openai-compatible.js';
import { TextFrames } from '../../../src/upstream/text-frames.js';

/** What OpenAI sends today (service_tier, fingerprint, per-frame padding after `choices`). */
const openaiHead = { id: 'chatcmpl-D0q8CZXN1uEzngZGkU7FuV92lnXWq', object: 'chat.completion.chunk', created: 1769092764, model: 'gpt-4o-mini-2024-07-18', service_tier: 'default', system_fingerprint: 'fp_29330a9688' };
/** What vLLM, Ollama and llama.cpp send (no fingerprint). */
const bareHead = { id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'llama-3' };

/** The head's keys in another order (model first). */
const modelFirst = { model: 'llama-3', id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1 };

const textChoice = (content: string) => [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }];
const frame = (head: object, choices: unknown[], tail: Record<string, unknown> = {}) => JSON.stringify({ ...head, choices, ...tail });

/** A reader that learned `head` from its stream's first frame (role + empty content), as the relay does. */
function readerOf(head: object): TextFrames {
  const first = frame(head, [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
  const frames = new TextFrames();
  const parsed = JSON.parse(first) as Record<string, unknown>;
  expect(plainChunk(parsed)).toBe(parsed);
  frames.learn(first, parsed as ChatCompletionChunk);
  return frames;
}

/** `read()` of `data` is either undefined or exactly `JSON.parse(data)`, which the frame check takes as received. */
function expectSafe(frames: TextFrames, data: string): ChatCompletionChunk | undefined {
  const read = frames.read(data);
  if (read === undefined) return undefined;
  const parsed = JSON.parse(data) as Record<string, unknown>;
  expect(read).toStrictEqual(parsed);
  expect(JSON.stringify(read)).toBe(JSON.stringify(parsed));
  expect(plainChunk(parsed)).toBe(parsed);
  return read;
}

describe('TextFrames (text deltas read without JSON.parse)', () => {
  it.each([
    ['OpenAI with padding', openaiHead, { obfuscation: 'lRK2aBv' }],
    ['OpenAI without padding', openaiHead, {}],
    ['a server without fingerprint', bareHead, {}],
    ['a null fingerprint', { ...bareHead, system_fingerprint: null }, {}],
    ['a service tier without fingerprint', { ...bareHead, service_tier: 'flex' }, {}],
  ])('reads the text frames of %s as JSON.parse does', (_name, head, tail) => {
    const frames = readerOf(head);
    for (const content of ['Hello', ',', ' World', '', ' Ünïcode ✓ 😀 — fine', '\uFEFF', "it's <b>&amp;</b> 100% / 3"]) {
      const data = frame(head, textChoice(content), tail);
      const read = expectSafe(frames, data);
      expect(read, data).toBeDefined();
      expect(read!.choices[0]!.delta.content).toBe(content);
    }
  });

  it('leaves every other frame to the parser', () => {
    const frames = readerOf(openaiHead);
    const others = [
      // Text that needs decoding or is not valid JSON:
      frame(openaiHead, textChoice('line\nbreak')),
      frame(openaiHead, textChoice('a "quote"')),
      frame(openaiHead, textChoice('back\\slash')),
      frame(openaiHead, textChoice('\u0001')),
      frame(openaiHead, textChoice('ok')).replace('ok', 'o\tk'),
      frame(openaiHead, textChoice('ok')).replace('ok', '\\u00e9'),
      // Other choices and deltas:
      frame(openaiHead, [{ index: 0, delta: { role: 'assistant', content: 'Hi' }, logprobs: null, finish_reason: null }]),
      frame(openaiHead, [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]),
      frame(openaiHead, [{ index: 0, delta: { content: 'Hi' }, logprobs: null, finish_reason: 'stop' }]),
      frame(openaiHead, [{ index: 1, delta: { content: 'Hi' }, logprobs: null, finish_reason: null }]),
      frame(openaiHead, [...textChoice('a'), { index: 1, delta: { content: 'b' }, logprobs: null, finish_reason: null }]),
      frame(openaiHead, [{ index: 0, delta: { content: 'Hi', refusal: null }, logprobs: null, finish_reason: null }]),
      frame(openaiHead, [{ index: 0, delta: { content: 'Hi' }, logprobs: { content: [] }, finish_reason: null }]),
      frame(openaiHead, [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }]),
      frame(openaiHead, [{ index: 0, delta: { content: 'Hi' }, logprobs: null, finish_reason: null, x: 1 }]),
      frame(openaiHead, [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{' } }] }, logprobs: null, finish_reason: null }]),
      frame(openaiHead, []),
      // Another head, keys after choices other than the padding, other spacing, cut or extended frames:
      frame({ ...openaiHead, id: 'chatcmpl-other' }, textChoice('Hi')),
      frame({ ...openaiHead, model: 'gpt-4o' }, textChoice('Hi')),
      frame(openaiHead, textChoice('Hi'), { usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }),
      frame(openaiHead, textChoice('Hi'), { usage: null }),
      frame(openaiHead, textChoice('Hi'), { svc: { grounded: true } }),
      frame(openaiHead, textChoice('Hi'), { error: { message: 'boom' } }),
      frame(openaiHead, textChoice('Hi'), { obfuscation: 'a\\"b' }),
      frame(openaiHead, textChoice('Hi'), { obfuscation: 'ab', more: 1 }),
      JSON.stringify({ ...openaiHead, choices: textChoice('Hi') }, null, 1),
      frame(openaiHead, textChoice('Hi')).slice(0, -1),
      `${frame(openaiHead, textChoice('Hi'))} `,
      `${frame(openaiHead, textChoice('Hi'))}}`,
      frame(openaiHead, textChoice('Hi'), { obfuscation: 'ab' }).slice(0, -2),
    ];
    for (const data of others) expect(frames.read(data), data).toBeUndefined();
  });

  it('learns no head from a frame with other keys before choices or spelled otherwise, and reads nothing before one', () => {
    const data = frame(bareHead, textChoice('Hi'));
    expect(new TextFrames().read(data)).toBeUndefined();
    for (const [first, parsed] of [
      [frame({ ...bareHead, usage: null }, textChoice('')), { ...bareHead, usage: null, choices: textChoice('') }],
      [frame({ ...bareHead, x: 1 }, textChoice('')), { ...bareHead, x: 1, choices: textChoice('') }],
      [frame(modelFirst, textChoice('')), { ...modelFirst, choices: textChoice('') }],
      [frame({ ...bareHead, system_fingerprint: 'fp', service_tier: 'x' }, textChoice('')), { ...bareHead, system_fingerprint: 'fp', service_tier: 'x', choices: textChoice('') }],
      [frame({ choices: textChoice(''), ...bareHead }, []), { choices: textChoice(''), ...bareHead }],
      [JSON.stringify({ ...bareHead, choices: textChoice('') }, null, 1), { ...bareHead, choices: textChoice('') }],
      [frame({ ...bareHead, model: 'é' }, textChoice('')).replace('é', '\\u00e9'), { ...bareHead, model: 'é', choices: textChoice('') }],
    ] as const) {
      const frames = new TextFrames();
      frames.learn(first, parsed as unknown as ChatCompletionChunk);
      expect(frames.read(data), first).toBeUndefined();
      expect(frames.read(frame({ ...bareHead, model: 'é' }, textChoice('Hi'))), first).toBeUndefined();
    }
  });

  it('keeps the head it learned for frames that repeat it, and takes the head of a frame that changes it', () => {
    const frames = readerOf(bareHead);
    const finish = frame(bareHead, [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]);
    frames.learn(finish, JSON.parse(finish) as ChatCompletionChunk);
    expect(expectSafe(frames, frame(bareHead, textChoice('Hi')))).toBeDefined();
    const other = { ...bareHead, id: 'chatcmpl-y' };
    const first = frame(other, textChoice(''));
    frames.learn(first, JSON.parse(first) as ChatCompletionChunk);
    expect(frames.read(frame(bareHead, textChoice('Hi')))).toBeUndefined();
    expect(expectSafe(frames, frame(other, textChoice('Hi')))).toBeDefined();
  });

  it('never accepts what JSON.parse would reject or read differently (random texts and damaged frames)', () => {
    let seed = 42;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const alphabet = ['a', ' ', '"', '\\', '\n', '\u0000', '\u001f', 'é', '✓', '😀', '\ud800', '}', ']', ',', ':', 'u', '0'];
    const frames = readerOf(openaiHead);
    let read = 0;
    for (let i = 0; i < 3000; i++) {
      let content = '';
      for (let n = random(12); n > 0; n--) content += alphabet[random(alphabet.length)];
      let data = frame(openaiHead, textChoice(content), random(2) ? { obfuscation: 'Zx9' } : {});
      if (random(3) === 0) {
        // Damage the frame: cut it, or put a character anywhere.
        const at = random(data.length + 1);
        data = random(2) ? data.slice(0, at) : data.slice(0, at) + alphabet[random(alphabet.length)]! + data.slice(at);
      }
      let valid = true;
      try {
        JSON.parse(data);
      } catch {
        valid = false;
      }
      if (!valid) expect(frames.read(data), data).toBeUndefined();
      else if (expectSafe(frames, data)) read++;
    }
    expect(read).toBeGreaterThan(300);
  });
});
