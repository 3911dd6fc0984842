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

const API_KEY_PREFIX = 'sk-svc-';

/**
 * What a signature mismatch adds when a secret has the shape of a known mistake, each of which makes it another HMAC
 * key than the one svc signs with: whitespace at its start or end (a pasted newline, a CRLF env file, a secret
 * file's last line break), quotes around it (`docker run --env-file` keeps those of `SECRET="whsec_…"`), or the API
 * key (`sk-svc-…`, the other secret a receiver's environment holds).
 */
export function secretNote(secrets: readonly string[]): string {
  if (secrets.some((s) => s.trim() !== s)) {
    return ' The signing secret starts or ends with whitespace (a pasted newline, a CRLF .env file, a secret file ending in a line break?): secrets svc generates have none; trim it.';
  }
  if (secrets.some((s) => /^(["'`]).+\1$/s.test(s))) {
    return ' The signing secret is wrapped in quotes, which are then part of it (docker run --env-file keeps those of SECRET="whsec_…"): secrets svc generates have none; remove them.';
  }
  if (secrets.some((s) => s.startsWith(API_KEY_PREFIX))) {
    return ` The signing secret given is an svc API key (${API_KEY_PREFIX}…), not the key's signing secret: use the whsec_… secret from Settings → API Keys → Signing secret.`;
  }
  return '';
}

/** Throws a TypeError unless `secret` is one non-empty string (signing uses exactly one secret). */
export function assertSigningSecret(secret: unknown): asserts secret is string {
  if (!isSecret(secret)) throw new TypeError(`[@svc/verify] sign() needs one non-empty secret string: ${WHAT_A_SECRET_IS}`);
}
