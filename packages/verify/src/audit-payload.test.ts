import { AuditPayloadSchema } from '@svc/protocol';
import { describe, expect, it } from 'vitest';
import { samplePayload } from '../test/support.js';
import { parseAuditPayload } from './audit-payload.js';
import { WebhookVerificationError } from './webhook-verification-error.js';

const variants: Array<[string, Record<string, unknown>]> = [
  ['the sample', {}],
  ['a test delivery', { test: true, request_id: 'test-1' }],
  ['an unknown extra field', { region: 'eu' }],
  ['a timestamp without milliseconds', { timestamp: '2026-01-02T03:04:05Z' }],
  ['an upper-case UUID', { user_id: '7F1C0F5E-8A43-4C55-9A0E-3F2F1A1B2C3D' }],
  ['an error status', { status_code: 502, response_text: '' }],
  ['a score of 1', { hallucination_score: 1 }],
  ['another event', { event: 'llm.request.started' }],
  ['a sequence number', { sequence: 42 }],
  ['a sequence of 0', { sequence: 0 }],
  ['a fractional sequence', { sequence: 1.5 }],
  ['a string sequence', { sequence: '3' }],
  ['a refusal', { response_text: '', refusal: "I can't help with that." }],
  ['a null refusal', { refusal: null }],
  ['a refusal that is not a string', { refusal: ['no'] }],
  ['a response id', { response_id: 'resp_6f1c0a9e2b7d4c1f' }],
  ['an empty response id', { response_id: '' }],
  ['a numeric response id', { response_id: 42 }],
  ['test as a string', { test: 'yes' }],
  ['an empty request_id', { request_id: '' }],
  ['a missing request_id', { request_id: undefined }],
  ['a timestamp with an offset', { timestamp: '2026-01-02T03:04:05+01:00' }],
  ['a date-only timestamp', { timestamp: '2026-01-02' }],
  ['an impossible month', { timestamp: '2026-13-02T03:04:05Z' }],
  ['a non-UUID user_id', { user_id: 'user-1' }],
  ['a numeric model', { model: 1 }],
  ['fractional tokens', { input_tokens: 1.5 }],
  ['negative tokens', { output_tokens: -1 }],
  ['string tokens', { total_tokens: '7' }],
  ['a missing latency', { latency_ms: undefined }],
  ['a status below 100', { status_code: 99 }],
  ['a status above 599', { status_code: 600 }],
  ['a fractional status', { status_code: 200.5 }],
  ['streaming as a string', { streaming: 'false' }],
  ['a null prompt', { prompt: null }],
  ['a missing response_text', { response_text: undefined }],
  ['grounded as a number', { grounded: 1 }],
  ['a score above 1', { hallucination_score: 1.5 }],
  ['a negative score', { hallucination_score: -0.1 }],
  ['a string score', { hallucination_score: '0.1' }],
];

const accepts = (value: unknown) => {
  try {
    parseAuditPayload(value);
    return true;
  } catch (err) {
    expect(err).toBeInstanceOf(WebhookVerificationError);
    return false;
  }
};

// The receiver's validator is hand-written (zero dependencies); it must agree with the schema the
// server serialises from, so a delivery the server considers valid is never refused.
describe('parseAuditPayload agrees with @svc/protocol AuditPayloadSchema', () => {
  it.each(variants)('on %s', (_, change) => {
    const value = { ...samplePayload, ...change };
    expect(accepts(value)).toBe(AuditPayloadSchema.safeParse(value).success);
  });

  it('is more lenient only where receivers benefit: test: false is accepted', () => {
    const value = { ...samplePayload, test: false };
    expect(accepts(value)).toBe(true);
    expect(AuditPayloadSchema.safeParse(value).success).toBe(false);
  });

  it.each([null, [], 'x', 1])('rejects a non-object %j', (value) => {
    expect(() => parseAuditPayload(value)).toThrow('Payload is not a JSON object.');
  });

  it('returns the object itself, unknown fields kept', () => {
    const value = { ...samplePayload, region: 'eu' };
    expect(parseAuditPayload(value)).toBe(value);
  });
});
