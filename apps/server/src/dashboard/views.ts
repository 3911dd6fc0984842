import type { DashboardDelivery, DashboardDeliveryAttempt, DashboardKey, DeliveryOutcome } from '@svc/protocol';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { AttemptRow, DeliveryRow, DeliverySummaryRow, Retrying } from '../storage/outbox-store.js';
import { isTestRequestId } from '../audit/audit-payload.js';
import { isoTime, isoTimeOrNull } from '../time.js';
import { attemptView, deliveryView } from '../webhooks/delivery-shapes.js';

/** What the dashboard shows of a key: never its hash, never its signing secret (only the last 4 characters). */
export function keyView(key: ApiKeyRecord, now: number, retrying?: Retrying): DashboardKey {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    created_at: isoTime(key.created_at),
    last_used_at: isoTimeOrNull(key.last_used_at),
    revoked_at: isoTimeOrNull(key.revoked_at),
    webhook_url: key.webhook_url,
    signing_secret_last4: key.signing_secret_last4,
    ...previousSecretView(key, now),
    signing_secret_overlap_seconds: key.signing_secret_overlap_seconds,
    rate_limit_rpm: key.rate_limit_rpm,
    last_delivery:
      key.last_delivery_at === null
        ? null
        : {
            at: isoTime(key.last_delivery_at),
            // The column is written only from a DeliveryStatusUpdate, whose outcome is one of the two.
            outcome: key.last_delivery_outcome as DeliveryOutcome,
            status_code: key.last_delivery_status_code,
            error: key.last_delivery_error,
            test: key.last_delivery_test === 1,
          },
    failing_since: isoTimeOrNull(key.last_delivery_failing_since),
    retrying: retrying && retrying.deliveries > 0 ? { deliveries: retrying.deliveries, next_attempt_at: isoTimeOrNull(retrying.nextAttemptAt) } : null,
  };
}

/** The API's view of a delivery, without `object`, marked `test` for test deliveries. */
export function dashboardDeliveryView(row: DeliveryRow | DeliverySummaryRow): DashboardDelivery {
  const { object: _object, ...delivery } = deliveryView(row);
  return { ...delivery, test: isTestRequestId(row.request_id) };
}

/** The API's view of an attempt, with its outcome. */
export function dashboardAttemptView(row: AttemptRow): DashboardDeliveryAttempt {
  return { ...attemptView(row), outcome: row.outcome };
}

/** The rotated-out secret while it still signs (its overlap not yet over), else nulls. */
export function previousSecretView(
  key: ApiKeyRecord,
  now: number,
): { previous_signing_secret_last4: string | null; previous_signing_secret_expires_at: string | null } {
  const until = key.previous_signing_secret_expires_at === null ? 0 : Number(key.previous_signing_secret_expires_at);
  if (key.previous_signing_secret_enc === null || until <= now) return { previous_signing_secret_last4: null, previous_signing_secret_expires_at: null };
  return { previous_signing_secret_last4: key.previous_signing_secret_last4, previous_signing_secret_expires_at: isoTime(until) };
}
