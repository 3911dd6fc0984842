import { hash, randomBytes } from 'node:crypto';

export const API_KEY_PREFIX = 'sk-svc-';

/** A new API key: the token (shown once), its SHA-256 (stored) and a display prefix (stored). */
export function generateApiKey(): { token: string; hash: string; prefix: string } {
  const token = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { token, hash: hashApiKey(token), prefix: displayPrefix(token) };
}

/** Keys are looked up by this hash, so a lookup never compares the secret itself and timing leaks nothing. */
export function hashApiKey(token: string): string {
  // One-shot `crypto.hash` (Node ≥ 20.12): same digest without a Hash object per request.
  return hash('sha256', token, 'hex');
}

export function displayPrefix(token: string): string {
  return `${token.slice(0, API_KEY_PREFIX.length + 4)}…${token.slice(-4)}`;
}
