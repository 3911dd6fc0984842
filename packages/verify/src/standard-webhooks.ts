import { toBytes, type RawBody } from './raw-body.js';
import { WebhookVerificationError } from './webhook-verification-error.js';

/** Seconds a `webhook-timestamp` may be from now, either way, by default (the Standard Webhooks value). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** Options for `verifyWebhook` and `constructWebhookEvent`. */
export interface VerifyWebhookOptions {
  /** Largest distance, in seconds, between `webhook-timestamp` and now. Default 300. */
  toleranceSeconds?: number;
  /** The current time (a `Date` or epoch milliseconds); for tests. Default: now. */
  now?: Date | number;
}

/**
 * Request headers in any of the usual shapes: a Fetch `Headers`, node's `req.headers` (lower-case names), a plain
 * object or a `Map` of names to values (names in any case, a repeated header as a list).
 */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | ReadonlyMap<string, string | readonly string[] | undefined>
  | Record<string, string | string[] | undefined>;

/** The three Standard Webhooks headers, read and checked for shape. */
export interface StandardHeaders {
  id: string;
  timestamp: number;
  /** Every `v1` signature, 32 bytes each; other versions are skipped, as the standard says. */
  signatures: Uint8Array[];
}

const WHSEC = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const encoder = new TextEncoder();

/**
 * The HMAC key of `webhook-signature` for a secret, so that the `standardwebhooks` and `svix` libraries
 * verify with the secret as shown: `whsec_<base64>` is the base64-decoded bytes (what those libraries do);
 * any other secret (one chosen by a user, or an early `whsec_<base64url>` one) is its UTF-8 bytes, and a
 * receiver using those libraries passes them `"whsec_" + base64(secret)`.
 *
 * @example
 * webhookKey('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw') // the 24 decoded bytes
 * webhookKey('my own secret')                          // the 13 UTF-8 bytes
 */
export function webhookKey(secret: string): Uint8Array {
  const rest = secret.startsWith(WHSEC) ? secret.slice(WHSEC.length) : '';
  if (rest !== '' && BASE64.test(rest)) return Uint8Array.from(atob(rest), (c) => c.charCodeAt(0));
  return encoder.encode(secret);
}

/**
 * The secrets differing from `secrets` only by the `whsec_` prefix, each with what a match under them means, for a
 * signature mismatch's message only (never accepted): the `standardwebhooks` and `svix` libraries take
 * `whsec_<base64>` and `<base64>` alike, so a receiver moved from them may hold either; here the prefix decides
 * whether the base64 is decoded, so a secret without it is another key.
 */
export function prefixVariants(secrets: readonly string[]): ReadonlyArray<{ secrets: string[]; note: string }> {
  return [
    {
      secrets: secrets.filter((s) => !s.startsWith(WHSEC) && BASE64.test(s)).map((s) => WHSEC + s),
      note:
        ' The signing secret is missing its "whsec_" prefix: pass it exactly as the svc dashboard shows it, "whsec_…" ' +
        '(without the prefix its characters, not the base64-decoded bytes, are the HMAC key).',
    },
    {
      secrets: secrets.filter((s) => s.startsWith(WHSEC) && s.length > WHSEC.length).map((s) => s.slice(WHSEC.length)),
      note:
        ' It matches the signing secret without its "whsec_" prefix: the API key\'s secret was set without it ' +
        '(`svc-server keys update KEY --signing-secret …`); give svc and this receiver the same secret, prefix included.',
    },
  ];
}

/** The bytes `webhook-signature` signs: `{id}.{timestamp}.{body}`. */
export function signedContent(id: string, timestamp: number, rawBody: RawBody): Uint8Array {
  const head = encoder.encode(`${id}.${timestamp}.`);
  const body = toBytes(rawBody);
  const content = new Uint8Array(head.length + body.length);
  content.set(head);
  content.set(body, head.length);
  return content;
}

/**
 * One header's value from any shape (`name` in lower case); several values (node) joined by a space. A plain
 * object or a `Map` is read whatever the case of its names, as the standardwebhooks and svix libraries read an
 * object: node's `req.headers` is lower-case, but AWS Lambda's `event.headers`, hand-built objects and Maps made from
 * `rawHeaders` keep `Webhook-Id` as sent. A `Map` has a `get` too, but unlike `Headers` its names are case-sensitive.
 */
