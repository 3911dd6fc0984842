import { z } from 'zod';
import { DELIVERY_ID_PATTERN, DELIVERY_LIST_LIMITS, DELIVERY_STATUSES, WEBHOOK_TEST_SAMPLES } from './delivery-list-query.js';

export const DeliveryStatusSchema = z.enum(DELIVERY_STATUSES);
export type DeliveryStatus = z.infer<typeof DeliveryStatusSchema>;

/** `POST /v1/webhooks/test` success body (design §5). */
export const WebhookTestResultSchema = z.object({
  success: z.boolean(),
  delivered_to: z.string(),
  status_code: z.int().nullable().optional(),
  error: z.string().nullable().optional(),
  // An addition beside design §5's fields: a refused test says why only in the receiver's own words.
  response_body: z.string().nullable().optional().meta({
    description:
      "On a failed test: the start of the receiver's response body (its first 2 KB, as text), as the delivery's attempt log keeps it; null when it gave no answer (refused address, connection error, timeout before its status).",
    example: '{"error":{"message":"X-Svc-Signature does not match"}}',
  }),
});
export type WebhookTestResult = z.infer<typeof WebhookTestResultSchema>;

export const WebhookTestSampleSchema = z.enum(WEBHOOK_TEST_SAMPLES);
export type WebhookTestSample = z.infer<typeof WebhookTestSampleSchema>;

/**
 * `POST /v1/webhooks/test` body (optional): which sample payload to send. `ok` (the default): a grounded 200;
 * `failed`: a 502 with an empty answer; `ungrounded`: a 200 the check flagged; `streamed`: a streamed 200.
 */
export const WebhookTestRequestSchema = z.object({
  sample: WebhookTestSampleSchema.optional(),
});
export type WebhookTestRequest = z.infer<typeof WebhookTestRequestSchema>;

/** What one attempt came to: `success` is any 2xx. */
export const DeliveryOutcomeSchema = z.enum(['success', 'failure']);
export type DeliveryOutcome = z.infer<typeof DeliveryOutcomeSchema>;

export const DeliveryAttemptSchema = z.object({
  attempt: z.int().min(1),
  attempted_at: z.string(),
  status_code: z.int().nullable(),
  duration_ms: z.int().min(0),
  error: z.string().nullable(),
  response_body: z.string().nullable(),
  /** The headers the attempt sent (names in lower case); null for attempts logged before svc kept them, or never sent. */
  request_headers: z.record(z.string(), z.string()).nullable(),
});
export type DeliveryAttempt = z.infer<typeof DeliveryAttemptSchema>;

export const DeliverySchema = z.object({
  id: z.string(),
  object: z.literal('webhook.delivery'),
  event: z.string(),
  request_id: z.string(),
  url: z.string(),
  status: DeliveryStatusSchema,
  attempts: z.int().min(0),
  last_status_code: z.int().nullable(),
  last_error: z.string().nullable(),
  created_at: z.string(),
  next_attempt_at: z.string().nullable(),
  delivered_at: z.string().nullable(),
  /** The status the original request got from svc (the payload's `status_code`); null when unreadable. */
  request_status_code: z.int().nullable(),
});
export type Delivery = z.infer<typeof DeliverySchema>;

export const DeliveryDetailSchema = DeliverySchema.extend({
  payload: z.string(),
  attempt_log: z.array(DeliveryAttemptSchema),
});
export type DeliveryDetail = z.infer<typeof DeliveryDetailSchema>;

export const DeliveryListSchema = z.object({
  object: z.literal('list'),
  data: z.array(DeliverySchema),
  has_more: z.boolean(),
  next_cursor: z.string().nullable(),
});
export type DeliveryList = z.infer<typeof DeliveryListSchema>;

/**
 * `GET /v1/webhooks/deliveries` query parameters as the API documents them; `parseDeliveryListQuery` reads
 * them from the query string by the same rules.
 */
export const DeliveryListQuerySchema = z.object({
  limit: z.int().min(1).max(DELIVERY_LIST_LIMITS.max).optional(),
  status: DeliveryStatusSchema.optional(),
  before: z.string().regex(DELIVERY_ID_PATTERN).optional(),
  request_id: z.string().min(1).max(200).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  last_status_code: z.string().regex(/^[1-5](\d\d|xx)$/i).optional(),
});

/**
 * `POST /v1/webhooks/deliveries/redeliver` body: which deliveries of the calling key to send again, by the same
 * terms a deliveries list takes (so a filtered list's deliveries are exactly what is sent again). Every field
 * is optional; times are ISO 8601 (`since` inclusive, `until` exclusive, on the delivery's creation time).
 * The newest `REDELIVERY_MAX` matches are taken; `dry_run` only counts them.
 */
export const BulkRedeliverRequestSchema = z.object({
  status: DeliveryStatusSchema.optional(),
  request_id: DeliveryListQuerySchema.shape.request_id,
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  last_status_code: DeliveryListQuerySchema.shape.last_status_code,
  dry_run: z.boolean().optional(),
});
export type BulkRedeliverRequest = z.infer<typeof BulkRedeliverRequestSchema>;

export const BulkRedeliverResultSchema = z.object({
  object: z.literal('webhook.redelivery'),
  /** How many deliveries were made due again (0 on a dry run). */
  redelivered: z.int().min(0),
  /** How many matched the filter, up to `limit`. */
  matched: z.int().min(0),
  /** The cap: at most this many per call (`REDELIVERY_MAX`). */
  limit: z.int().min(1),
});
export type BulkRedeliverResult = z.infer<typeof BulkRedeliverResultSchema>;
