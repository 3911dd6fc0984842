import { describe, expect, it } from 'vitest';
import { VECTORS, bodyOf } from '../test/support.js';
import * as node from './index.js';
import * as web from './web.js';

describe('the Web Crypto build equals the Node build', () => {
  it.each(VECTORS)('on vector "$name": signature, verification, and verification of near misses', async (v) => {
    const body = bodyOf(v);
    expect(await web.sign(body, v.secret)).toBe(node.sign(body, v.secret));
    const flipped = `${v.signature.slice(0, -1)}${v.signature.endsWith('0') ? '1' : '0'}`;
    for (const header of [v.signature, flipped, v.signature.toUpperCase(), '', `${v.signature},${v.signature}`]) {
      for (const secret of [v.secret, `${v.secret}x`, [`${v.secret}x`, v.secret]]) {
        expect(await web.verifySignature(body, header, secret)).toBe(node.verifySignature(body, header, secret));
      }
    }
  });

  it('exports the same names', () => {
    expect(Object.keys(web).sort()).toEqual(Object.keys(node).sort());
  });
});
