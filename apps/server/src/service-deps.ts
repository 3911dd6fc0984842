import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Store } from './storage/store.js';
import type { SecretBox } from './crypto/secret-box.js';
import type { KeyCache } from './auth/key-cache.js';

/** What the feature modules built in server.ts (webhooks, dashboard) share. */
export interface ServiceDeps {
  config: Config;
  store: Store;
  logger: Logger;
  clock: () => number;
  secretBox: SecretBox;
  /** Invalidated when a key changes on this instance. */
  keyCache: KeyCache;
}
