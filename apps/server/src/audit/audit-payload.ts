import { AUDIT_EVENT, AuditPayloadSchema, messageText, SVC_MODEL, type AuditPayload, type WebhookTestSample } from '@svc/protocol';
import type { CompletedRequest } from './audit-sink.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';

/** A payload and the bytes that are stored, signed and sent on every attempt. */
export interface SerialisedPayload {
  payload: AuditPayload;
  body: string;
}

/** Serialises once: nothing re-serialises the payload after this. */
function serialise(payload: AuditPayload): SerialisedPayload {
  return { payload, body: JSON.stringify(payload) };
}

/** The messages rendered in order as `role: content` lines (text parts only) — the audit payload's `prompt`. */
export function renderPrompt(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  return messages
    .filter((m): m is { role?: unknown; content?: unknown } => typeof m === 'object' && m !== null)
    .map((m) => `${typeof m.role === 'string' ? m.role : 'unknown'}: ${messageText(m.content)}`)
    .join('\n');
}

/**
 * The audit payload of one finished request (spec §2.5, design §5), the `sequence`-th delivery of its key.
 * Not checked against the published schema here: the typed code above builds it, and the check costs a
 * noticeable share of a request's CPU (the payload tests check it).
 *
 * @example
 * await outbox.insertSequenced([{ serialise: (sequence) => buildAuditPayload(completed, sequence).body, … }]);
 */
export function buildAuditPayload(request: CompletedRequest, sequence: number): SerialisedPayload {
  const { usage, svc } = request;
  return serialise({
    event: AUDIT_EVENT,
    request_id: request.requestId,
    timestamp: new Date(request.finishedAt).toISOString(),
    user_id: request.key.user_id,
    model: SVC_MODEL,
    input_tokens: usage.prompt_tokens,
    output_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens,
    latency_ms: Math.max(0, Math.round(request.finishedAt - request.startedAt)),
    status_code: request.statusCode,
    streaming: request.streaming,
    prompt: renderPrompt(request.messages),
    response_text: request.responseText,
    grounded: svc ? svc.grounded : true,
    // 1 − score, kept to the score's three decimals (no 0.15900000000000003 in receivers' logs).
    hallucination_score: svc ? Math.min(1, Math.max(0, Math.round((1 - svc.score) * 1000) / 1000)) : 0,
    sequence,
    grounding_checked: svc?.checked ?? false,
    ...(svc?.checked ? { flagged_spans: svc.flagged_spans, claims: svc.claims ?? [] } : svc?.claims ? { claims: svc.claims } : {}),
    // Beside an image, a file or audio the check gives no verdict; the receiver sees why, as the client did.
    ...(svc?.unreadable_parts && { unreadable_parts: svc.unreadable_parts }),
    ...(request.refusal !== undefined && { refusal: request.refusal }),
    // A Responses API client holds the response's id, not the request's: this is what it correlates on.
    ...(request.responseId !== undefined && { response_id: request.responseId }),
  });
}

const GROUNDED_SAMPLE = {
  input_tokens: 24,
  output_tokens: 12,
  total_tokens: 36,
  latency_ms: 412,
  status_code: 200,
  streaming: false,
  prompt: 'system: You answer from the provided context.\nuser: What is the capital of France?',
  response_text: 'The capital of France is Paris.',
  grounded: true,
  hallucination_score: 0.02,
} as const;

const UNGROUNDED_TEXT = 'The capital of France is Paris, which has 40 million inhabitants.';
const UNGROUNDED_CLAIM = 'which has 40 million inhabitants';
const UNGROUNDED_START = UNGROUNDED_TEXT.indexOf(UNGROUNDED_CLAIM);

type SampleFields = Omit<AuditPayload, 'event' | 'test' | 'request_id' | 'timestamp' | 'user_id' | 'model'>;

/** Each sample kind's fields beside the event, ids, time and user (`svc-cli webhooks test --sample`). */
const TEST_SAMPLES: Record<WebhookTestSample, SampleFields> = {
  ok: GROUNDED_SAMPLE,
  streamed: { ...GROUNDED_SAMPLE, streaming: true, latency_ms: 655 },
  // What an upstream failure records: the 502 the client got, no answer, nothing checked.
  failed: { ...GROUNDED_SAMPLE, output_tokens: 0, total_tokens: 24, latency_ms: 30_004, status_code: 502, response_text: '', hallucination_score: 0, grounding_checked: false },
  ungrounded: {
    ...GROUNDED_SAMPLE,
    output_tokens: 18,
    total_tokens: 42,
    prompt: 'system: Paris is the capital of France.\nuser: What is the capital of France?',
    response_text: UNGROUNDED_TEXT,
    grounded: false,
    hallucination_score: 0.48,
    grounding_checked: true,
    flagged_spans: [
      { start: UNGROUNDED_START, end: UNGROUNDED_START + UNGROUNDED_CLAIM.length, text: UNGROUNDED_CLAIM, reason: 'not supported by any source', score: 0.1 },
    ],
  },
};

const TEST_REQUEST_PREFIX = 'test-';

/** Whether a delivery's `request_id` is a test send's (real requests' ids start with `chatcmpl-` or `resp_`). */
export const isTestRequestId = (requestId: string) => requestId.startsWith(TEST_REQUEST_PREFIX);

/**
 * The payload `POST /v1/webhooks/test` sends: `test: true`, `request_id: "test-<id>"`, plausible values of the
 * `sample` kind (`ok`, `failed`, `ungrounded`, `streamed`).
 * Checked against the published schema (one per user action, so the check costs nothing that matters).
 *
 * @example
 * const { body } = buildTestPayload(key, 'whd_…', Date.now());
 */
export function buildTestPayload(key: Pick<ApiKeyRecord, 'user_id'>, id: string, now: number, sample: WebhookTestSample = 'ok'): SerialisedPayload {
  const payload: AuditPayload = {
    event: AUDIT_EVENT,
    test: true,
    request_id: `${TEST_REQUEST_PREFIX}${id}`,
    timestamp: new Date(now).toISOString(),
    user_id: key.user_id,
    model: SVC_MODEL,
    ...TEST_SAMPLES[sample],
  };
  AuditPayloadSchema.parse(payload);
  return serialise(payload);
}
