import { createSecretKey } from 'node:crypto';
import { keyCache } from '../key-cache.js';
import { webhookKey } from '../standard-webhooks.js';

/** The `webhook-signature` HMAC key for a secret as a KeyObject, made once. */
export const webhookHmacKey = /* @__PURE__ */ keyCache((secret) => createSecretKey(webhookKey(secret)));
