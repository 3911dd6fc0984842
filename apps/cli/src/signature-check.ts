import type { IncomingHttpHeaders } from 'node:http';
import { constructWebhookEvent, verifySignature, verifyWebhook, WebhookVerificationError } from '@svc/verify';

/**
 * What `listen --secret` concluded about one delivery; `reason` says why it was refused, and `code` is the one
 * `@svc/verify`'s adapters answer for the same refusal.
 */
export type SignatureVerdict =
  | { signature: 'valid' }
  | { signature: 'invalid'; code: 'missing_signature' | 'malformed_signature' | 'signature_mismatch' | 'timestamp_out_of_range'; reason: string };

// svc sends webhook-id and webhook-timestamp on every delivery, and the signatures only when the key has a secret.
const UNSIGNED =
  'unsigned: no webhook-signature or X-Svc-Signature header. svc signs deliveries only when the API key has a signing ' +
  'secret: set this one on the key (dashboard Settings → API Keys → Signing secret, or `svc-server keys update KEY --signing-secret …`)';

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
export function createSignatureCheck(secret: string | readonly string[], toleranceSeconds: number): (body: Buffer, headers: IncomingHttpHeaders, now: Date) => SignatureVerdict {
  return (body, headers, now) => {
    if (headers['webhook-signature'] === undefined) {
      const header = headers['x-svc-signature'];
      if (header === undefined) return { signature: 'invalid', code: 'missing_signature', reason: UNSIGNED };
      return verifySignature(body, Array.isArray(header) ? header[0] : header, secret)
        ? { signature: 'valid' }
        : { signature: 'invalid', code: 'signature_mismatch', reason: 'X-Svc-Signature does not match the body' };
    }
    const timestamp = Number(headers['webhook-timestamp']);
    const age = Math.round(now.getTime() / 1000 - timestamp);
    if (Number.isFinite(age) && Math.abs(age) > toleranceSeconds) {
      const when = age > 0 ? `${age} s old` : `${-age} s in the future`;
      return { signature: 'invalid', code: 'timestamp_out_of_range', reason: `webhook-timestamp is ${when} (tolerance ${toleranceSeconds} s): refused as a replay. ${STALE}` };
    }
    if (!verifyWebhook(body, headers, secret, { toleranceSeconds, now })) return refusal(body, headers, secret, toleranceSeconds, now);
    return { signature: 'valid' };
  };
}

const SECRET_NOTES = /"whsec_" prefix|signing secret is wrapped in quotes|is an svc API key/;

// svc signs each attempt as it sends it, so a live delivery is seconds off: when every one is refused, the clock is
// at fault (a laptop's WSL or VM clock drifts after sleep), and listen is where a developer first meets it.
const STALE =
  'svc signs each attempt as it sends it: if every delivery is off by about this much, this machine\'s clock is (sync it with NTP); ' +
  'svc-cli replay signs a delivery anew only with --secret';

const MISMATCH = 'webhook-signature does not match (wrong secret, or the body, id or timestamp changed)';

/**
 * Why @svc/verify refused: a header missing or malformed (webhook-id left out by a proxy or a hand-made request,
 * a cut or hand-typed webhook-signature) under its own code and message, naming the header, as its adapters answer;
 * a mismatch with its note on the secret when it knows more (one that matches but for its whsec_ prefix, what
 * `standardwebhooks` and `svix` accept either way; one in quotes; the API key given as the secret), else the usual
 * reasons. (Its note on a re-serialised body is left out: listen has the bytes as they arrived.)
 */
function refusal(body: Buffer, headers: IncomingHttpHeaders, secret: string | readonly string[], toleranceSeconds: number, now: Date): SignatureVerdict {
  try {
    constructWebhookEvent(body, headers, secret, { toleranceSeconds, now });
  } catch (err) {
    if (err instanceof WebhookVerificationError && (err.code === 'missing_signature' || err.code === 'malformed_signature')) {
      return { signature: 'invalid', code: err.code, reason: err.message };
    }
    if (err instanceof WebhookVerificationError && err.code === 'signature_mismatch' && SECRET_NOTES.test(err.message)) {
      return { signature: 'invalid', code: 'signature_mismatch', reason: err.message.replace(/ The body is not byte for byte .*$/s, '') };
    }
  }
  return { signature: 'invalid', code: 'signature_mismatch', reason: MISMATCH };
}
