import { describe, expect, it } from 'vitest';
import { ChatCompletionChunkSchema } from '@svc/protocol';
import { plainChunk } from '../../../src/upstream/openai-compatible.js';

const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_735_689_600, model: 'gpt-4o-mini' };
const frame = (choices: unknown[], extra: Record<string, unknown> = {}) => ({ ...base, ...extra, choices });

describe('plainChunk (hand check of common stream frames)', () => {
  it('gives the frame of the schema parse, choices byte for byte, for the frames it accepts', () => {
    const frames = [
      frame([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]),
      frame([{ index: 0, delta: { content: 'Hello' }, finish_reason: null }], { system_fingerprint: 'fp_1' }),
      frame([{ finish_reason: 'stop', index: 0, delta: {}, logprobs: { content: [] }, extra: true }], { system_fingerprint: null, service_tier: 'default' }),
      frame([{ index: 1, delta: { reasoning_content: 'hm', refusal: null, x: 1 }, finish_reason: 'length' }]),
      frame([]),
    ];
    for (const f of frames) {
      const plain = plainChunk(f);
      expect(plain, JSON.stringify(f)).toBeDefined();
      const parsed = ChatCompletionChunkSchema.parse(f);
      expect(plain).toEqual(parsed);
      expect(JSON.stringify(plain!.choices)).toBe(JSON.stringify(parsed.choices));
    }
  });

  it('returns a frame whose choices are in order as it is, and copies only the frame when one choice is not', () => {
    const inOrder = frame([{ index: 0, delta: { content: 'Hi' }, logprobs: null, finish_reason: null }], { system_fingerprint: 'fp' });
    expect(plainChunk(inOrder)).toBe(inOrder);
    const second = { index: 1, delta: { content: 'Yo' }, finish_reason: null, logprobs: null };
    const mixed = frame([inOrder.choices[0], second]);
    const out = plainChunk(mixed)!;
    expect(out).not.toBe(mixed);
    expect(mixed.choices[1]).toBe(second);
    expect(out.choices[0]).toBe(mixed.choices[0]);
    expect(Object.keys(out.choices[1]!)).toEqual(['index', 'delta', 'logprobs', 'finish_reason']);
  });

  it("takes the choices of a frame in OpenAI's key order as they are, and copies others into that order", () => {
    const inOrder = frame([{ index: 0, delta: { role: 'assistant', content: 'Hi' }, logprobs: null, finish_reason: null }], { system_fingerprint: 'fp' });
    const shuffled = frame([{ finish_reason: null, index: 0, delta: { content: 'Hi', role: 'assistant' } }]);
    const a = plainChunk(inOrder)!;
    const b = plainChunk(shuffled)!;
    expect(a.choices[0]).toBe(inOrder.choices[0]);
    expect(b.choices[0]).not.toBe(shuffled.choices[0]);
    expect(Object.keys(b.choices[0]!)).toEqual(['index', 'delta', 'finish_reason']);
    expect(Object.keys(b.choices[0]!.delta)).toEqual(['role', 'content']);
    expect(JSON.stringify(b.choices)).toBe(JSON.stringify(ChatCompletionChunkSchema.parse(shuffled).choices));
  });

  it('leaves everything else to the schema', () => {
    const others = [
      frame([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{' } }] }, finish_reason: null }]),
      frame([{ index: 0, delta: { content: 5 }, finish_reason: null }]),
      frame([{ index: 0, delta: { role: 'user' }, finish_reason: null }]),
      frame([{ index: -1, delta: {}, finish_reason: null }]),
      frame([{ index: 0.5, delta: {}, finish_reason: null }]),
      frame([{ index: 0, delta: {}, finish_reason: 'eos' }]),
      frame([], { usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }),
      frame([], { system_fingerprint: 5 }),
      { ...frame([]), created: 1.5 },
      { ...frame([]), object: 'chat.completion' },
      // What normalizeChunk changes, so the frame must not be taken as received:
      frame([null]),
      frame([{ index: 0, finish_reason: null }]),
      frame([{ index: 0, delta: { reasoning: 'hm' }, finish_reason: null }]),
      frame([{ index: 0, delta: { reasoning_content: null }, finish_reason: null }]),
      frame([{ index: 0, delta: { tool_calls: null }, finish_reason: null }]),
      frame([{ index: 0, delta: {} }]),
      frame([], { svc: { grounded: true } }),
    ];
    for (const f of others) expect(plainChunk(f), JSON.stringify(f)).toBeUndefined();
  });
});
