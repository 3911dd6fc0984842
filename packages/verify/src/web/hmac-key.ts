import { keyCache } from '../key-cache.js';

const encoder = new TextEncoder();

/** The HMAC-SHA256 CryptoKey for a secret (its UTF-8 bytes), imported once. */
export const hmacKey = /* @__PURE__ */ keyCache((secret) =>
  crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']),
);
