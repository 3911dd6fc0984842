import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../../src/auth/api-keys.js';
import { KeyCache } from '../../../src/auth/key-cache.js';
import type { KeysStore } from '../../../src/storage/keys-store.js';
import { openStore, type Store } from '../../../src/storage/store.js';

describe('KeyCache', () => {
  let dir: string;
  let store: Store;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-key-cache-'));
    store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a lookup read before a revocation made here is not cached after it: the key is refused at once', async () => {
    const user = await store.users.create({ email: 'a@example.com', passwordHash: 'x', now: 1 });
    const { hash, prefix } = generateApiKey();
    const key = await store.keys.create({ userId: user.id, name: 'k', prefix, keyHash: hash, now: 1 });
    // The database answered before the revocation; the answer reaches the cache after it (as a Postgres
    // connection's reply can, while another connection commits the revocation).
    let deliver!: () => void;
    const answered = new Promise<void>((resolve) => (deliver = resolve));
    const lagging: Pick<KeysStore, 'byHash'> = {
      byHash: async (h) => {
        const row = await store.keys.byHash(h);
        await answered;
        return row;
      },
    };
    const cache = new KeyCache(lagging as KeysStore, () => 1000);
    const lookup = cache.byHash(hash);
    await store.keys.revoke(key.id, 2);
    cache.invalidate(key.id);
    deliver();
    expect((await lookup)?.revoked_at).toBeNull();
    expect(cache.cached(hash)).toBeNull();
    expect((await cache.byHash(hash))?.revoked_at).toBe(2);
  });
});
