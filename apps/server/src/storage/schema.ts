import type { Generated } from 'kysely';

/** Times are epoch milliseconds (INTEGER in SQLite, BIGINT in Postgres, parsed to number). */
export interface UsersTable {
  id: string;
  email: string;
  password_hash: string;
  created_at: number;
}

export interface ApiKeysTable {
  id: string;
  user_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  created_at: number;
  updated_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
  rate_limit_rpm: number | null;
  webhook_url: string | null;
  /** AES-256-GCM box of the signing secret; never the plaintext. */
  signing_secret_enc: string | null;
  signing_secret_last4: string | null;
  /** The secret a rotation replaced (sealed like the current one), signing beside it until `…_expires_at`. */
  previous_signing_secret_enc: string | null;
  previous_signing_secret_last4: string | null;
  previous_signing_secret_expires_at: number | null;
  /** How long a rotated-out secret keeps signing, in seconds; null: SVC_WEBHOOK_SECRET_OVERLAP. */
  signing_secret_overlap_seconds: number | null;
  last_delivery_at: number | null;
  last_delivery_outcome: string | null;
  last_delivery_status_code: number | null;
  last_delivery_error: string | null;
  /** The first failed attempt since the last successful one; null when the last attempt succeeded. */
  last_delivery_failing_since: number | null;
  /** 1 when the last attempt was a test send (Send test, `svc-cli webhooks test`), 0 when a real delivery's. */
  last_delivery_test: number | null;
}

export interface WebhookDeliveriesTable {
  id: string;
  key_id: string;
  user_id: string;
  event: string;
  request_id: string;
  url: string;
  /**
   * The payload, or only its first PAYLOAD_HEAD_CHARS characters when it is longer: webhook_payloads then holds it
   * whole (from 017; rows stored before hold theirs here whole). The store's reads give it whole.
   */
  payload: string;
  status: 'pending' | 'delivered' | 'failed' | 'cancelled';
  attempts: number;
  next_attempt_at: number | null;
  lease_until: number | null;
  leased_by: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
}

/** A delivery's payload longer than its head, whole: written with the delivery, never updated, purged with it. */
export interface WebhookPayloadsTable {
  delivery_id: string;
  payload: string;
}

export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  attempt: number;
  attempted_at: number;
  status_code: number | null;
  duration_ms: number;
  outcome: 'success' | 'failure';
  error: string | null;
  response_body: string | null;
  /** The headers the attempt sent, a JSON object; null before 007 and for attempts never sent. */
  request_headers: string | null;
}

export interface UsageDailyTable {
  key_id: string;
  user_id: string;
  day: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  errors_4xx: number;
  errors_5xx: number;
  /** Answers the grounding check ran on, and those of them it judged not grounded. */
  grounding_checked: number;
  ungrounded: number;
  /** Requests per latency bucket (see usage-latency.ts). */
  latency_0: number;
  latency_1: number;
  latency_2: number;
  latency_3: number;
  latency_4: number;
  latency_5: number;
  latency_6: number;
  latency_7: number;
  latency_8: number;
}

/** A dashboard sign-in: only the SHA-256 of the cookie's token is stored. */
export interface SessionsTable {
  token_hash: string;
  user_id: string;
  csrf_token: string;
  created_at: number;
  expires_at: number;
}

export interface SchemaMetaTable {
  key: string;
  value: string;
}

export interface ResponsesTable {
  id: string;
  key_id: string;
  previous_response_id: string | null;
  created_at: number;
  /** JSON: the request's own input items, each with its id. When kept in `response_parts` (so too the two below), `parts:` and their count. */
  input_items: string;
  /** JSON: the response object as it was answered. */
  response: string;
  /** JSON: the response's output as input items (what a follow-up reads); null on rows stored before 008. */
  output_items: string | null;
  /** Characters of input and output items in the conversation through this response; null before 008. */
  history_chars: number | null;
  /** A background response still running: the webhook worker id of the process running it; else null (018). */
  background_owner?: string | null;
  /** A background response still running: until when its owner vouches for it (ms); null once final (018). */
  background_lease_until?: number | null;
  /** A background response still running: when a cancel was asked (ms), null if none (018). */
  cancel_requested_at?: number | null;
  /** A background response: what its one audit needs beside the stored response (`BackgroundAudit` as JSON); null on others (019). */
  background_audit?: string | null;
  /**
   * A background response created with `stream: true`: `kept` while its stream's events are kept in `response_events`
   * (to be read again: GET with `stream=true`), `cut` once they passed SVC_RESPONSE_STREAM_MAX_BYTES or could not be
   * written (none kept). Null on every other response, whose stream cannot be read again (020).
   */
  stream_events?: 'kept' | 'cut' | null;
}

/**
 * The events of a background response's stream, a batch per row (the events written in one flush), in order of
 * `seq`: each batch's text is the events as they were sent (`event:` and `data:` lines), numbered `seq` to `last_seq`.
 */
export interface ResponseEventsTable {
  response_id: string;
  /** The `sequence_number` of the batch's first event. */
  seq: number;
  /** The `sequence_number` of its last. */
  last_seq: number;
  text: string;
  /** The response's `created_at`: events whose response is gone age out with it. */
  created_at: number;
}

/** A part of a long JSON column of `responses` (which then holds ''), in order of `seq`. */
export interface ResponsePartsTable {
  response_id: string;
  /** The `responses` column it belongs to: `input_items`, `response` or `output_items`. */
  field: string;
  seq: number;
  text: string;
  /** The response's `created_at`: parts whose response was never written age out with it. */
  created_at: number;
}

/** An output item of a stored response, by its id: what an `item_reference` names. */
export interface ResponseItemsTable {
  key_id: string;
  id: string;
  response_id: string;
  /** The response's `created_at`: purged with it. */
  created_at: number;
}

/** Each key's last audit-delivery `sequence` (the next delivery gets `last + 1`). */
export interface DeliverySequencesTable {
  key_id: string;
  last: number;
}

export interface Database {
  users: UsersTable;
  api_keys: ApiKeysTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_payloads: WebhookPayloadsTable;
  webhook_attempts: WebhookAttemptsTable;
  usage_daily: UsageDailyTable;
  svc_meta: SchemaMetaTable;
  sessions: SessionsTable;
  responses: ResponsesTable;
  response_parts: ResponsePartsTable;
  response_events: ResponseEventsTable;
  response_items: ResponseItemsTable;
  delivery_sequences: DeliverySequencesTable;
}

export type { Generated };
