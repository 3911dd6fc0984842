import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../../../src/auth/api-keys.js';

describe('hashApiKey', () => {
  it('is the hex SHA-256 of the UTF-8 token, as stored by every earlier version', () => {
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    for (const token of [generateApiKey().token, 'sk-svc-ünïcødé-🔑', '']) {
      expect(hashApiKey(token)).toBe(createHash('sha256').update(token, 'utf8').digest('hex'));
    }
  });
});
