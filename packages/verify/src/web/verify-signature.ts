import { assertRawBody, toBytes, type RawBody } from '../raw-body.js';
import { toSecretList, type Secret } from '../secrets.js';
import { parseSignatureHeader } from '../signature-header.js';
import { hmacKey } from './hmac-key.js';

/**
 * Web Crypto `verifySignature` for edge runtimes (Workers, Vercel Edge, Deno, browsers): the same
 * answers as the Node build, as a Promise.
 *
 * @example
 * export default {
 *   async fetch(request: Request, env: Env) {
 *     const body = await request.text();
 *     if (!(await verifySignature(body, request.headers.get('x-svc-signature'), env.SVC_WEBHOOK_SECRET))) {
 *       return new Response('invalid signature', { status: 401 });
 *     }
 *     return new Response(null, { status: 204 });
 *   },
 * };
 */
export async function verifySignature(rawBody: RawBody, header: string | null | undefined, secret: Secret): Promise<boolean> {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  const expected = parseSignatureHeader(header);
  return expected instanceof Uint8Array && matchesAnySecret(toBytes(rawBody), expected, secrets);
}

/** Whether any secret's HMAC of `data` equals `expected`; subtle.verify compares in constant time. */
export async function matchesAnySecret(data: Uint8Array, expected: Uint8Array, secrets: readonly string[]): Promise<boolean> {
  for (const secret of secrets) {
    if (await crypto.subtle.verify('HMAC', await hmacKey(secret), expected as Uint8Array<ArrayBuffer>, data as Uint8Array<ArrayBuffer>)) {
      return true;
    }
  }
  return false;
}
