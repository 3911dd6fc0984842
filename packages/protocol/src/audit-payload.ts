import { z } from 'zod';
import { AUDIT_EVENT } from './audit-event.js';
import { ClaimSchema, FlaggedSpanSchema, UnreadablePartSchema } from './chat-response.js';

export { AUDIT_EVENT };

/**
 * The audit webhook payload (spec §2.5). `test` is present (and true) only on test deliveries; `sequence` only
 * on the others.
 *
 * @example
 * const payload = AuditPayloadSchema.parse(JSON.parse(rawBody));
 */
export const AuditPayloadSchema = z.object({
  event: z.literal(AUDIT_EVENT),
  test: z.literal(true).optional(),
  request_id: z.string().min(1),
  timestamp: z.iso.datetime({ offset: false }),
  user_id: z.uuid(),
  model: z.string(),
  input_tokens: z.int().min(0),
  output_tokens: z.int().min(0),
  total_tokens: z.int().min(0),
  latency_ms: z.int().min(0),
  status_code: z.int().min(100).max(599),
  streaming: z.boolean(),
  prompt: z.string(),
  response_text: z.string(),
  grounded: z.boolean(),
  hallucination_score: z.number().min(0).max(1),
  // Additions beside the spec's fields (design §5): the delivery's number among its key's (absent on test
  // deliveries), whether the check ran, what it flagged, and each claim with its evidence (absent on test
  // deliveries and when the check did not run, unless it read the text beside parts it cannot read), those
  // parts, what the model refused with (absent unless it refused), and the Responses API's response id.
  sequence: z.int().min(1).optional().meta({
    description:
      'The delivery\'s number among the deliveries of its API key: 1, 2, 3, … without gaps or repeats (test deliveries have none). A receiver that misses a number missed a delivery; redeliveries repeat theirs.',
    example: 42,
  }),
  grounding_checked: z.boolean().optional(),
  flagged_spans: z.array(FlaggedSpanSchema).optional(),
  claims: z.array(ClaimSchema).optional(),
  unreadable_parts: z.array(UnreadablePartSchema).optional().meta({
    description:
      'Content parts of the sources the grounding check cannot read (an image, a file, audio), as in the response\'s `svc`: the answer may say what the model saw there, so there is no verdict (`grounding_checked` false); `claims` still gives each claim\'s evidence in the text. Present only when there are such parts.',
    example: [{ message_index: 1, type: 'image_url' }],
  }),
  response_id: z.string().min(1).optional().meta({
    description:
      'The id (`resp_…`) of the Responses API response this delivery audits, as the client got it (`POST /v1/responses`: its `id`, or the `response.created` event\'s). Present only on `/v1/responses` calls that were given a response id; `request_id` stays the request\'s id (the `x-request-id` header).',
    example: 'resp_6f1c0a9e2b7d4c1f8e3a5b0d9c2e7f41',
  }),
  refusal: z.string().optional().meta({
    description:
      "What the model answered when it refused: the first choice's `refusal` (streamed, its `delta.refusal` pieces joined). Present only when there is one; `response_text` is then usually \"\".",
    example: "I can't help with that.",
  }),
});
export type AuditPayload = z.infer<typeof AuditPayloadSchema>;
