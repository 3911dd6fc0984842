import type { ApiKeyPatch, ApiKeyRecord } from '../storage/keys-store.js';

/** A patch that drops the rotated-out secret. */
export const NO_PREVIOUS_SECRET = { previous_signing_secret_enc: null, previous_signing_secret_last4: null, previous_signing_secret_expires_at: null };

/**
 * Rotation: the secret being replaced keeps signing beside the new one for the key's overlap (or
 * `defaultOverlapMs`, SVC_WEBHOOK_SECRET_OVERLAP), so receivers can switch to the new secret without losing a
 * delivery. A first secret, or an overlap of 0, leaves nothing behind.
 */
export function rotatedOut(key: ApiKeyRecord, now: number, defaultOverlapMs: number): ApiKeyPatch {
  const overlapMs = key.signing_secret_overlap_seconds === null ? defaultOverlapMs : key.signing_secret_overlap_seconds * 1000;
  if (key.signing_secret_enc === null || overlapMs <= 0) return NO_PREVIOUS_SECRET;
  return {
    previous_signing_secret_enc: key.signing_secret_enc,
    previous_signing_secret_last4: key.signing_secret_last4,
    previous_signing_secret_expires_at: now + overlapMs,
  };
}
