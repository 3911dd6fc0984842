import { WebhookVerificationError } from './webhook-verification-error.js';

/** The audit webhook payload (spec §2.5), sent after every completed chat-completion request. */
export interface AuditPayload {
  event: 'llm.request.completed';
  /** Present and true only on deliveries sent with "Send test" / `POST /v1/webhooks/test`. */
  test?: boolean;
  /** The request's id; `test-<id>` on test deliveries. */
  request_id: string;
  /** ISO 8601 UTC, e.g. `2026-01-02T03:04:05.678Z`. */
  timestamp: string;
  /** UUID of the API key's owner. */
  user_id: string;
  model: string;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  latency_ms: number;
  /** HTTP status the original request was answered with. */
  status_code: number;
  streaming: boolean;
  prompt: string;
  response_text: string;
  grounded: boolean;
  hallucination_score: number;
  /**
   * The delivery's number among its API key's deliveries: 1, 2, 3, … without gaps or repeats; absent on test
   * deliveries. A missing number is a missed delivery (`createGapTracker`).
   */
  sequence?: number;
  /** Whether the grounding check ran (requested, answer text, at least one source). Absent on test deliveries. */
  grounding_checked?: boolean;
  /** The check's unsupported phrases of `response_text` (UTF-16 offsets; never overlapping), when it ran. */
  flagged_spans?: Array<{ start: number; end: number; text: string; reason: string; score: number }>;
  /**
   * Each claim of `response_text` with the passage of the request that best supports it, when the check ran (or
   * read the text beside `unreadable_parts`).
   */
  claims?: Array<{
    start: number;
    end: number;
    text: string;
    score: number;
    grounded: boolean;
    evidence: { message_index: number; start: number; end: number; text: string; score: number } | null;
  }>;
  /**
   * What the model answered when it refused (the first choice's `refusal`; `response_text` is then usually "").
   * Present only when there is one.
   */
  refusal?: string;
  /**
   * The `resp_…` id of the OpenAI Responses API response this delivery audits (`POST /v1/responses`), as the
   * client got it. Present only on those calls; `request_id` is the request's own id.
   */
  response_id?: string;
  /**
   * Parts of the request the grounding check cannot read (an image, a file, audio), by message: the answer may
   * say what the model saw there, so there is no verdict (`grounding_checked` false). Present only when there are some.
   */
  unreadable_parts?: Array<{ message_index: number; type: string }>;
}

type FieldCheck = (value: unknown) => boolean;

const isString: FieldCheck = (v) => typeof v === 'string';
const isBoolean: FieldCheck = (v) => typeof v === 'boolean';
const isCount: FieldCheck = (v) => Number.isSafeInteger(v) && (v as number) >= 0;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const FIELDS: ReadonlyArray<readonly [keyof AuditPayload, FieldCheck, string]> = [
  ['event', (v) => v === 'llm.request.completed', "'llm.request.completed'"],
  ['request_id', (v) => typeof v === 'string' && v !== '', 'a non-empty string'],
  ['timestamp', (v) => typeof v === 'string' && ISO_UTC.test(v) && !Number.isNaN(Date.parse(v)), 'an ISO 8601 UTC time'],
  ['user_id', (v) => typeof v === 'string' && UUID.test(v), 'a UUID'],
  ['model', isString, 'a string'],
  ['input_tokens', isCount, 'a non-negative integer'],
  ['output_tokens', isCount, 'a non-negative integer'],
  ['total_tokens', isCount, 'a non-negative integer'],
  ['latency_ms', isCount, 'a non-negative integer'],
  ['status_code', (v) => Number.isInteger(v) && (v as number) >= 100 && (v as number) <= 599, 'an HTTP status (integer 100-599)'],
  ['streaming', isBoolean, 'a boolean'],
  ['prompt', isString, 'a string'],
  ['response_text', isString, 'a string'],
  ['grounded', isBoolean, 'a boolean'],
  ['hallucination_score', (v) => typeof v === 'number' && v >= 0 && v <= 1, 'a number between 0 and 1'],
];

/**
 * Checks a parsed payload field by field; the first wrong field is named in the error. Unknown fields
 * are kept, so a receiver keeps working when svc adds one.
 */
export function parseAuditPayload(value: unknown): AuditPayload {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new WebhookVerificationError('invalid_payload', 'Payload is not a JSON object.');
  }
  const record = value as Record<string, unknown>;
  for (const [field, check, expected] of FIELDS) {
    if (!check(record[field])) throw invalidField(field, expected);
  }
  if (record.test !== undefined && !isBoolean(record.test)) throw invalidField('test', 'a boolean when present');
  if (record.sequence !== undefined && !(Number.isSafeInteger(record.sequence) && (record.sequence as number) >= 1)) {
    throw invalidField('sequence', 'a positive integer when present');
  }
  if (record.refusal !== undefined && !isString(record.refusal)) throw invalidField('refusal', 'a string when present');
  if (record.response_id !== undefined && !(isString(record.response_id) && record.response_id !== '')) {
    throw invalidField('response_id', 'a non-empty string when present');
  }
  return value as AuditPayload;
}

function invalidField(field: string, expected: string): WebhookVerificationError {
  return new WebhookVerificationError('invalid_payload', `Payload field "${field}" must be ${expected}.`);
}
