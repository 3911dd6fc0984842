import type { AuditPayload } from '../audit-payload.js';
import { assertOptions, decodeEvent, expectedDigest, signatureMismatch, untimestampedRefused, type ConstructEventOptions } from '../construct-event.js';
import { assertRawBody, isArrayBuffer, type RawBody } from '../raw-body.js';
import { toSecretList, type Secret } from '../secrets.js';
import { header, standardHeader, type WebhookHeaders } from '../standard-webhooks.js';
import { constructWebhookEvent } from './verify-webhook.js';
import { matchesAnySecret } from './verify-signature.js';

/**
 * Verifies a delivery and returns its typed, validated payload. Throws `WebhookVerificationError`
 * (with `code` and `status`) for a delivery that must not be trusted, TypeError for misuse.
 *
 * @example
 * const event = constructEvent(req.body, req.get('x-svc-signature'), secret, { toleranceSeconds: 86_400 });
 * if (event.test) return res.sendStatus(204);
 * await db.insert(event);
 */
export function constructEvent(
  rawBody: RawBody,
  header: string | null | undefined,
  secret: Secret,
  options: ConstructEventOptions = {},
): AuditPayload {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  assertOptions(options);
  const expected = expectedDigest(header);
  if (!matchesAnySecret(rawBody, expected, secrets)) throw signatureMismatch(secrets, rawBody);
  return decodeEvent(isArrayBuffer(rawBody) ? new Uint8Array(rawBody) : rawBody, options);
}

/**
 * What the adapters check: the Standard Webhooks headers (`webhook-timestamp` within `toleranceSeconds`,
 * default 300). `X-Svc-Signature` alone only with `allowUntimestamped` (`toleranceSeconds`, when given, on the
 * payload's `timestamp`): it has no timestamp of its own, so a copy could be replayed.
 *
 * @example
 * const event = constructDelivery(rawBody, req.headers, secret);
 */
export function constructDelivery(rawBody: RawBody, headers: WebhookHeaders, secret: Secret, options: ConstructEventOptions = {}): AuditPayload {
  if (standardHeader(headers, 'signature') !== undefined) {
    return constructWebhookEvent(rawBody, headers, secret, { toleranceSeconds: options.toleranceSeconds });
  }
  const xSvcSignature = header(headers, 'x-svc-signature');
  if (options.allowUntimestamped !== true) throw untimestampedRefused(headers);
  return constructEvent(rawBody, xSvcSignature, secret, options);
}
