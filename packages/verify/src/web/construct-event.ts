import type { AuditPayload } from '../audit-payload.js';
import { assertOptions, decodeEvent, expectedDigest, signatureMismatch, type ConstructEventOptions } from '../construct-event.js';
import { assertRawBody, toBytes, type RawBody } from '../raw-body.js';
import { toSecretList, type Secret } from '../secrets.js';
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
  if (!(await matchesAnySecret(bytes, expected, secrets))) throw signatureMismatch();
  return decodeEvent(bytes, options);
}
