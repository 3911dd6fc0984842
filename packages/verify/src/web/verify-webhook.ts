import type { AuditPayload } from '../audit-payload.js';
import { decodeEvent } from '../construct-event.js';
import { WebhookVerificationError } from '../webhook-verification-error.js';
import { assertRawBody, toBytes, type RawBody } from '../raw-body.js';
import { secretNote, toSecretList, type Secret } from '../secrets.js';
import {
  assertMessage,
  formatV1,
  prefixVariants,
  prepareWebhook,
  signedContent,
  webhookError,
  type PreparedWebhook,
  type VerifyWebhookOptions,
  type WebhookHeaders,
} from '../standard-webhooks.js';
import { webhookHmacKey } from './webhook-key.js';
import { reserialisedNote } from '../reserialised-body.js';

/**
 * One HMAC of the body per secret, compared with each signature the header carries. A sender chooses how many that
 * is: subtle.verify per signature hashed the body again for each (300 in a 14 KB header, a 16 MiB body: 23 s).
 */
async function matches(prepared: PreparedWebhook, secrets: readonly string[]): Promise<boolean> {
  const content = prepared.content as Uint8Array<ArrayBuffer>;
  for (const secret of secrets) {
    const actual = new Uint8Array(await crypto.subtle.sign('HMAC', await webhookHmacKey(secret), content));
    for (const signature of prepared.signatures) if (equalInConstantTime(actual, signature)) return true;
  }
  return false;
}

/**
 * Every byte is compared whatever the first difference, so the time taken does not tell where it is. Lengths that
 * differ count as a difference without a branch of their own (the header parser already keeps 32-byte ones only).
 */
function equalInConstantTime(a: Uint8Array, b: Uint8Array): boolean {
  let difference = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!; // past b's end b[i] is undefined, which ^ reads as 0
  return difference === 0;
}

/** What a mismatch adds: the secret matches but for its whsec_ prefix, or has the shape of a known mistake (whitespace or quotes around it, an API key). */
async function mismatchNote(prepared: PreparedWebhook, secrets: readonly string[]): Promise<string> {
  for (const variant of prefixVariants(secrets)) if (await matches(prepared, variant.secrets)) return variant.note;
  return secretNote(secrets);
}

/**
 * Web Crypto `verifyWebhook` for edge runtimes: the same answers as the Node build, as a Promise.
 *
 * @example
 * const body = await request.text();
 * if (!(await verifyWebhook(body, request.headers, env.SVC_WEBHOOK_SECRET))) return new Response(null, { status: 401 });
 */
export async function verifyWebhook(rawBody: RawBody, headers: WebhookHeaders, secret: Secret, options: VerifyWebhookOptions = {}): Promise<boolean> {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  const prepared = prepareWebhook(rawBody, headers, options);
  return !(prepared instanceof WebhookVerificationError) && matches(prepared, secrets);
}

/**
 * Web Crypto `constructWebhookEvent`.
 *
 * @example
 * const event = await constructWebhookEvent(await request.text(), request.headers, env.SVC_WEBHOOK_SECRET);
 */
export async function constructWebhookEvent(
  rawBody: RawBody,
  headers: WebhookHeaders,
  secret: Secret,
  options: VerifyWebhookOptions = {},
): Promise<AuditPayload> {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  const prepared = prepareWebhook(rawBody, headers, options);
  if (prepared instanceof WebhookVerificationError) throw prepared;
  if (!(await matches(prepared, secrets))) throw webhookError('signature_mismatch', (await mismatchNote(prepared, secrets)) + reserialisedNote(rawBody));
  return decodeEvent(toBytes(rawBody), {});
}

/**
 * Web Crypto `signWebhook`.
 *
 * @example
 * const signature = await signWebhook(body, { id, timestamp }, secret);
 */
export async function signWebhook(rawBody: RawBody, message: { id: string; timestamp: number }, secret: Secret): Promise<string> {
  assertRawBody(rawBody);
  const secrets = toSecretList(secret);
  assertMessage(message);
  const content = signedContent(message.id, message.timestamp, rawBody) as Uint8Array<ArrayBuffer>;
  const parts = await Promise.all(secrets.map(async (s) => formatV1(new Uint8Array(await crypto.subtle.sign('HMAC', await webhookHmacKey(s), content)))));
  return parts.join(' ');
}
