/** One signing secret, or several while rotating (the new one and the one being retired). */
export type Secret = string | readonly string[];

const WHAT_A_SECRET_IS =
  'the signing secret shown once in the svc dashboard under Settings → API Keys, e.g. process.env.SVC_WEBHOOK_SECRET. ' +
  'An empty secret usually means the environment variable is not set.';

const isSecret = (s: unknown): s is string => typeof s === 'string' && s !== '';

/** The secrets to try, in order; throws a TypeError for a missing or empty secret. */
export function toSecretList(secret: unknown): readonly string[] {
  if (isSecret(secret)) return [secret];
  if (Array.isArray(secret) && secret.length > 0 && secret.every(isSecret)) return secret;
  throw new TypeError(`[@svc/verify] secret must be a non-empty string or a non-empty array of them: ${WHAT_A_SECRET_IS}`);
}

/**
 * What a signature mismatch adds when a secret starts or ends with whitespace: almost always a newline pasted with
 * it, a CRLF env file or a secret file's last line break, which then is part of the HMAC key.
 */
export function secretWhitespaceNote(secrets: readonly string[]): string {
  return secrets.some((s) => s.trim() !== s)
    ? ' The signing secret starts or ends with whitespace (a pasted newline, a CRLF .env file, a secret file ending in a line break?): secrets svc generates have none; trim it.'
    : '';
}

/** Throws a TypeError unless `secret` is one non-empty string (signing uses exactly one secret). */
export function assertSigningSecret(secret: unknown): asserts secret is string {
  if (!isSecret(secret)) throw new TypeError(`[@svc/verify] sign() needs one non-empty secret string: ${WHAT_A_SECRET_IS}`);
}
