import { z } from 'zod';
import { DELIVERY_ID_PATTERN, DELIVERY_LIST_LIMITS, DELIVERY_STATUSES } from './delivery-list-query.js';

export const DeliveryStatusSchema = z.enum(DELIVERY_STATUSES);
export type DeliveryStatus = z.infer<typeof DeliveryStatusSchema>;

/** `POST /v1/webhooks/test` success body (design §5). */
export const WebhookTestResultSchema = z.object({
  success: z.boolean(),
  delivered_to: z.string(),
  status_code: z.int().nullable().optional(),
  error: z.string().nullable().optional(),
});
export type WebhookTestResult = z.infer<typeof WebhookTestResultSchema>;

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
});
