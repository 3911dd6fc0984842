import {
  parseDeliveryListQuery,
  type Delivery,
  type DeliveryAttempt,
  type DeliveryDetail,
  type DeliveryListQuery,
} from '@svc/protocol';
import { ApiError } from '../http/errors.js';
import type { AttemptRow, DeliveryRow } from '../storage/outbox-store.js';
import { isoTime, isoTimeOrNull } from '../time.js';

// The deliveries API's shapes, shared by `/v1/webhooks/deliveries` and the dashboard API's deliveries routes.

/** A delivery row as the API shows it (design §5). */
export function deliveryView(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    object: 'webhook.delivery',
    event: row.event,
    request_id: row.request_id,
    url: row.url,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    created_at: isoTime(row.created_at),
    next_attempt_at: row.status === 'pending' ? isoTimeOrNull(row.next_attempt_at) : null,
    delivered_at: isoTimeOrNull(row.delivered_at),
  };
}

/** One logged attempt as the API shows it. */
export function attemptView(row: AttemptRow): DeliveryAttempt {
  return {
    attempt: row.attempt,
    attempted_at: isoTime(row.attempted_at),
    status_code: row.status_code,
    duration_ms: row.duration_ms,
    error: row.error,
    response_body: row.response_body,
  };
}

/** A delivery with its exact payload and attempt log. */
export function deliveryDetailView(found: { delivery: DeliveryRow; attempts: AttemptRow[] }): DeliveryDetail {
  return { ...deliveryView(found.delivery), payload: found.delivery.payload, attempt_log: found.attempts.map(attemptView) };
}

/**
 * `limit`, `status` and `before` of a deliveries list request; a bad value is a 400 `invalid_value` naming it.
 *
 * @example
 * const { rows, hasMore } = await store.deliveries.list(keyId, deliveryListQuery(req.query));
 */
export function deliveryListQuery(query: Readonly<Record<string, unknown>>): DeliveryListQuery {
  const parsed = parseDeliveryListQuery(query);
  if (!parsed.ok) throw new ApiError('invalid_value', parsed.issue.message, { param: parsed.issue.param });
  return parsed.query;
}
