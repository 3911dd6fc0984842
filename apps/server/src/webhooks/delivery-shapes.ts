import {
  BulkRedeliverRequestSchema,
  parseDeliveryListQuery,
  statusCodeRange,
  type Delivery,
  type DeliveryAttempt,
  type DeliveryDetail,
} from '@svc/protocol';
import { ApiError } from '../http/errors.js';
import type { AttemptRow, DeliveryRow, DeliverySummaryRow, ListOptions, RedeliveryFilter } from '../storage/outbox-store.js';
import { isoTime, isoTimeOrNull } from '../time.js';

// The deliveries API's shapes, shared by `/v1/webhooks/deliveries` and the dashboard API's deliveries routes.

/** A delivery row, or a page's summary of one, as the API shows it (design §5). */
export function deliveryView(row: DeliveryRow | DeliverySummaryRow): Delivery {
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
    request_status_code: requestStatusCode('payload' in row ? row.payload : row.payload_head),
  };
}

/**
 * The payload's `status_code` (what the original request answered), read without parsing the payload: it is
 * serialised by `audit-payload.ts`, whose fields before it are numbers and short strings, so the first match
 * is the field itself (a prompt containing the text comes after it).
 */
function requestStatusCode(payload: string): number | null {
  const match = /"status_code":(\d{3})[,}]/.exec(payload);
  return match ? Number(match[1]) : null;
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
    request_headers: parseHeaders(row.request_headers),
  };
}

function parseHeaders(json: string | null): Record<string, string> | null {
  if (json === null) return null;
  try {
    return JSON.parse(json) as Record<string, string>;
  } catch {
    return null;
  }
}

/** A delivery with its exact payload and attempt log. */
export function deliveryDetailView(found: { delivery: DeliveryRow; attempts: AttemptRow[] }): DeliveryDetail {
  return { ...deliveryView(found.delivery), payload: found.delivery.payload, attempt_log: found.attempts.map(attemptView) };
}

/**
 * A bulk redelivery's body: the terms of a deliveries list (status, request id, a creation time range as ISO 8601,
 * the last attempt's HTTP code); a bad value is a 400 `invalid_value`.
 *
 * @example
 * const { filter, dryRun } = bulkRedeliverFilter(req.body); // { filter: { status: 'failed', since: 1764… }, dryRun: false }
 */
export function bulkRedeliverFilter(body: unknown): { filter: Omit<RedeliveryFilter, 'limit'>; dryRun: boolean } {
  const parsed = BulkRedeliverRequestSchema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const param = typeof issue?.path[0] === 'string' ? issue.path[0] : null;
    throw new ApiError('invalid_value', `Invalid '${param ?? 'body'}': ${issue?.message ?? 'not a redelivery filter'}. Expected { status?, request_id?, since?, until?, last_status_code? } with ISO 8601 times and a code such as 500 or 5xx.`, { param });
  }
  const { status, request_id, since, until, last_status_code, dry_run } = parsed.data;
  // Postgres refuses NUL in text: the search would fail there as an internal error. A list's URL is refused alike (app.ts).
  if (request_id?.includes('\u0000')) {
    throw new ApiError('invalid_value', "Invalid 'request_id': it holds a NUL character (\\u0000), which no request id contains.", { param: 'request_id' });
  }
  return {
    filter: {
      status,
      requestId: request_id,
      since: since === undefined ? undefined : Date.parse(since),
      until: until === undefined ? undefined : Date.parse(until),
      lastStatusCode: last_status_code === undefined ? undefined : statusCodeRange(last_status_code),
    },
    dryRun: dry_run === true,
  };
}

/**
 * A deliveries list request's page and filter (`limit`, `before`, `status`, `request_id`, `since`, `until`,
 * `last_status_code`); a bad value is a 400 `invalid_value` naming it.
 *
 * @example
 * const { rows, hasMore } = await store.deliveries.list(keyId, deliveryListQuery(req.query));
 */
export function deliveryListQuery(query: Readonly<Record<string, unknown>>): ListOptions {
  const parsed = parseDeliveryListQuery(query);
  if (!parsed.ok) throw new ApiError('invalid_value', parsed.issue.message, { param: parsed.issue.param });
  const q = parsed.query;
  return {
    limit: q.limit,
    before: q.before,
    status: q.status,
    requestId: q.request_id,
    since: q.since === undefined ? undefined : Date.parse(q.since),
    until: q.until === undefined ? undefined : Date.parse(q.until),
    lastStatusCode: q.last_status_code === undefined ? undefined : statusCodeRange(q.last_status_code),
  };
}
