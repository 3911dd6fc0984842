// Spelled this way so the package needs neither the DOM lib nor node:crypto's types.
type CryptoKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

const MAX_CACHED_KEYS = 64;
const keys = new Map<string, Promise<CryptoKey>>();
const encoder = new TextEncoder();

/**
 * The HMAC-SHA256 CryptoKey for a secret, imported once: importKey is the slow part of a Web Crypto
 * HMAC. Bounded so a receiver juggling many tenants' secrets cannot grow it without limit.
 */
export function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (key === undefined) {
    if (keys.size >= MAX_CACHED_KEYS) keys.delete(keys.keys().next().value as string);
    key = crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    keys.set(secret, key);
  }
  return key;
}
