import type { IncomingHttpHeaders } from 'node:http';
import { verifySignature, verifyWebhook } from '@svc/verify';

/** What `listen --secret` concluded about one delivery; `reason` says why it was refused. */
export type SignatureVerdict = { signature: 'valid' } | { signature: 'invalid'; reason: string };

/**
 * Checks deliveries as a careful receiver would. With the Standard Webhooks headers (what svc sends):
 * `webhook-signature` under the secret, `webhook-timestamp` within `toleranceSeconds` of now (an older one
 * is a replay). The same delivery twice (a retry, even one in the same second with identical headers) verifies
 * both times: telling it apart is de-duplication by `webhook-id`, the receiver's job. Without them (`svc-cli
 * replay`, servers before Standard Webhooks): `X-Svc-Signature`.
 *
 * @example
 * const check = createSignatureCheck('whsec_…', 300);
 * check(body, req.headers, new Date()); // { signature: 'valid' }
 */
export function createSignatureCheck(secret: string, toleranceSeconds: number): (body: Buffer, headers: IncomingHttpHeaders, now: Date) => SignatureVerdict {
  return (body, headers, now) => {
    if (headers['webhook-signature'] === undefined) {
      const header = headers['x-svc-signature'];
      return verifySignature(body, Array.isArray(header) ? header[0] : header, secret)
        ? { signature: 'valid' }
        : { signature: 'invalid', reason: 'X-Svc-Signature does not match the body' };
    }
    const timestamp = Number(headers['webhook-timestamp']);
    const age = Math.round(now.getTime() / 1000 - timestamp);
    if (Number.isFinite(age) && Math.abs(age) > toleranceSeconds) {
      const when = age > 0 ? `${age} s old` : `${-age} s in the future`;
      return { signature: 'invalid', reason: `webhook-timestamp is ${when} (tolerance ${toleranceSeconds} s): refused as a replay` };
    }
    if (!verifyWebhook(body, headers, secret, { toleranceSeconds, now })) {
      return { signature: 'invalid', reason: 'webhook-signature does not match (wrong secret, or the body, id or timestamp changed)' };
    }
    return { signature: 'valid' };
  };
}
