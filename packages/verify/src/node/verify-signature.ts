import { createHmac, timingSafeEqual } from 'node:crypto';
import { assertRawBody, isArrayBuffer, type RawBody } from '../raw-body.js';
import { toSecretList, type Secret } from '../secrets.js';
import { parseSignatureHeader } from '../signature-header.js';
import { hmacKey } from './hmac-key.js';

/**
 * Whether `header` (`X-Svc-Signature`) is the HMAC-SHA256 of `rawBody` under `secret`, or under any of
 * several secrets while rotating. A missing, malformed or wrong signature is `false`; only misuse
 * (a parsed body, no secret) throws.
 *
 * @example
 * app.post('/webhooks/svc', express.raw({ type: 'application/json' }), (req, res) => {
 *   if (!verifySignature(req.body, req.get('x-svc-signature'), process.env.SVC_WEBHOOK_SECRET!)) {
 *     return res.sendStatus(401);
 *   }
 *   const event = JSON.parse(req.body.toString('utf8'));
 *   res.sendStatus(204);
 * });
 */
export function verifySignature(rawBody: RawBody, header: string | null | undefined, secret: Secret): boolean {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  const expected = parseSignatureHeader(header);
  return expected instanceof Uint8Array && matchesAnySecret(rawBody, expected, secrets);
}

/** Whether any secret's HMAC of the body equals the 32-byte `expected` digest. */
export function matchesAnySecret(rawBody: RawBody, expected: Uint8Array, secrets: readonly string[]): boolean {
  const data = isArrayBuffer(rawBody) ? new Uint8Array(rawBody) : rawBody;
  for (const secret of secrets) {
    const actual = createHmac('sha256', hmacKey(secret)).update(data).digest();
    // Both are 32 bytes (the strict header parse yields no other length), so timingSafeEqual cannot throw.
    if (timingSafeEqual(actual, expected)) return true;
  }
  return false;
}
