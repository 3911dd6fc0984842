import { assertRawBody, toBytes, type RawBody } from '../raw-body.js';
import { assertSigningSecret } from '../secrets.js';
import { formatSignatureHeader } from '../signature-header.js';
import { hmacKey } from './hmac-key.js';

/**
 * Web Crypto `sign`: the `X-Svc-Signature` value (`sha256=<hex>`) for `rawBody`, as a Promise.
 *
 * @example
 * const header = await sign(JSON.stringify(samplePayload), secret);
 */
export async function sign(rawBody: RawBody, secret: string): Promise<string> {
  assertRawBody(rawBody);
  assertSigningSecret(secret);
  const digest = await crypto.subtle.sign('HMAC', await hmacKey(secret), toBytes(rawBody) as Uint8Array<ArrayBuffer>);
  return formatSignatureHeader(new Uint8Array(digest));
}
