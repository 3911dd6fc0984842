import { createHmac, timingSafeEqual } from 'node:crypto';
import type { AuditPayload } from '../audit-payload.js';
import { decodeEvent } from '../construct-event.js';
import { WebhookVerificationError } from '../webhook-verification-error.js';
import { assertRawBody, toBytes, type RawBody } from '../raw-body.js';
import { secretNote, toSecretList, type Secret } from '../secrets.js';
import { assertMessage, prefixVariants, prepareWebhook, webhookError, type PreparedWebhook, type VerifyWebhookOptions, type WebhookHeaders } from '../standard-webhooks.js';
import { webhookHmacKey } from './webhook-key.js';
import { reserialisedNote } from '../reserialised-body.js';

function matches(prepared: PreparedWebhook, secrets: readonly string[]): boolean {
  for (const secret of secrets) {
    const actual = createHmac('sha256', webhookHmacKey(secret)).update(prepared.content).digest();
    for (const signature of prepared.signatures) {
      // Both are 32 bytes (the header parse keeps no other length), so timingSafeEqual cannot throw.
      if (timingSafeEqual(actual, signature)) return true;
    }
  }
  return false;
}

/** What a mismatch adds: the secret matches but for its whsec_ prefix, or has the shape of a known mistake (whitespace or quotes around it, an API key). */
function mismatchNote(prepared: PreparedWebhook, secrets: readonly string[]): string {
  for (const variant of prefixVariants(secrets)) if (matches(prepared, variant.secrets)) return variant.note;
  return secretNote(secrets);
}

/**
 * Whether a delivery's Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`)
 * are valid for `rawBody` under `secret` (or any of several while rotating), with `webhook-timestamp` within
 * `toleranceSeconds` (default 300) of now, which refuses replays of old deliveries. Missing, malformed,
 * stale or wrong headers are `false`; only misuse throws TypeError.
 *
 * @example
 * app.post('/webhooks/svc', express.raw({ type: 'application/json' }), (req, res) => {
 *   if (!verifyWebhook(req.body, req.headers, process.env.SVC_WEBHOOK_SECRET!)) return res.sendStatus(401);
 *   res.sendStatus(204); // de-duplicate on req.headers['webhook-id']
 * });
 */
export function verifyWebhook(rawBody: RawBody, headers: WebhookHeaders, secret: Secret, options: VerifyWebhookOptions = {}): boolean {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  const prepared = prepareWebhook(rawBody, headers, options);
  return !(prepared instanceof WebhookVerificationError) && matches(prepared, secrets);
}

/**
 * `verifyWebhook`, then the typed, validated payload. Throws `WebhookVerificationError` (`code`, `status`)
 * for a delivery that must not be trusted, TypeError for misuse.
 *
 * @example
 * const event = constructWebhookEvent(req.body, req.headers, [newSecret, oldSecret]);
 */
export function constructWebhookEvent(
  rawBody: RawBody,
  headers: WebhookHeaders,
  secret: Secret,
  options: VerifyWebhookOptions = {},
): AuditPayload {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  const prepared = prepareWebhook(rawBody, headers, options);
  if (prepared instanceof WebhookVerificationError) throw prepared;
  if (!matches(prepared, secrets)) throw webhookError('signature_mismatch', mismatchNote(prepared, secrets) + reserialisedNote(rawBody));
  return decodeEvent(toBytes(rawBody), {});
}

/**
 * The `webhook-signature` value svc sends for a delivery: `v1,<base64>` per secret, space-separated (the
 * new secret and the one still in its overlap while rotating). For receivers' own tests, and svc itself.
 *
 * @example
 * const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signWebhook(body, { id, timestamp: ts }, secret) };
 */
export function signWebhook(rawBody: RawBody, message: { id: string; timestamp: number }, secret: Secret): string {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  assertMessage(message);
  // `{id}.{timestamp}.` then the body, fed to the HMAC as two pieces: the bytes `signedContent` joins, without a copy of the body.
  const head = `${message.id}.${message.timestamp}.`;
  const body = toBytes(rawBody);
  return secrets.map((s) => `v1,${createHmac('sha256', webhookHmacKey(s)).update(head, 'utf8').update(body).digest('base64')}`).join(' ');
}
