import { createSecretKey } from 'node:crypto';
import { keyCache } from '../key-cache.js';

/** The HMAC key for a secret (its UTF-8 bytes) as a KeyObject, made once: ~10 % faster per HMAC than a string key. */
export const hmacKey = /* @__PURE__ */ keyCache((secret) => createSecretKey(Buffer.from(secret, 'utf8')));
