import { z } from 'zod';
import { BulkRedeliverResultSchema, DeliveryAttemptSchema, DeliveryOutcomeSchema, DeliverySchema, WebhookTestResultSchema } from './webhooks.js';

// The dashboard's JSON API (/dashboard/api): what the server's dashboard router answers and the SPA reads.

/** The outcome of a key's last delivery attempt. */
export const LastDeliverySchema = z.object({
  at: z.string(),
  outcome: DeliveryOutcomeSchema,
  status_code: z.int().nullable(),
  error: z.string().nullable(),
  /** The attempt was a test send's (Send test, `svc-cli webhooks test`), not a real delivery's. */
  test: z.boolean(),
});
export type LastDelivery = z.infer<typeof LastDeliverySchema>;

/** What the dashboard shows of a key: never its hash, never its signing secret (only the last 4 characters). */
export const DashboardKeySchema = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
  webhook_url: z.string().nullable(),
  signing_secret_last4: z.string().nullable(),
  /** The secret the last rotation replaced, while it still signs beside the current one. */
  previous_signing_secret_last4: z.string().nullable(),
  /** Until when (ISO 8601) the replaced secret still signs; null when none does. */
  previous_signing_secret_expires_at: z.string().nullable(),
  /** How long a rotated-out secret keeps signing, in seconds; null: the server's default. */
  signing_secret_overlap_seconds: z.int().nullable(),
  rate_limit_rpm: z.int().nullable(),
  last_delivery: LastDeliverySchema.nullable(),
  /** Deliveries that failed and will be tried again (the last attempt failing is then not the end of it). */
  retrying: z.object({ deliveries: z.int().min(1), next_attempt_at: z.string().nullable() }).nullable(),
  /**
   * Since when every delivery attempt has failed (null while the last one succeeded). Nothing is discarded
   * meanwhile: deliveries keep their retries, and can be redelivered in bulk once the endpoint is fixed.
   */
  failing_since: z.string().nullable(),
});
export type DashboardKey = z.infer<typeof DashboardKeySchema>;

const UserSchema = z.object({ id: z.string(), email: z.string() });

/** `POST /login`. */
export const DashboardSignInSchema = z.object({ user: UserSchema, csrf_token: z.string() });
export type DashboardSignIn = z.infer<typeof DashboardSignInSchema>;

/** `GET /me`: the session, and the limits the key settings form offers. */
export const DashboardMeSchema = DashboardSignInSchema.extend({
  default_rate_limit_rpm: z.int(),
  max_rate_limit_rpm: z.int(),
  /** SVC_WEBHOOK_SECRET_OVERLAP in seconds: how long a rotated-out secret keeps signing unless the key says otherwise. */
  default_signing_secret_overlap_seconds: z.int(),
});
export type DashboardMe = z.infer<typeof DashboardMeSchema>;

/** `GET /keys`. */
export const DashboardKeyListSchema = z.object({ data: z.array(DashboardKeySchema) });
export type DashboardKeyList = z.infer<typeof DashboardKeyListSchema>;

/** `PATCH /keys/{id}`, `POST /keys/{id}/revoke`, `DELETE /keys/{id}/signing-secret`: the key as it is now. */
export const DashboardKeyResultSchema = z.object({ key: DashboardKeySchema });
export type DashboardKeyResult = z.infer<typeof DashboardKeyResultSchema>;

/** `POST /keys`: the new key and its token, shown once. */
export const DashboardCreatedKeySchema = DashboardKeyResultSchema.extend({ token: z.string() });
export type DashboardCreatedKey = z.infer<typeof DashboardCreatedKeySchema>;

/**
 * `POST /keys/{id}/signing-secret`: the generated secret, shown once. When it replaced one, the key's
 * `previous_signing_secret_expires_at` says until when the old one still signs.
 */
export const DashboardSigningSecretSchema = DashboardKeyResultSchema.extend({ secret: z.string() });
export type DashboardSigningSecret = z.infer<typeof DashboardSigningSecretSchema>;

/** `POST /keys/{id}/test`: the attempt's outcome and the key with its updated last delivery. */
export const DashboardTestResultSchema = DashboardKeyResultSchema.extend({ result: WebhookTestResultSchema });
export type DashboardTestResult = z.infer<typeof DashboardTestResultSchema>;

/** A delivery as the dashboard lists it: the API's view without `object`, with `test` for test deliveries. */
export const DashboardDeliverySchema = DeliverySchema.omit({ object: true }).extend({ test: z.boolean() });
export type DashboardDelivery = z.infer<typeof DashboardDeliverySchema>;

/** One attempt, with its outcome. */
export const DashboardDeliveryAttemptSchema = DeliveryAttemptSchema.extend({ outcome: DeliveryOutcomeSchema });
export type DashboardDeliveryAttempt = z.infer<typeof DashboardDeliveryAttemptSchema>;

/** `GET /keys/{id}/deliveries/{did}`: `payload` is the exact bytes that were signed and sent. */
export const DashboardDeliveryDetailSchema = DashboardDeliverySchema.extend({
  payload: z.string(),
  attempt_log: z.array(DashboardDeliveryAttemptSchema),
});
export type DashboardDeliveryDetail = z.infer<typeof DashboardDeliveryDetailSchema>;

/**
 * `GET /keys/{id}/deliveries/{did}/progress`: the details without the payload, which never changes. An open
 * delivery follows its attempts with it while pending; the payload (up to megabytes) is read once.
 */
export const DashboardDeliveryProgressSchema = DashboardDeliveryDetailSchema.omit({ payload: true });
export type DashboardDeliveryProgress = z.infer<typeof DashboardDeliveryProgressSchema>;

/** `POST /keys/{id}/deliveries/redeliver`: the body and answer of the API's bulk redelivery. */
export const DashboardBulkRedeliverSchema = BulkRedeliverResultSchema;

/** `GET /keys/{id}/deliveries`: a page, newest first; the last row's id is the next page's `before`. */
export const DashboardDeliveryPageSchema = z.object({ data: z.array(DashboardDeliverySchema), has_more: z.boolean() });
export type DashboardDeliveryPage = z.infer<typeof DashboardDeliveryPageSchema>;
