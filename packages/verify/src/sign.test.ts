import { sign as octokitSign, verify as octokitVerify } from '@octokit/webhooks-methods';
import { describe, expect, it } from 'vitest';
import { VECTORS, bodyOf, builds } from '../test/support.js';
import * as node from './index.js';
import * as web from './web.js';

describe.each(builds)('sign ($name build)', ({ sign, verifySignature }) => {
  it.each(VECTORS)('reproduces the known-answer vector "$name"', async (v) => {
    expect(await sign(bodyOf(v), v.secret)).toBe(v.signature);
  });

  it('signs every body type carrying the same bytes alike', async () => {
    const bytes = Buffer.from('{"a":"é"}', 'utf8');
    const expected = await sign('{"a":"é"}', 'whsec_x');
    expect(await sign(bytes, 'whsec_x')).toBe(expected);
    expect(await sign(new Uint8Array(bytes).buffer, 'whsec_x')).toBe(expected);
    expect(expected).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it('round-trips with verifySignature', async () => {
    expect(await verifySignature('body', await sign('body', 'whsec_x'), 'whsec_x')).toBe(true);
  });

  it('throws a TypeError for misuse', async () => {
    // @ts-expect-error -- a parsed object is not a body.
    await expect(async () => sign({ a: 1 }, 'whsec_x')).rejects.toThrow(/raw request body/);
    await expect(async () => sign('body', '')).rejects.toThrow(/sign\(\) needs one non-empty secret string/);
    // @ts-expect-error -- signing uses one secret, not a rotation list.
    await expect(async () => sign('body', ['a', 'b'])).rejects.toThrow(TypeError);
  });
});

describe('the node build is synchronous', () => {
  it('returns values, not promises, and throws misuse synchronously', () => {
    expect(node.sign('body', 'whsec_x')).toMatch(/^sha256=/);
    expect(node.verifySignature('body', node.sign('body', 'whsec_x'), 'whsec_x')).toBe(true);
    // @ts-expect-error -- a parsed object is not a body.
    expect(() => node.verifySignature({}, 'sha256=', 'whsec_x')).toThrow(TypeError);
  });
});

describe('the web build caches imported keys', () => {
  it('gives the same answers for more secrets than the cache holds, reused or not', async () => {
    const secrets = Array.from({ length: 100 }, (_, i) => `whsec_${i}`);
    for (const round of [1, 2]) {
      for (const secret of secrets) {
        expect(await web.sign(`round ${round}`, secret), secret).toBe(node.sign(`round ${round}`, secret));
      }
    }
  });
});

// GitHub's X-Hub-Signature-256 is the same scheme, so its reference library must agree both ways.
describe('compatibility with @octokit/webhooks-methods', () => {
  const textVectors = VECTORS.filter((v) => Buffer.from(bodyOf(v).toString('utf8'), 'utf8').equals(bodyOf(v)) && v.body_base64 !== '');

  it.each(textVectors)('octokit verifies our signature and we verify octokit\'s for "$name"', async (v) => {
    const text = bodyOf(v).toString('utf8');
    expect(await octokitVerify(v.secret, text, node.sign(text, v.secret))).toBe(true);
    expect(await octokitVerify(v.secret, text, await web.sign(text, v.secret))).toBe(true);
    const theirs = await octokitSign(v.secret, text);
    expect(theirs).toBe(v.signature);
    expect(node.verifySignature(text, theirs, v.secret)).toBe(true);
    expect(await web.verifySignature(text, theirs, v.secret)).toBe(true);
  });

  it('both reject a tampered body', async () => {
    const theirs = await octokitSign('whsec_x', '{"a":1}');
    expect(node.verifySignature('{"a":2}', theirs, 'whsec_x')).toBe(false);
    expect(await octokitVerify('whsec_x', '{"a":2}', node.sign('{"a":1}', 'whsec_x'))).toBe(false);
  });
});
