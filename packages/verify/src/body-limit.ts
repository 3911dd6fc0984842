import { WebhookVerificationError } from './webhook-verification-error.js';

/**
 * The largest body the adapters accept by default: 64 MiB. A delivery's payload holds the request's prompt (up to
 * svc's 10 MiB request limit) and the answer (up to 32 MiB from the upstream), so a 10 MiB default refused real
 * deliveries of long prompts with 413 at every attempt until svc gave up on them.
 */
export const DEFAULT_LIMIT = 64 * 1024 * 1024;

/** Throws a TypeError unless `limit` is a positive whole number of bytes; `name` is the option's name in the message. */
export function assertLimit(limit: unknown, name = 'limit'): asserts limit is number {
  if (!(Number.isSafeInteger(limit) && (limit as number) > 0)) throw new TypeError(`[@svc/verify] ${name} must be a positive whole number of bytes.`);
}

/** The error a body over `limit` is answered with: 413, `payload_too_large`. */
export function payloadTooLarge(limit: number): WebhookVerificationError {
  return new WebhookVerificationError('payload_too_large', `Payload larger than ${limit} bytes.`);
}

/** True when a declared `content-length` is over `limit`: the body need not be read to refuse it. */
export function declaredOver(contentLength: string | null | undefined, limit: number): boolean {
  return Number(contentLength) > limit;
}
