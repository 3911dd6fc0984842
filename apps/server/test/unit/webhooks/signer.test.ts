import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signBody } from '../../../src/webhooks/signer.js';

describe('signBody', () => {
  it("signs as an HMAC-SHA256 keyed with the secret's UTF-8 bytes, over the exact body", () => {
    const body = Buffer.from('{"event":"llm.request.completed"}');
    for (const secret of ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'my own secret', 'clé ünïcode']) {
      expect(signBody(body, secret)).toBe(`sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex')}`);
      expect(signBody(body.toString('utf8'), secret)).toBe(signBody(body, secret));
    }
  });
});
