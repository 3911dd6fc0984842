export { verifySignature } from './node/verify-signature.js';
export { sign } from './node/sign.js';
export { constructEvent } from './node/construct-event.js';
export type { ConstructEventOptions } from './construct-event.js';
export type { AuditPayload } from './audit-payload.js';
export { createGapTracker, type GapReport, type GapStore, type GapTracker, type GapTrackerOptions, type SequenceRange, type SequenceState } from './gap-tracker.js';
export { createDeduper, DUPLICATE_HEADER, type DedupeStore, type Deduper, type DeduperOptions } from './deduper.js';
export type { RawBody } from './raw-body.js';
export type { Secret } from './secrets.js';
export {
  WebhookVerificationError,
  errorBody,
  type WebhookVerificationErrorCode,
  type WebhookErrorBody,
} from './webhook-verification-error.js';
export { verifyWebhook, constructWebhookEvent, signWebhook } from './node/verify-webhook.js';
export { webhookKey, DEFAULT_TOLERANCE_SECONDS, type VerifyWebhookOptions, type WebhookHeaders } from './standard-webhooks.js';
