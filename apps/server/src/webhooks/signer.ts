import { createHmac } from 'node:crypto';
import { signWebhook } from '@svc/verify';

/**
 * The `X-Svc-Signature` value: HMAC-SHA256 of the exact body bytes, keyed with the secret string's UTF-8.
 *
 * @example
 * signBody('{"event":"llm.request.completed",…}', 'whsec_…') // 'sha256=9f…'
 */
export function signBody(body: string | Uint8Array, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * The `webhook-signature` value (Standard Webhooks): `v1,<base64>` over `{id}.{timestamp}.{body}` for the
 * secret, then for the rotated-out one while its overlap lasts, space-separated. The key is what
 * `@svc/verify`'s `webhookKey` says: `whsec_<base64>` decoded, so the `standardwebhooks` and `svix`
 * libraries verify with the secret as shown; any other secret's UTF-8 bytes.
 *
 * @example
 * signStandard(body, 'whd_…', 1767225600, 'whsec_…') // 'v1,K5oZ…='
 */
export function signStandard(body: string | Uint8Array, id: string, timestamp: number, secret: string, previousSecret?: string | null): string {
  return signWebhook(body, { id, timestamp }, previousSecret ? [secret, previousSecret] : secret);
}
