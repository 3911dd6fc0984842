// The secret a new one replaces is moved aside under the current SVC_SECRET_KEY: a dashboard or `keys update`
// that read the key before `svc-server secrets rotate` resealed it would otherwise copy it as read, under the key
// being retired, and once that key left SVC_SECRET_KEY_PREVIOUS its overlap signatures would fail.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { rotatedOut } from '../../../src/auth/secret-rotation.js';
import { generateSigningSecret, SecretBox } from '../../../src/crypto/secret-box.js';
import type { ApiKeyRecord } from '../../../src/storage/keys-store.js';

const oldKey = randomBytes(32);
const newKey = randomBytes(32);
const DAY = 86_400_000;

function keyWith(sealed: string, last4: string): ApiKeyRecord {
  return { signing_secret_enc: sealed, signing_secret_last4: last4, signing_secret_overlap_seconds: null } as ApiKeyRecord;
}

describe('rotatedOut', () => {
  it('reseals a secret read under a previous key with the current one', () => {
    const secret = generateSigningSecret();
    const patch = rotatedOut(keyWith(new SecretBox(oldKey).seal(secret), secret.slice(-4)), 1_000, DAY, new SecretBox(newKey, [oldKey]));
    // Opens with the new key alone: nothing is left for the old key to open.
    expect(new SecretBox(newKey).open(patch.previous_signing_secret_enc!)).toBe(secret);
    expect(patch.previous_signing_secret_last4).toBe(secret.slice(-4));
    expect(patch.previous_signing_secret_expires_at).toBe(1_000 + DAY);
  });

  it('keeps a secret already under the current key as stored', () => {
    const sealed = new SecretBox(newKey).seal(generateSigningSecret());
    expect(rotatedOut(keyWith(sealed, 'abcd'), 0, DAY, new SecretBox(newKey, [oldKey])).previous_signing_secret_enc).toBe(sealed);
  });

  it('keeps a secret no key of this instance opens (another instance may still sign with it)', () => {
    const sealed = new SecretBox(randomBytes(32)).seal(generateSigningSecret());
    expect(rotatedOut(keyWith(sealed, 'abcd'), 0, DAY, new SecretBox(newKey, [oldKey])).previous_signing_secret_enc).toBe(sealed);
  });
});
