import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { AttemptRow, DeliveryRow } from '../storage/deliveries-store.js';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(Number(ms)).toISOString());

/** What the dashboard shows of a key: never its hash, never its signing secret (only the last 4 characters). */
export function keyView(key: ApiKeyRecord) {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    created_at: iso(key.created_at),
    last_used_at: iso(key.last_used_at),
    revoked_at: iso(key.revoked_at),
    webhook_url: key.webhook_url,
    signing_secret_last4: key.signing_secret_last4,
    rate_limit_rpm: key.rate_limit_rpm,
    last_delivery:
      key.last_delivery_at === null
        ? null
        : {
            at: iso(key.last_delivery_at),
            outcome: key.last_delivery_outcome,
            status_code: key.last_delivery_status_code,
            error: key.last_delivery_error,
          },
  };
}

export function deliveryView(row: DeliveryRow) {
  return {
    id: row.id,
    event: row.event,
    request_id: row.request_id,
    test: row.request_id.startsWith('test-'),
    url: row.url,
    status: row.status,
    attempts: Number(row.attempts),
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    created_at: iso(row.created_at),
    delivered_at: iso(row.delivered_at),
  };
}

export function attemptView(row: AttemptRow) {
  return {
    attempt: Number(row.attempt),
    attempted_at: iso(row.attempted_at),
    outcome: row.outcome,
    status_code: row.status_code,
    duration_ms: Number(row.duration_ms),
    error: row.error,
    response_body: row.response_body,
  };
}
