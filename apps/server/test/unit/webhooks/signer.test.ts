import { createHmac } from 'node:crypto';
import * as crypto from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';

vi.mock('node:crypto', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:crypto')>();
  return { ...original, createSecretKey: vi.fn(original.createSecretKey) };
});

const { signBody } = await import('../../../src/webhooks/signer.js');

describe('signBody', () => {
  it("makes each secret's key once, and signs as a fresh HMAC keyed with the secret's UTF-8 does", () => {
    const made = vi.mocked(crypto.createSecretKey);
    made.mockClear();
    const body = Buffer.from('{"event":"llm.request.completed"}');
    for (const secret of ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'my own secret', 'clé ünïcode']) {
      for (let i = 0; i < 3; i++) {
        expect(signBody(body, secret)).toBe(`sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex')}`);
      }
    }
    expect(made).toHaveBeenCalledTimes(3);
  });
});
