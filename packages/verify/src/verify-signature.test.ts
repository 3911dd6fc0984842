import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { VECTORS, bodyOf, builds } from '../test/support.js';

const SECRET = 'whsec_test';
const BODY = '{"event":"llm.request.completed"}';
const good = `sha256=${createHmac('sha256', SECRET).update(BODY).digest('hex')}`;
const hex = good.slice('sha256='.length);

const malformedHeaders: Array<[string, string | null | undefined]> = [
  ['missing (undefined)', undefined],
  ['missing (null)', null],
  ['empty', ''],
  ['prefix only', 'sha256='],
  ['no prefix', hex],
  ['wrong algorithm prefix', `sha1=${hex}`],
  ['upper-case prefix', `SHA256=${hex}`],
  ['colon instead of equals', `sha256:${hex}`],
  ['one hex character short', good.slice(0, -1)],
  ['one hex character long', `${good}0`],
  ['twice the digest', `${good}${hex}`],
  ['non-hex character', `${good.slice(0, -1)}g`],
  ['non-hex character in the first nibble', `sha256=z${hex.slice(1)}`],
  ['upper-case hex', `sha256=${hex.toUpperCase()}`],
  ['one upper-case hex digit', `sha256=${hex.replace(/[a-f]/, (c) => c.toUpperCase())}`],
  ['leading space', ` ${good}`],
  ['trailing space', `${good} `],
  ['trailing newline', `${good}\n`],
  ['space after the prefix', `sha256= ${hex.slice(1)}`],
  ['two comma-separated values (duplicated header)', `${good}, ${good}`],
  ['two values without space', `${good},${good}`],
  ['GitHub-style sha1 and sha256 together', `sha1=${'0'.repeat(40)},${good}`],
];

describe.each(builds)('verifySignature ($name build)', ({ verifySignature }) => {
  it.each(VECTORS)('accepts the known-answer vector "$name"', async (v) => {
    expect(await verifySignature(bodyOf(v), v.signature, v.secret)).toBe(true);
  });

  it.each(VECTORS)('rejects "$name" with one body bit flipped', async (v) => {
    const body = Buffer.concat([bodyOf(v), Buffer.from([0])]);
    body[0] = (body[0] ?? 0) ^ 1;
    expect(await verifySignature(body, v.signature, v.secret)).toBe(false);
  });

  it.each(malformedHeaders)('returns false, not throws, for a %s header', async (_, header) => {
    expect(await verifySignature(BODY, header, SECRET)).toBe(false);
  });

  it('returns false for a header that is not a string at runtime (e.g. a header array)', async () => {
    // @ts-expect-error -- node's IncomingHttpHeaders can hold string[]; the type forbids it, runtime still copes.
    expect(await verifySignature(BODY, [good, good], SECRET)).toBe(false);
  });

  it('returns false for a wrong secret and for a signature of other bytes', async () => {
    expect(await verifySignature(BODY, good, 'whsec_other')).toBe(false);
    expect(await verifySignature(`${BODY} `, good, SECRET)).toBe(false);
    expect(await verifySignature(JSON.stringify(JSON.parse(BODY), null, 2), good, SECRET)).toBe(false);
  });

  it('accepts every body type carrying the same bytes', async () => {
    const bytes = Buffer.from(BODY, 'utf8');
    const arrayBuffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    // A view into a larger buffer: only the viewed bytes are signed.
    const padded = Buffer.from(`xx${BODY}yy`, 'utf8').subarray(2, 2 + bytes.length);
    for (const body of [BODY, bytes, new Uint8Array(bytes), arrayBuffer, padded]) {
      expect(await verifySignature(body, good, SECRET)).toBe(true);
    }
  });

  it('hashes strings as UTF-8', async () => {
    const text = '{"prompt":"Ça va? 中文 🚀"}';
    const header = `sha256=${createHmac('sha256', SECRET).update(Buffer.from(text, 'utf8')).digest('hex')}`;
    expect(await verifySignature(text, header, SECRET)).toBe(true);
    expect(await verifySignature(Buffer.from(text, 'latin1'), header, SECRET)).toBe(false);
  });

  it('tries every secret while rotating, in any order', async () => {
    expect(await verifySignature(BODY, good, [SECRET, 'whsec_new'])).toBe(true);
    expect(await verifySignature(BODY, good, ['whsec_new', SECRET])).toBe(true);
    expect(await verifySignature(BODY, good, ['whsec_new', 'whsec_newer'])).toBe(false);
  });

  describe('misuse throws a TypeError that says how to get the raw body', () => {
    it.each([
      ['a parsed JSON object', JSON.parse(BODY)],
      ['an array', [1, 2]],
      ['undefined (no body parser ran)', undefined],
      ['null', null],
      ['a number', 42],
    ])('%s as the body', async (_, body: unknown) => {
      const call = async () => verifySignature(body as string, good, SECRET);
      await expect(call).rejects.toThrow(TypeError);
      await expect(call).rejects.toThrow(/express\.raw\(\{ type: 'application\/json' \}\)/);
      await expect(call).rejects.toThrow('Next.js pages/api: export const config = { api: { bodyParser: false } }');
    });

    it('names what it got', async () => {
      // @ts-expect-error -- a parsed body.
      await expect(async () => verifySignature({ event: 'llm.request.completed' }, good, SECRET)).rejects.toThrow('got object');
      // express.raw() without { type: 'application/json' } skips the delivery: Express 5 leaves undefined, Express 4 {}.
      for (const [body, got] of [[undefined, 'got undefined: nothing read the body'], [{}, 'got an empty object: a body parser skipped the request']] as const) {
        const call = async () => verifySignature(body as unknown as string, good, SECRET);
        await expect(call).rejects.toThrow(got);
        await expect(call).rejects.toThrow("express.raw() reads only application/octet-stream unless given { type: 'application/json' }");
      }
      // @ts-expect-error -- null body.
      await expect(async () => verifySignature(null, good, SECRET)).rejects.toThrow('got null');
    });

    it.each([
      ['an empty secret', ''],
      ['no secret', undefined],
      ['an empty secret list', []],
      ['an empty string in the list', [SECRET, '']],
      ['a non-string in the list', [SECRET, 42]],
      ['a Buffer secret', Buffer.from(SECRET)],
    ])('%s', async (_, secret: unknown) => {
      const call = async () => verifySignature(BODY, good, secret as string);
      await expect(call).rejects.toThrow(TypeError);
      await expect(call).rejects.toThrow(/environment variable is not set/);
    });

    it('rejects misuse at compile time too', async () => {
      // @ts-expect-error -- no secret.
      await expect(async () => verifySignature(BODY, good)).rejects.toThrow(TypeError);
      // @ts-expect-error -- secrets are strings (the key is the secret's UTF-8 bytes).
      await expect(async () => verifySignature(BODY, good, Buffer.from(SECRET))).rejects.toThrow(TypeError);
      // @ts-expect-error -- a number is not a body.
      await expect(async () => verifySignature(42, good, SECRET)).rejects.toThrow(TypeError);
    });

    it('checks the secret even when the header is missing, so a misconfiguration shows on the first request', async () => {
      await expect(async () => verifySignature(BODY, undefined, '')).rejects.toThrow(TypeError);
    });
  });
});
