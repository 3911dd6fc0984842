import { keyCache } from '../key-cache.js';
import { webhookKey } from '../standard-webhooks.js';

/** The `webhook-signature` HMAC-SHA256 CryptoKey for a secret, imported once. */
export const webhookHmacKey = /* @__PURE__ */ keyCache((secret) =>
  crypto.subtle.importKey('raw', webhookKey(secret) as Uint8Array<ArrayBuffer>, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']),
);
