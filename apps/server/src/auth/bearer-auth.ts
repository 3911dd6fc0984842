import { ApiError } from '../http/errors.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import { hashApiKey } from './api-keys.js';
import type { KeyCache } from './key-cache.js';

const LAST_USED_RESOLUTION_MS = 60_000;
const BEARER = /^Bearer\s+(\S+)\s*$/i;

export interface AuthDeps {
  keyCache: KeyCache;
  clock: () => number;
  touchLastUsed: (keyId: string, at: number) => Promise<void>;
}

/** Resolves an `Authorization` header to a live key; a promise only when the key is not cached. */
export type Authenticate = (header: string | undefined) => ApiKeyRecord | Promise<ApiKeyRecord>;

/**
 * `Authorization: Bearer <key>` → the key. The token is hashed and looked up by hash, so no comparison
 * ever touches the secret. Missing → 401 missing_api_key; unknown or revoked → 401 invalid_api_key (a revoked key's message says
 * it was revoked, and when).
 * A cached key is answered synchronously (no promise on the hot path).
 *
 * @example
 * const authenticate = createAuthenticator({ keyCache, clock, touchLastUsed });
 * const key = await authenticate(req.headers.authorization);
 */
export function createAuthenticator(deps: AuthDeps): Authenticate {
  const lastTouched = new Map<string, number>();
  const accept = (key: ApiKeyRecord | undefined): ApiKeyRecord => {
    if (!key) {
      throw new ApiError('invalid_api_key', 'Incorrect API key provided. Create or look up your keys in the dashboard (Settings → API Keys).');
    }
    if (key.revoked_at !== null) {
      // Only the key's holder reads this, and only with the key itself: telling "revoked" from "wrong" tells them
      // to replace the key rather than hunt for a typo, and gives away nothing they did not hold.
      throw new ApiError(
        'invalid_api_key',
        `This API key (${key.prefix}) was revoked on ${new Date(key.revoked_at).toISOString()}. Create a new key in the dashboard (Settings → API Keys) or with 'svc-server keys create'.`,
      );
    }
    const now = deps.clock();
    if ((lastTouched.get(key.id) ?? 0) + LAST_USED_RESOLUTION_MS <= now) {
      lastTouched.set(key.id, now);
      // Best effort: "last used" is informational and must not slow or fail the request.
      deps.touchLastUsed(key.id, now).catch(() => lastTouched.delete(key.id));
    }
    return key;
  };
  return (header) => {
    if (!header || !header.trim()) {
      throw new ApiError(
        'missing_api_key',
        "You didn't provide an API key. Send it in the Authorization header as 'Bearer sk-svc-…'.",
      );
    }
    const token = BEARER.exec(header)?.[1];
    if (!token) return accept(undefined);
    const hash = hashApiKey(token);
    const hit = deps.keyCache.cached(hash);
    return hit ? accept(hit.key) : deps.keyCache.byHash(hash).then(accept);
  };
}
