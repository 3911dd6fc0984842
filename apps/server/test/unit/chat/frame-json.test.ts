import { describe, expect, it, vi } from 'vitest';
import type { ChatCompletionChunk } from '@svc/protocol';
import { FrameJson } from '../../../src/chat/frame-json.js';

type Choices = ChatCompletionChunk['choices'];

/** What the relay sent before: the frame object, stringified. */
function reference(id: string, created: number, model: string, choices: unknown[], fingerprint?: string | null, svc?: unknown, extra: { tier?: string; usageNull?: boolean } = {}): string {
  const frame: Record<string, unknown> = { id, object: 'chat.completion.chunk', created, model };
  if (extra.tier !== undefined) frame.service_tier = extra.tier;
  frame.choices = choices;
  if (fingerprint !== undefined) frame.system_fingerprint = fingerprint;
  if (svc !== undefined) frame.svc = svc;
  if (extra.usageNull) frame.usage = null;
  return JSON.stringify(frame);
}

const TEXTS = ['', 'Hello', ' world.', 'quote " and \\ backslash', 'line\nbreak\ttab\u0001', 'Ünïcode ✓ 😀', 'lone \ud800 surrogate', '</script>', '\u2028\u2029'];

describe('FrameJson (the JSON of relayed stream frames)', () => {
  it('writes exactly the bytes JSON.stringify gives, for text deltas and every other shape', () => {
    const choices: unknown[][] = [];
    for (const content of TEXTS) {
      for (const finish of [null, 'stop', 'length', 'tool_calls']) {
        choices.push([{ index: 0, delta: { content }, logprobs: null, finish_reason: finish }]);
        choices.push([{ index: 3, delta: { role: 'assistant', content }, logprobs: null, finish_reason: finish }]);
      }
    }
    choices.push(
      [],
      [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }],
      [{ index: 0, delta: { role: 'assistant' }, logprobs: null, finish_reason: null }],
      [{ index: 0, delta: { content: null }, logprobs: null, finish_reason: null }],
      [{ index: 0, delta: { content: 'x', refusal: null }, logprobs: null, finish_reason: null }],
      [{ index: 0, delta: { content: 'x', role: 'assistant' }, logprobs: null, finish_reason: null }],
      [{ index: 0, delta: { reasoning_content: 'hm' }, logprobs: null, finish_reason: null }],
      [{ index: 0, delta: { content: 'x' }, logprobs: { content: [] }, finish_reason: null }],
      [{ index: 0, delta: { content: 'x' }, finish_reason: null, logprobs: null }],
      [{ index: 0, delta: { content: 'x' }, logprobs: null, finish_reason: null, extra: 1 }],
      [{ index: 0, delta: { content: 'x', extra: undefined }, logprobs: null, finish_reason: null }],
      [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":' } }] }, logprobs: null, finish_reason: null }],
      [
        { index: 0, delta: { content: 'a' }, logprobs: null, finish_reason: null },
        { index: 1, delta: { content: 'b' }, logprobs: null, finish_reason: null },
      ],
    );
    const frames = new FrameJson('chatcmpl-abc"\\', 1_735_689_600, 'svc01');
    const svc = { grounded: true, score: 0.93, flagged_spans: [] };
    for (const c of choices) {
      for (const fingerprint of [undefined, null, 'fp_1']) {
        for (const s of [undefined, null, svc]) {
          const got = frames.of(c as Choices, fingerprint, s as never);
          expect(got, JSON.stringify(c)).toBe(reference('chatcmpl-abc"\\', 1_735_689_600, 'svc01', c, fingerprint, s));
          expect(() => JSON.parse(got)).not.toThrow();
        }
      }
    }
  });

  it('writes the usage frame as JSON.stringify does', () => {
    const frames = new FrameJson('chatcmpl-1', 7, 'svc01');
    const usage = { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7, prompt_tokens_details: { cached_tokens: 0 } };
    expect(frames.usage(usage)).toBe(JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 7, model: 'svc01', choices: [], usage }));
    expect(frames.usage(usage, 'fp_1')).toBe(
      JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 7, model: 'svc01', choices: [], system_fingerprint: 'fp_1', usage }),
    );
  });

  it('with includeUsage, writes "usage": null on every frame but the usage frame; service_tier after model once known', () => {
    const frames = new FrameJson('chatcmpl-1', 7, 'svc01', { includeUsage: true });
    const choices = [{ index: 0, delta: { content: 'Hi' }, logprobs: null, finish_reason: null }];
    expect(frames.of(choices as Choices, 'fp_1')).toBe(reference('chatcmpl-1', 7, 'svc01', choices, 'fp_1', undefined, { usageNull: true }));
    frames.serviceTier('default');
    const svc = { grounded: true };
    expect(frames.of(choices as Choices, undefined, svc as never)).toBe(reference('chatcmpl-1', 7, 'svc01', choices, undefined, svc, { tier: 'default', usageNull: true }));
    const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
    expect(frames.usage(usage)).toBe(JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 7, model: 'svc01', service_tier: 'default', choices: [], usage }));
  });

  it("stringifies an upstream's system_fingerprint once per stream, not once per frame", () => {
    const frames = new FrameJson('chatcmpl-1', 1, 'svc01');
    const choices: Choices = [{ index: 0, delta: { content: 'x' }, logprobs: null, finish_reason: null }];
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      for (let i = 0; i < 100; i++) expect(frames.of(choices, 'fp_abc')).toBe(reference('chatcmpl-1', 1, 'svc01', choices, 'fp_abc'));
      expect(frames.of(choices, null)).toBe(reference('chatcmpl-1', 1, 'svc01', choices, null));
      expect(frames.usage({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }, null)).toContain(',"system_fingerprint":null,"usage"');
      // `reference` stringifies whole frames: only the calls with the fingerprint alone are the relay's.
      expect(stringify.mock.calls.filter(([value]) => value === 'fp_abc')).toHaveLength(1);
      expect(stringify.mock.calls.filter(([value]) => value === null)).toHaveLength(1);
    } finally {
      stringify.mockRestore();
    }
  });
});
