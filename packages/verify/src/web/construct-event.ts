import type { AuditPayload } from '../audit-payload.js';
import { assertOptions, decodeEvent, expectedDigest, signatureMismatch, untimestampedRefused, type ConstructEventOptions } from '../construct-event.js';
import { assertRawBody, toBytes, type RawBody } from '../raw-body.js';
import { toSecretList, type Secret } from '../secrets.js';
import { header, standardHeader, type WebhookHeaders } from '../standard-webhooks.js';
import { constructWebhookEvent } from './verify-webhook.js';
import { matchesAnySecret } from './verify-signature.js';

/**
 * Web Crypto `constructEvent`: verifies a delivery and resolves to its typed, validated payload, or
 * rejects with `WebhookVerificationError` (TypeError for misuse).
 *
 * @example
 * const event = await constructEvent(await request.text(), request.headers.get('x-svc-signature'), secret);
 */
export async function constructEvent(
  rawBody: RawBody,
  header: string | null | undefined,
  secret: Secret,
  options: ConstructEventOptions = {},
): Promise<AuditPayload> {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  assertOptions(options);
  const expected = expectedDigest(header);
  const bytes = toBytes(rawBody);
  if (!(await matchesAnySecret(bytes, expected, secrets))) throw signatureMismatch(secrets, bytes);
  return decodeEvent(bytes, options);
}

/**
 * What the adapters check: the Standard Webhooks headers (`webhook-timestamp` within `toleranceSeconds`,
 * default 300). `X-Svc-Signature` alone only with `allowUntimestamped` (`toleranceSeconds`, when given, on the
 * payload's `timestamp`): it has no timestamp of its own, so a copy could be replayed.
 *
 * @example
 * const event = await constructDelivery(rawBody, req.headers, secret);
 */
export async function constructDelivery(rawBody: RawBody, headers: WebhookHeaders, secret: Secret, options: ConstructEventOptions = {}): Promise<AuditPayload> {
  if (standardHeader(headers, 'signature') !== undefined) {
    return constructWebhookEvent(rawBody, headers, secret, { toleranceSeconds: options.toleranceSeconds });
  }
  const xSvcSignature = header(headers, 'x-svc-signature');
  if (options.allowUntimestamped !== true) throw untimestampedRefused(headers);
  return constructEvent(rawBody, xSvcSignature, secret, options);
}
