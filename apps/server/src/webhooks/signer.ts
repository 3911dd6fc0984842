import { createHmac } from 'node:crypto';

/**
 * The `X-Svc-Signature` value: HMAC-SHA256 of the exact body bytes, keyed with the secret string's UTF-8.
 *
 * @example
 * signBody('{"event":"llm.request.completed",…}', 'whsec_…') // 'sha256=9f…'
 */
export function signBody(body: string | Uint8Array, secret: string): string {
  return `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex')}`;
}
