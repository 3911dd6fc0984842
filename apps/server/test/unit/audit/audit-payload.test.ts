import { AuditPayloadSchema } from '@svc/protocol';
import { describe, expect, it } from 'vitest';
import type { CompletedRequest } from '../../../src/audit/audit-sink.js';
import { buildAuditPayload, buildTestPayload, renderPrompt } from '../../../src/audit/audit-payload.js';
import type { ApiKeyRecord } from '../../../src/storage/keys-store.js';

const key = { id: 'key_1', user_id: '7f1c0f5e-8a43-4c55-9a0e-3f2f1a1b2c3d', webhook_url: 'https://hooks.example.test/in' } as ApiKeyRecord;
const T0 = Date.UTC(2026, 0, 2, 3, 4, 5, 6);

function completed(overrides: Partial<CompletedRequest> = {}): CompletedRequest {
  return {
    requestId: 'chatcmpl-abc',
    key,
    startedAt: T0 - 412.6,
    finishedAt: T0,
    statusCode: 200,
    streaming: false,
    messages: [
      { role: 'system', content: 'Answer from the context.' },
      { role: 'user', content: [{ type: 'text', text: 'What is the capital' }, { type: 'image_url', image_url: { url: 'x' } }, { type: 'text', text: ' of France?' }] },
    ],
    responseText: 'Paris.',
    svc: null,
    usage: { prompt_tokens: 20, completion_tokens: 3, total_tokens: 23 },
    ...overrides,
  };
}

const checked = {
  dehallucinate_requested: true,
  checked: true,
  grounded: false,
  score: 0.841,
  flagged_spans: [{ start: 0, end: 6, text: 'Paris.', reason: 'unsupported', score: 0.2 }],
  claims: [],
};

describe('buildAuditPayload', () => {
  const requests: Array<[string, CompletedRequest]> = [
    ['a checked answer', completed({ svc: checked as unknown as CompletedRequest['svc'] })],
    ['a failure before any check', completed({ statusCode: 502, responseText: '', svc: null })],
    ['a 400 with messages that are not a list', completed({ statusCode: 400, messages: 'nope', responseText: '' })],
    ['a streamed answer', completed({ streaming: true })],
  ];

  it.each(requests)('builds a payload the published schema accepts: %s', (_name, request) => {
    const { payload, body } = buildAuditPayload(request, 7);
    expect(AuditPayloadSchema.parse(JSON.parse(body))).toEqual(payload);
    expect(body).toBe(JSON.stringify(payload));
  });

  it('fills the spec fields from the request', () => {
    const { payload } = buildAuditPayload(completed({ svc: checked as unknown as CompletedRequest['svc'] }), 3);
    expect(payload).toMatchObject({
      event: 'llm.request.completed',
      request_id: 'chatcmpl-abc',
      timestamp: '2026-01-02T03:04:05.006Z',
      user_id: key.user_id,
      model: 'svc01',
      input_tokens: 20,
      output_tokens: 3,
      total_tokens: 23,
      latency_ms: 413,
      status_code: 200,
      streaming: false,
      prompt: 'system: Answer from the context.\nuser: What is the capital\n of France?',
      response_text: 'Paris.',
      grounded: false,
      hallucination_score: 0.159,
      sequence: 3,
      grounding_checked: true,
      flagged_spans: checked.flagged_spans,
    });
  });
});

describe('renderPrompt', () => {
  it('renders each message as a role: content line, text parts only; anything else renders as nothing', () => {
    expect(renderPrompt([{ role: 'user', content: 'hi' }, null, { content: 'x' }, { role: 'assistant', content: null }])).toBe('user: hi\nunknown: x\nassistant: ');
    expect(renderPrompt('not a list')).toBe('');
  });
});

describe('buildTestPayload', () => {
  it('is a test payload the published schema accepts', () => {
    const { payload, body } = buildTestPayload(key, 'whd_1', T0);
    expect(AuditPayloadSchema.parse(JSON.parse(body))).toEqual(payload);
    expect(payload).toMatchObject({ test: true, request_id: 'test-whd_1', user_id: key.user_id });
  });
});
