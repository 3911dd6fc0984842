import { createHmac } from 'node:crypto';
import { assertRawBody, isArrayBuffer, type RawBody } from '../raw-body.js';
import { assertSigningSecret } from '../secrets.js';
import { hmacKey } from './hmac-key.js';

/**
 * The `X-Svc-Signature` value svc would send for `rawBody`: `sha256=<lower-case hex HMAC-SHA256>`.
 * For receivers' own tests.
 *
 * @example
 * const body = JSON.stringify(samplePayload);
 * await fetch(url, { method: 'POST', body, headers: { 'x-svc-signature': sign(body, secret) } });
 */
export function sign(rawBody: RawBody, secret: string): string {
  assertRawBody(rawBody);
  assertSigningSecret(secret);
  const data = isArrayBuffer(rawBody) ? new Uint8Array(rawBody) : rawBody;
  return `sha256=${createHmac('sha256', hmacKey(secret)).update(data).digest('hex')}`;
}