export function header(headers: WebhookHeaders, name: string): string | undefined {
  let value: string | readonly string[] | null | undefined;
  if (headers instanceof Map) {
    const key = headers.has(name) ? name : [...headers.keys()].find((k) => String(k).toLowerCase() === name);
    value = headers.get(key);
  } else if (typeof headers.get === 'function') {
    value = (headers as { get(name: string): string | null }).get(name);
  } else {
    const record = headers as Record<string, string | string[] | undefined>;
    const key = name in record ? name : Object.keys(record).find((k) => k.toLowerCase() === name);
    value = key === undefined ? undefined : record[key];
  }
  return Array.isArray(value) ? value.join(' ') : ((value as string | null | undefined) ?? undefined);
}

/**
 * One of the three Standard Webhooks headers: `webhook-<part>`, else Svix's `svix-<part>`, each on its own, as the
 * `svix` library reads them: a receiver moved from Svix, its tests signing with `svix` and sending `svix-id`,
 * `svix-timestamp` and `svix-signature`, or deliveries from Svix and svc to one endpoint during a move, verify
 * unchanged. svc sends the `webhook-*` names.
 */
export function standardHeader(headers: WebhookHeaders, part: 'id' | 'timestamp' | 'signature'): string | undefined {
  return header(headers, `webhook-${part}`) ?? header(headers, `svix-${part}`);
}

const SIGNATURE_LENGTH = 'v1,'.length + 44;

/** The Standard Webhooks headers of a delivery, or why they are unusable. */
export function readStandardHeaders(headers: unknown): StandardHeaders | 'missing_signature' | 'malformed_signature' {
  if (typeof headers !== 'object' || headers === null) {
    throw new TypeError('[@svc/verify] headers must be the request headers: a Fetch Headers object or node\'s req.headers.');
  }
  const id = standardHeader(headers as WebhookHeaders, 'id');
  const timestamp = standardHeader(headers as WebhookHeaders, 'timestamp');
  const signature = standardHeader(headers as WebhookHeaders, 'signature');
  if (!id || !timestamp || !signature) return 'missing_signature';
  if (!/^\d{1,12}$/.test(timestamp)) return 'malformed_signature';
  const signatures: Uint8Array[] = [];
  for (const entry of signature.split(' ')) {
    // A header sent twice arrives joined by ", " (node's req.headers, Fetch's Headers): "v1,<a>, v1,<b>". Both are
    // the sender's, as the standardwebhooks and svix libraries read them; the first kept its comma.
    const part = entry.endsWith(',') ? entry.slice(0, -1) : entry;
    // Only v1 (HMAC-SHA256, base64) of the right length; anything else is another scheme's, skipped.
    if (part.length !== SIGNATURE_LENGTH || !part.startsWith('v1,') || !BASE64.test(part.slice(3))) continue;
    signatures.push(Uint8Array.from(atob(part.slice(3)), (c) => c.charCodeAt(0)));
  }
  if (signatures.length === 0) return 'malformed_signature';
  return { id, timestamp: Number(timestamp), signatures };
}

export function assertWebhookOptions(options: VerifyWebhookOptions): { toleranceSeconds: number; nowSeconds: number } {
  const { toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, now = Date.now() } = options;
  if (!(Number.isFinite(toleranceSeconds) && toleranceSeconds >= 0)) {
    throw new TypeError('[@svc/verify] toleranceSeconds must be a non-negative number of seconds.');
  }
  const ms = now instanceof Date ? now.getTime() : now;
  if (!Number.isFinite(ms)) throw new TypeError('[@svc/verify] now must be a Date or epoch milliseconds.');
  return { toleranceSeconds, nowSeconds: Math.floor(ms / 1000) };
}

/** Whether a timestamp is within the tolerance of now: older ones are replays, newer ones forged or skewed. */
export function withinTolerance(timestamp: number, options: { toleranceSeconds: number; nowSeconds: number }): boolean {
  return Math.abs(options.nowSeconds - timestamp) <= options.toleranceSeconds;
}

/** Encodes a digest as `v1,<base64>`. */
export function formatV1(digest: Uint8Array): string {
  let binary = '';
  for (const byte of digest) binary += String.fromCharCode(byte);
  return `v1,${btoa(binary)}`;
}

/** A delivery ready for the HMAC check: the signed bytes, the signatures it carries and the secrets to try. */
export interface PreparedWebhook {
  content: Uint8Array;
  signatures: Uint8Array[];
}

