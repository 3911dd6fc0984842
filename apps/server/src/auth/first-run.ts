import { randomBytes } from 'node:crypto';
import type { Store } from '../storage/store.js';
import { generateApiKey } from './api-keys.js';
import { hashPassword } from './passwords.js';

export interface FirstRunCredentials {
  email: string;
  password: string;
  apiKey: string;
}

export const LOCAL_USER_EMAIL = 'admin@localhost';

/**
 * On an empty embedded database: a local user and an API key, returned once so they can be printed once.
 * Nothing is created (and undefined returned) when any user exists.
 */
export async function bootstrapFirstRun(store: Store, clock: () => number): Promise<FirstRunCredentials | undefined> {
  if ((await store.users.count()) > 0) return undefined;
  const password = randomBytes(12).toString('base64url');
  const now = clock();
  const user = await store.users.create({ email: LOCAL_USER_EMAIL, passwordHash: await hashPassword(password), now });
  const key = generateApiKey();
  await store.keys.create({ userId: user.id, name: 'default', prefix: key.prefix, keyHash: key.hash, now });
  return { email: user.email, password, apiKey: key.token };
}
