import { parseAuditPayload, type AuditPayload } from './audit-payload.js';
import type { RawBody } from './raw-body.js';
import { reserialisedNote } from './reserialised-body.js';
import { secretNote } from './secrets.js';
import { missingSignature, type WebhookHeaders } from './standard-webhooks.js';
import { parseSignatureHeader } from './signature-header.js';
import { WebhookVerificationError } from './webhook-verification-error.js';

/** Options for `constructEvent`. */
export interface ConstructEventOptions {
  /**
   * Reject payloads whose `timestamp` is further than this many seconds from now (either way), to
   * limit replays of an old, validly signed delivery. Off by default: svc retries keep the original
   * timestamp, so choose a tolerance longer than its retry schedule.
   */
  toleranceSeconds?: number;
  /**
   * For the adapters and `constructDelivery`: accept a delivery signed only with `X-Svc-Signature` (no
   * `webhook-signature`). Off by default: that header has no timestamp and `X-Svc-Delivery` is not signed,
   * so anyone holding one delivery could send it again forever under new ids, past any `dedupe`. svc signs
   * every delivery with the Standard Webhooks headers as well; this is for a sender that does not (pair it
   * with `toleranceSeconds`, then checked on the payload's own signed `timestamp`).
   */
  allowUntimestamped?: boolean;
}

/**
 * The error for a delivery without `webhook-signature` that `allowUntimestamped` does not let through: it
 * names what is missing, and why `X-Svc-Signature` alone is not enough.
 */
export function untimestampedRefused(headers: WebhookHeaders): WebhookVerificationError {
  return missingSignature(
    headers,
    'X-Svc-Signature alone carries no timestamp, so a copy of the delivery could be replayed. svc sends webhook-id, ' +
      'webhook-timestamp and webhook-signature with every signed delivery (allowUntimestamped: true accepts X-Svc-Signature alone).',
  );
}

/** The digest a header carries, or the verification error for a missing or malformed header. */
export function expectedDigest(header: unknown): Uint8Array {
  const digest = parseSignatureHeader(header);
  if (digest === 'missing_signature') {
    throw new WebhookVerificationError('missing_signature', 'Missing X-Svc-Signature header.');
  }
  if (digest === 'malformed_signature') {
    throw new WebhookVerificationError(
      'malformed_signature',
      'Malformed X-Svc-Signature header: expected "sha256=" followed by 64 lower-case hex characters.',
    );
  }
  return digest;
}

export function assertOptions(options: ConstructEventOptions): void {
  const { toleranceSeconds } = options;
  if (toleranceSeconds !== undefined && !(Number.isFinite(toleranceSeconds) && toleranceSeconds >= 0)) {
    throw new TypeError('[@svc/verify] toleranceSeconds must be a non-negative number of seconds.');
  }
}

export const signatureMismatch = (secrets: readonly string[], rawBody: RawBody): WebhookVerificationError =>
  new WebhookVerificationError(
    'signature_mismatch',
    'X-Svc-Signature does not match the body: wrong signing secret, or the body was changed (re-serialised JSON, a different encoding) before verification.' +
      secretNote(secrets) +
      reserialisedNote(rawBody),
  );

const decoder = new TextDecoder('utf-8', { fatal: true });

/** Parses and validates a body whose signature has been checked. */
export function decodeEvent(body: string | Uint8Array, options: ConstructEventOptions): AuditPayload {
  let value: unknown;
  try {
    value = JSON.parse(typeof body === 'string' ? body : decoder.decode(body));
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'Payload is not valid UTF-8 JSON.');
  }
  const payload = parseAuditPayload(value);
  const { toleranceSeconds } = options;
  if (toleranceSeconds !== undefined && Math.abs(Date.now() - Date.parse(payload.timestamp)) > toleranceSeconds * 1000) {
    throw new WebhookVerificationError(
      'timestamp_out_of_range',
      `Payload timestamp ${payload.timestamp} is more than ${toleranceSeconds}s away from now.`,
    );
  }
  return payload;
}
