import type { ApiKeyRecord, KeysStore } from '../storage/keys-store.js';
import { onceMoreIfConnectionLost } from '../storage/storage-fault.js';

/**
 * Key lookups by token hash, cached briefly. The TTL bounds how long another instance's revocation or
 * settings change can go unseen; this instance's own changes call `invalidate` and apply at once.
 */
export class KeyCache {
  private readonly entries = new Map<string, { key: ApiKeyRecord | undefined; expires: number }>();
  /** Moved on by every `invalidate` and `clear`: a lookup read before one must not be cached after it. */
  private generation = 0;

  constructor(
    private readonly keys: KeysStore,
    private readonly clock: () => number,
    private readonly ttlMs = 1000,
    private readonly maxEntries = 10_000,
  ) {}

  async byHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const hit = this.entries.get(hash);
    if (hit && hit.expires > this.clock()) return hit.key;
    return this.load(hash);
  }

  /**
   * The cached answer without a promise when there is a fresh one (the hot path: a busy key is looked up
   * from the database once a TTL), else `null` — then call `byHash`.
   */
  cached(hash: string): { key: ApiKeyRecord | undefined } | null {
    const hit = this.entries.get(hash);
    return hit && hit.expires > this.clock() ? hit : null;
  }

  private async load(hash: string): Promise<ApiKeyRecord | undefined> {
    const now = this.clock();
    const generation = this.generation;
    // Every API request that misses the cache waits on this read: a lost connection is one more try, as the
    // outbox insert's, not a 503 for a database that is well.
    const key = await onceMoreIfConnectionLost(() => this.keys.byHash(hash));
    // A change made here while the lookup was under way: its answer may predate the change (a revoked key read
    // as live), and caching it would undo the invalidation for a TTL.
    if (generation !== this.generation) return key;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(hash, { key, expires: now + this.ttlMs });
    return key;
  }

  /** Forget a key (by id) after it changed here. */
  invalidate(keyId: string): void {
    this.generation += 1;
    for (const [hash, entry] of this.entries) if (entry.key?.id === keyId) this.entries.delete(hash);
  }

  clear(): void {
    this.generation += 1;
    this.entries.clear();
  }
}
