import { createHmac } from 'node:crypto';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { builds, samplePayload } from '../test/support.js';

const SECRET = 'whsec_realm';
const BODY = JSON.stringify({ ...samplePayload, response_text: 'Café – oui 👍' });
const header = `sha256=${createHmac('sha256', SECRET).update(BODY).digest('hex')}`;

// Bytes made in another realm, as Jest hands a test Node's Buffer (jest#4422) and a vm context, a worker or an
// iframe hand over theirs: `instanceof Uint8Array` is false for them in this realm.
const foreign = runInNewContext('({ Uint8Array, Uint16Array })') as { Uint8Array: Uint8ArrayConstructor; Uint16Array: Uint16ArrayConstructor };
const utf8 = Buffer.from(BODY, 'utf8');
const foreignBytes = () => new foreign.Uint8Array(utf8);
const foreignArrayBuffer = () => new foreign.Uint8Array(utf8).buffer;
// A view into the middle of a larger foreign buffer, as Buffer's pool hands out.
const foreignView = () => {
  const whole = new foreign.Uint8Array(utf8.length + 16);
  whole.set(utf8, 8);
  return whole.subarray(8, 8 + utf8.length);
};

describe('bodies made in another realm (Jest, vm contexts, workers)', () => {
  it('are what they claim to be there, and not here', () => {
    expect(foreignBytes() instanceof Uint8Array).toBe(false);
    expect(foreignArrayBuffer() instanceof ArrayBuffer).toBe(false);
  });

  describe.each(builds)('$name build', (build) => {
    it.each([
      ['a Uint8Array', foreignBytes],
      ['an ArrayBuffer', foreignArrayBuffer],
      ['a view into a larger buffer', foreignView],
    ])('verifies %s from another realm (was a TypeError "got object")', async (_, body) => {
      expect(await build.sign(body(), SECRET)).toBe(header);
      expect(await build.verifySignature(body(), header, SECRET)).toBe(true);
      expect(await build.verifySignature(body(), header, 'whsec_other')).toBe(false);
      expect(await build.constructEvent(body(), header, SECRET)).toEqual(JSON.parse(BODY));

      const message = { id: 'whd_realm', timestamp: Math.floor(Date.now() / 1000) };
      const headers = { 'webhook-id': message.id, 'webhook-timestamp': String(message.timestamp), 'webhook-signature': await build.signWebhook(BODY, message, SECRET) };
      expect(await build.signWebhook(body(), message, SECRET)).toBe(headers['webhook-signature']);
      expect(await build.verifyWebhook(body(), headers, SECRET)).toBe(true);
      expect(await build.constructWebhookEvent(body(), headers, SECRET)).toEqual(JSON.parse(BODY));
    });

    it('still refuses a parsed body, and other typed arrays, from another realm', async () => {
      const parsed = runInNewContext(`(${BODY})`) as unknown;
      // @ts-expect-error a parsed body is misuse
      await expect(async () => build.verifySignature(parsed, header, SECRET)).rejects.toThrow(TypeError);
      // @ts-expect-error a Uint16Array is not a body's bytes
      await expect(async () => build.verifySignature(new foreign.Uint16Array(4), header, SECRET)).rejects.toThrow(TypeError);
      // Its tag says ArrayBuffer, but it holds no bytes: taken for one, it was hashed as an empty body.
      const lookAlike = { [Symbol.toStringTag]: 'ArrayBuffer', byteLength: utf8.length };
      // @ts-expect-error an object that only claims to be an ArrayBuffer is misuse
      await expect(async () => build.verifySignature(lookAlike, header, SECRET)).rejects.toThrow(TypeError);
      // @ts-expect-error likewise for sign
      await expect(async () => build.sign(lookAlike, SECRET)).rejects.toThrow(TypeError);
    });
  });
});
