import { SecretKeyMismatchError, type SecretBox } from '../crypto/secret-box.js';
import type { ApiKeyPatch, ApiKeyRecord } from '../storage/keys-store.js';

/** A patch that drops the rotated-out secret. */
export const NO_PREVIOUS_SECRET = { previous_signing_secret_enc: null, previous_signing_secret_last4: null, previous_signing_secret_expires_at: null };

/**
 * Rotation: the secret being replaced keeps signing beside the new one for the key's overlap (or
 * `defaultOverlapMs`, SVC_WEBHOOK_SECRET_OVERLAP), so receivers can switch to the new secret without losing a
 * delivery. A first secret, or an overlap of 0, leaves nothing behind. The secret moved aside is sealed again
 * under `box`'s current key when a previous SVC_SECRET_KEY sealed it: `key` may have been read before
 * `svc-server secrets rotate` resealed it, and copied as read it would be left under a key about to be retired.
 */
export function rotatedOut(key: ApiKeyRecord, now: number, defaultOverlapMs: number, box: SecretBox): ApiKeyPatch {
  const overlapMs = key.signing_secret_overlap_seconds === null ? defaultOverlapMs : key.signing_secret_overlap_seconds * 1000;
  if (key.signing_secret_enc === null || overlapMs <= 0) return NO_PREVIOUS_SECRET;
  return {
    previous_signing_secret_enc: resealedOrAsIs(box, key.signing_secret_enc),
    previous_signing_secret_last4: key.signing_secret_last4,
    previous_signing_secret_expires_at: now + overlapMs,
  };
}

/** `sealed` under the box's current key; as it is when it already is, or when no key of the box opens it. */
function resealedOrAsIs(box: SecretBox, sealed: string): string {
  try {
    return box.reseal(sealed) ?? sealed;
  } catch (err) {
    // Unreadable here: an instance with the key that sealed it can still sign with it, so it is kept.
    if (err instanceof SecretKeyMismatchError) return sealed;
    throw err;
  }
}
