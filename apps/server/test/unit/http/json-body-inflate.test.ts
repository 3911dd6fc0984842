import type { IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readJsonBody } from '../../../src/http/json-body.js';
import { ApiError } from '../../../src/http/errors.js';

const MIB = 1024 * 1024;

/** `size` bytes of JSON white space, compressed: a few KB that inflate to `size`. */
const bombs = {
  br: (size: number) => brotliCompressSync(Buffer.alloc(size, 0x20), { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } }),
  gzip: (size: number) => gzipSync(Buffer.alloc(size, 0x20), { level: 1 }),
};

/**
 * A request with `body` sent as `encoding`, already all arrived; `decoder` is the stream readJsonBody pipes it
 * into, and `inflated` the bytes that decoder has put out so far.
 */
function compressedRequest(encoding: keyof typeof bombs, body: Buffer) {
  const req = Object.assign(new PassThrough(), {
    headers: { 'content-length': String(body.length), 'content-type': 'application/json', 'content-encoding': encoding },
  });
  const seen: { decoder?: Readable; inflated: number } = { inflated: 0 };
  const pipe = req.pipe.bind(req);
  vi.spyOn(req, 'pipe').mockImplementation((destination) => {
    seen.decoder = destination as unknown as Readable;
    seen.decoder.on('data', (chunk: Buffer) => (seen.inflated += chunk.length));
    return pipe(destination);
  });
  req.end(body);
  return { req: req as unknown as IncomingMessage & PassThrough, seen };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('readJsonBody: a compressed body that inflates past the limit', () => {
  it.each(['br', 'gzip'] as const)('%s: refused with 413, and nothing more is inflated after (a decompression bomb costs the limit, not its full size)', async (encoding) => {
    const limit = MIB;
    const { req, seen } = compressedRequest(encoding, bombs[encoding](64 * MIB));
    const error = await readJsonBody(req, limit).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(413);
    // The decoder is gone (destroyed, or — without the stop — done only after inflating all 64 MiB).
    if (!seen.decoder!.destroyed) await once(seen.decoder!, 'close');
    // What was inflated: the limit, and at most the chunks the decoder had made ready beside it.
    expect(seen.inflated).toBeLessThan(limit + MIB);
    // The compressed bytes are still read to their end, so the answer goes out on a usable connection.
    if (!req.readableEnded) await once(req, 'end');
  });

  it('a body within the limit is inflated and parsed as before', async () => {
    const json = JSON.stringify({ model: 'svc01', text: 'word '.repeat(1000) });
    const { req } = compressedRequest('br', brotliCompressSync(json));
    await expect(readJsonBody(req, MIB)).resolves.toEqual(JSON.parse(json));
  });
});