/**
 * Reads the headers and checks the timestamp: the prepared delivery, or the error refusing it before any HMAC.
 * Misuse (a parsed body, no headers, bad options) throws TypeError.
 */
export function prepareWebhook(rawBody: RawBody, headers: unknown, options: VerifyWebhookOptions): PreparedWebhook | WebhookVerificationError {
  const window = assertWebhookOptions(options);
  const read = readStandardHeaders(headers);
  if (read === 'missing_signature') return missingSignature(headers as WebhookHeaders, X_SVC_SIGNATURE_ONLY);
  if (typeof read === 'string') return webhookError(read);
  if (!withinTolerance(read.timestamp, window)) return timestampOutOfRange(read.timestamp, window);
  return { content: signedContent(read.id, read.timestamp, rawBody), signatures: read.signatures };
}

/**
 * Says how far off and which way: the same offset on every delivery is this receiver's clock, not a replay.
 */
function timestampOutOfRange(timestamp: number, { toleranceSeconds, nowSeconds }: { toleranceSeconds: number; nowSeconds: number }): WebhookVerificationError {
  const offset = nowSeconds - timestamp;
  const how = offset > 0 ? `${offset} s behind` : `${-offset} s ahead of`;
  return new WebhookVerificationError(
    'timestamp_out_of_range',
    `webhook-timestamp ${timestamp} is ${how} this receiver's clock (tolerance ${toleranceSeconds} s): a replayed or delayed ` +
      'delivery, or a clock out of sync (when every delivery is off by about the same, sync this machine\'s clock with NTP).',
  );
}

const X_SVC_SIGNATURE_ONLY =
  'X-Svc-Signature alone carries no timestamp. Verify such a delivery with constructEvent (GitHub style), or, for one ' +
  'sent by `svc-cli replay`, pass it --secret so that it signs webhook-signature anew.';

/**
 * missing_signature naming the headers that are absent. With no signature header at all, the usual cause is a
 * key without a signing secret (svc then sends webhook-id and webhook-timestamp only), so the message says where
 * to set one; `xSvcSignatureOnly` explains a delivery carrying X-Svc-Signature alone.
 */
export function missingSignature(headers: WebhookHeaders, xSvcSignatureOnly: string): WebhookVerificationError {
  const missing = (['id', 'timestamp', 'signature'] as const).filter((part) => !standardHeader(headers, part)).map((part) => `webhook-${part}`);
  const names = missing.length === 1 ? missing[0] : `${missing.slice(0, -1).join(', ')} and ${missing.at(-1)}`;
  const what = `Missing ${names} header${missing.length === 1 ? '' : 's'}`;
  let message = `${what}.`;
  if (missing.includes('webhook-signature')) {
    message = header(headers, 'x-svc-signature')
      ? `${what}: ${xSvcSignatureOnly}`
      : `${what} (and X-Svc-Signature): svc signs a delivery only when its API key has a signing secret. Set one ` +
        '(dashboard Settings → API Keys → Signing secret, or `svc-server keys update KEY --signing-secret whsec_…`) ' +
        'and give this receiver the same secret.';
  }
  return new WebhookVerificationError('missing_signature', message);
}

const MESSAGES = {
  malformed_signature: 'Malformed Standard Webhooks headers: expected webhook-timestamp in unix seconds and webhook-signature "v1,<base64 HMAC-SHA256>".',
  signature_mismatch: 'webhook-signature does not match: wrong signing secret, or the body was changed (re-serialised JSON, a different encoding) before verification.',
} as const;

/** The verification error for a refused delivery; `note` is added to the message. */
export function webhookError(code: keyof typeof MESSAGES, note = ''): WebhookVerificationError {
  return new WebhookVerificationError(code, MESSAGES[code] + note);
}

/** Throws a TypeError unless `message` has a non-empty id and a timestamp in whole unix seconds. */
export function assertMessage(message: unknown): asserts message is { id: string; timestamp: number } {
  const m = message as { id?: unknown; timestamp?: unknown } | null;
  if (typeof m !== 'object' || m === null || typeof m.id !== 'string' || m.id === '' || !Number.isSafeInteger(m.timestamp) || (m.timestamp as number) < 0) {
    throw new TypeError('[@svc/verify] signWebhook() needs { id, timestamp }: the delivery id and unix seconds.');
  }
}
