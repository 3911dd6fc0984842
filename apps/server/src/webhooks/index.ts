import express, { type Router } from 'express';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Store } from '../storage/store.js';
import type { SecretBox } from '../crypto/secret-box.js';
import type { KeyCache } from '../auth/key-cache.js';
import type { AuditSink } from '../chat/audit.js';

export interface WebhooksDeps {
  config: Config;
  store: Store;
  logger: Logger;
  clock: () => number;
  secretBox: SecretBox;
  keyCache: KeyCache;
}

export interface Webhooks {
  audit: AuditSink;
  router: Router;
  start(): void;
  stop(): Promise<void>;
}

/** Placeholder wiring (replaced by the outbox + worker in the next commit). */
export function createWebhooks(_deps: WebhooksDeps): Webhooks {
  return {
    audit: { record: async () => {} },
    router: express.Router(),
    start() {},
    async stop() {},
  };
}

/** Checks a webhook URL when it is set (http/https, no credentials, ≤ 2048 characters); returns it normalised. */
export async function validateWebhookUrl(url: string, _options: { allowPrivate: boolean }): Promise<string> {
  const { ApiError } = await import('../http/errors.js');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ApiError('invalid_value', 'The webhook URL is not a valid URL.', { param: 'webhook_url' });
  }
  if (url.length > 2048 || !/^https?:$/.test(parsed.protocol) || parsed.username || parsed.password) {
    throw new ApiError('invalid_value', 'The webhook URL must be an http(s) URL without credentials, at most 2048 characters.', { param: 'webhook_url' });
  }
  return parsed.href;
}
