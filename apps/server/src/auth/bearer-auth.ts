import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../http/errors.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import { hashApiKey } from './api-keys.js';
import type { KeyCache } from './key-cache.js';

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * `Authorization: Bearer <key>` → `res.locals.apiKey`. The token is hashed and looked up by hash, so no
 * comparison ever touches the secret. Missing → 401 missing_api_key; unknown or revoked → 401 invalid_api_key.
 */
export function bearerAuth(deps: {
  keyCache: KeyCache;
  clock: () => number;
  touchLastUsed: (keyId: string, at: number) => Promise<void>;
}) {
  const lastTouched = new Map<string, number>();
  return async (req: Request, res: Response, next: NextFunction) => {
    const header = req.headers.authorization;
    if (!header || !header.trim()) {
      throw new ApiError(
        'missing_api_key',
        "You didn't provide an API key. Send it in the Authorization header as 'Bearer sk-svc-…'.",
      );
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const token = match?.[1];
    const key = token ? await deps.keyCache.byHash(hashApiKey(token)) : undefined;
    if (!key || key.revoked_at !== null) {
      throw new ApiError('invalid_api_key', 'Incorrect API key provided. Create or look up your keys in the dashboard (Settings → API Keys).');
    }
    res.locals.apiKey = key;
    const now = deps.clock();
    if ((lastTouched.get(key.id) ?? 0) + LAST_USED_RESOLUTION_MS <= now) {
      lastTouched.set(key.id, now);
      // Best effort: "last used" is informational and must not slow or fail the request.
      deps.touchLastUsed(key.id, now).catch(() => lastTouched.delete(key.id));
    }
    next();
  };
}

export function apiKeyOf(res: Response): ApiKeyRecord {
  const key = res.locals.apiKey as ApiKeyRecord | undefined;
  if (!key) throw new ApiError('internal_error', 'The server could not process the request.');
  return key;
}
