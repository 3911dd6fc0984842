import { describe, expect, it } from 'vitest';
import { AuditPayloadSchema, ChatCompletionRequestSchema, ERROR_CODES, messageText } from './index.js';

describe('ChatCompletionRequestSchema', () => {
  it('accepts string and content-part messages, tools and svc, and keeps unknown fields', () => {
    const parsed = ChatCompletionRequestSchema.parse({
      model: 'svc01',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'image_url', image_url: { url: 'data:,' } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: '42' },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      svc: { thinking: true },
      x_vendor_field: 1,
    });
    expect(parsed.svc?.thinking).toBe(true);
    expect((parsed as Record<string, unknown>).x_vendor_field).toBe(1);
  });

  it('rejects wrong types with a path to the offending field', () => {
    const result = ChatCompletionRequestSchema.safeParse({ model: 'svc01', messages: [{ role: 'user', content: 5 }] });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path.slice(0, 2)).toEqual(['messages', 0]);
  });

  it('rejects unknown svc options', () => {
    expect(ChatCompletionRequestSchema.safeParse({ model: 'svc01', messages: [{ role: 'user', content: 'x' }], svc: { thinkng: true } }).success).toBe(false);
  });
});

describe('AuditPayloadSchema', () => {
  const payload = {
    event: 'llm.request.completed', request_id: 'chatcmpl-1', timestamp: '2026-01-02T03:04:05.678Z',
    user_id: '7f1c0f5e-8a43-4c55-9a0e-3f2f1a1b2c3d', model: 'svc01', input_tokens: 3, output_tokens: 4, total_tokens: 7,
    latency_ms: 12, status_code: 200, streaming: false, prompt: 'user: hi', response_text: 'hello', grounded: true, hallucination_score: 0,
  };
  it('accepts a real payload and the test flag only as true', () => {
    expect(AuditPayloadSchema.parse(payload)).toEqual(payload);
    expect(AuditPayloadSchema.safeParse({ ...payload, test: true }).success).toBe(true);
    expect(AuditPayloadSchema.safeParse({ ...payload, test: false }).success).toBe(false);
    expect(AuditPayloadSchema.safeParse({ ...payload, user_id: 'nope' }).success).toBe(false);
  });
});

describe('messageText', () => {
  it('joins text parts and ignores others', () => {
    expect(messageText([{ type: 'text', text: 'a' }, { type: 'image_url' }, { type: 'text', text: 'b' }])).toBe('a\nb');
    expect(messageText(null)).toBe('');
  });
});

describe('ERROR_CODES', () => {
  it('maps codes to the statuses of design §4', () => {
    expect(ERROR_CODES.invalid_api_key).toEqual({ status: 401, type: 'authentication_error' });
    expect(ERROR_CODES.upstream_timeout.status).toBe(502);
  });
});
