import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox, generateSigningSecret } from '../../../src/crypto/secret-box.js';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));

  it('round-trips and never stores the plaintext', () => {
    const secret = generateSigningSecret();
    const sealed = box.seal(secret);
    expect(sealed).not.toContain(secret);
    expect(sealed).not.toContain(secret.slice(6, 20));
    expect(box.open(sealed)).toBe(secret);
    expect(box.seal(secret)).not.toBe(sealed);
  });

  it('refuses tampered or foreign ciphertexts', () => {
    const sealed = box.seal('whsec_abc');
    const parts = sealed.split('.');
    parts[3] = Buffer.from('whsec_abd').toString('base64url');
    expect(() => box.open(parts.join('.'))).toThrow();
    expect(() => new SecretBox(randomBytes(32)).open(sealed)).toThrow();
    expect(() => box.open('plain')).toThrow();
  });

  it('generates whsec_ secrets of 32 random bytes that read the same in base64 and base64url (no + or /), as the standardwebhooks and svix libraries decode them', () => {
    const secrets = Array.from({ length: 200 }, generateSigningSecret);
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9]{42}[AEIMQUYcgkosw048]=$/);
      const encoded = secret.slice('whsec_'.length);
      expect(Buffer.from(encoded, 'base64')).toHaveLength(32);
      expect(Buffer.from(encoded, 'base64url').equals(Buffer.from(encoded, 'base64'))).toBe(true);
    }
    expect(new Set(secrets).size).toBe(200);
  });
});
