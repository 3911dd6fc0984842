// The chat route runs on plain node:http objects (no Express, no body-parser): what those gave for free is
// checked here — body decoding, the path's other spellings, and how the upstream and client sockets are used.
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';

let upstream: FakeUpstream;
let server: TestServer;
let token: string;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
  ({ token } = await server.createKey());
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

beforeEach(() => upstream.setBehavior({ answer: 'Paris is the capital of France.' }));

const valid = { model: 'svc01', messages: [{ role: 'user', content: 'Capital of France?' }] };

/** A raw request, so headers like content-encoding and transfer-encoding are exactly what the test says. */
function send(
  path: string,
  body: Buffer | string | undefined,
  headers: Record<string, string | number> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, ...headers } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const errorCode = (text: string) => (JSON.parse(text) as { error: { code: string } }).error.code;

describe('request body', () => {
  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ])('inflates a %s body', async (encoding, compress) => {
    const res = await send('/v1/chat/completions', compress(Buffer.from(JSON.stringify(valid))), {
      'content-type': 'application/json',
      'content-encoding': encoding,
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text).choices[0].message.content).toBe('Paris is the capital of France.');
  });

  it('refuses an unknown content encoding, a corrupt gzip body and a non-UTF-8 charset with 400 invalid_request', async () => {
    const json = JSON.stringify(valid);
    const cases: Array<Record<string, string>> = [
      { 'content-encoding': 'compress' },
      { 'content-encoding': 'gzip' },
      { 'content-type': 'application/json; charset=latin1' },
    ];
    for (const headers of cases) {
      const res = await send('/v1/chat/completions', json, headers);
      expect(res.status, JSON.stringify(headers)).toBe(400);
      expect(errorCode(res.text)).toBe('invalid_request');
    }
  });

  it('refuses bytes that are not UTF-8 (a Latin-1 "é", a lone continuation byte) rather than reading them as U+FFFD', async () => {
    const json = JSON.stringify({ ...valid, messages: [{ role: 'user', content: 'Caf\u00e9?' }] });
    for (const bad of [Buffer.from(json, 'latin1'), Buffer.concat([Buffer.from(json.slice(0, -3)), Buffer.from([0x80]), Buffer.from(json.slice(-3))])]) {
      const res = await send('/v1/chat/completions', bad, { 'content-type': 'application/json' });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).error).toMatchObject({ code: 'invalid_request', message: 'The request body must be UTF-8 encoded JSON.' });
    }
    // The same text in UTF-8 is read.
    const good = await send('/v1/chat/completions', Buffer.from(json, 'utf8'), { 'content-type': 'application/json' });
    expect(good.status).toBe(200);
  });

  it("reads a charset label of UTF-8 however spelled (utf8, \"UTF-8\"), and refuses UTF-16 and UTF-32 naming the label, whatever the bytes", async () => {
    const json = JSON.stringify(valid);
    for (const label of ['utf8', '"UTF-8"', 'Utf-8']) {
      const res = await send('/v1/chat/completions', json, { 'content-type': `application/json; charset=${label}` });
      expect(res.status, label).toBe(200);
    }
    const utf16 = Buffer.from(json, 'utf16le');
    for (const [label, body] of [['utf-16', utf16], ['utf-16le', utf16], ['utf-16', Buffer.from(json)], ['utf-32', Buffer.from(json)]] as const) {
      const res = await send('/v1/chat/completions', body, { 'content-type': `application/json; charset=${label}` });
      expect(res.status, label).toBe(400);
      expect(JSON.parse(res.text).error).toEqual({
        code: 'invalid_request',
        type: 'invalid_request_error',
        param: null,
        message: `The request body must be UTF-8 encoded JSON; its Content-Type says charset=${label}.`,
      });
    }
  });

  it('413 for an inflated body over 10 MiB, even when it was sent small', async () => {
    const big = JSON.stringify({ ...valid, messages: [{ role: 'user', content: 'a'.repeat(10 * 1024 * 1024 + 1) }] });
    const compressed = gzipSync(Buffer.from(big));
    expect(compressed.length).toBeLessThan(100_000);
    const res = await send('/v1/chat/completions', compressed, { 'content-encoding': 'gzip' });
    expect(res.status).toBe(413);
    expect(errorCode(res.text)).toBe('request_too_large');
  });

  it('413 at once for a declared content-length over the limit, and for a chunked body that grows past it', async () => {
    const declared = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-length': 11 * 1024 * 1024 },
      });
      // Only a few bytes are ever sent: the answer must not wait for the rest.
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.on('error', (err) => (err.message.includes('socket hang up') ? undefined : reject(err)));
      req.write('{"model":');
    });
    expect(declared).toBe(413);
    const chunked = await send('/v1/chat/completions', Buffer.alloc(10 * 1024 * 1024 + 100, 0x20), { 'transfer-encoding': 'chunked' });
    expect(chunked.status).toBe(413);
  });

  it('reads a UTF-8 byte-order mark, an empty body as {} and no body as a non-object', async () => {
    const bom = await send('/v1/chat/completions', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(valid))]));
    expect(bom.status).toBe(200);
    const empty = await send('/v1/chat/completions', '', { 'content-length': 0 });
    expect(empty.status).toBe(400);
    expect(JSON.parse(empty.text).error).toMatchObject({ code: 'missing_required_parameter' });
    // Neither content-length nor transfer-encoding: a request without a body.
    const none = await new Promise<string>((resolve, reject) => {
      const { port } = new URL(server.url);
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.end(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`);
      });
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(none).toMatch(/^HTTP\/1\.1 400/);
    expect(errorCode(none.slice(none.indexOf('\r\n\r\n') + 4))).toBe('invalid_type');
  });

  it('with Expect: 100-continue, sends 100 Continue only to a body it will read: a bad key or a size over the limit is answered at once, before any upload', async () => {
    /** Sends `head`; sends `body` once the server says 100 Continue; everything the server said by the time it closes. */
    const exchange = (head: string, body = '') =>
      new Promise<string>((resolve, reject) => {
        const { port } = new URL(server.url);
        const socket = connect(Number(port), '127.0.0.1', () => socket.write(head));
        let text = '';
        socket.on('data', (d: Buffer) => {
          const sent100 = text.includes('100 Continue');
          text += d.toString('utf8');
          if (!sent100 && text.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) socket.write(body);
        });
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
      });
    const json = JSON.stringify(valid);
    const head = (key: string, length: number) =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`;
    const badKey = await exchange(head('sk-svc-nope', 5 * 1024 * 1024));
    expect(badKey).toMatch(/^HTTP\/1\.1 401 /);
    const tooLarge = await exchange(head(token, 11 * 1024 * 1024));
    expect(tooLarge).toMatch(/^HTTP\/1\.1 413 /);
    const served = await exchange(head(token, Buffer.byteLength(json)), json);
    expect(served).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(JSON.parse(served.slice(served.lastIndexOf('\r\n\r\n') + 4)).choices[0].message.content).toBe('Paris is the capital of France.');
  });

  it('does not read the body of a request without a valid key', async () => {
    const res = await send('/v1/chat/completions', JSON.stringify(valid), { authorization: 'Bearer sk-svc-nope' });
    expect(res.status).toBe(401);
    expect(errorCode(res.text)).toBe('invalid_api_key');
    expect(res.headers['x-request-id']).toMatch(/^chatcmpl-/);
  });
});

describe('routing', () => {
  it('answers the path with a query string, a trailing slash and in upper case, with one log line each', async () => {
    for (const path of ['/v1/chat/completions?x=1', '/v1/chat/completions/', '/V1/Chat/Completions']) {
      const res = await send(path, JSON.stringify(valid), { 'content-type': 'application/json' });
      expect(res.status, path).toBe(200);
      const id = res.headers['x-request-id'];
      expect(JSON.parse(res.text).id).toBe(id);
      await expect.poll(() => server.logs.filter((l) => l.includes(`"request_id":"${id}"`) && l.includes('"msg":"request"')).length).toBe(1);
    }
  });

  it('keeps other methods on the path out of the chat route (404 in the error shape)', async () => {
    const res = await fetch(`${server.url}/v1/chat/completions`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });
});

describe('streamed choices', () => {
  it("holds a second choice's finish until the first choice's svc is known, then sends both with it", async () => {
    const frame = (index: number, delta: object, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'up', object: 'chat.completion.chunk', created: 1, model: 'm', system_fingerprint: 'fp_1', choices: [{ index, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
    upstream.setBehavior({
      rawSse: [
        frame(0, { role: 'assistant', content: 'Paris is the capital' }, null) +
          frame(1, { role: 'assistant', content: 'Lyon' }, null) +
          frame(1, {}, 'stop') +
          frame(0, { content: ' of France.' }, null) +
          frame(0, {}, 'stop') +
          'data: [DONE]\n\n',
      ],
    });
    const res = await send('/v1/chat/completions', JSON.stringify({ ...valid, n: 2, stream: true }), { 'content-type': 'application/json' });
    expect(res.status).toBe(200);
    const frames = res.text
      .split('\n\n')
      .filter((f) => f.startsWith('data: {'))
      .map((f) => JSON.parse(f.slice(6)) as { id: string; model: string; system_fingerprint?: string; svc?: unknown; choices: Array<{ index: number; finish_reason: string | null }> });
    const finishes = frames.filter((f) => f.choices.some((c) => c.finish_reason !== null));
    // The first choice's finish, then the held finish of the second, both with svc.
    expect(finishes.map((f) => f.choices[0]!.index)).toEqual([0, 1]);
    for (const f of finishes) {
      expect(f.svc).toMatchObject({ grounded: expect.any(Boolean) });
      expect(f.system_fingerprint).toBe('fp_1');
      expect(f.model).toBe('svc01');
      expect(f.id).toBe(frames[0]!.id);
    }
    expect(frames.filter((f) => f.svc !== undefined)).toHaveLength(2);
  });
});

describe('connections', () => {
  it('reuses the upstream connection across streamed requests (the end after [DONE] is read, not cut)', async () => {
    const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
    const first = await client.chat.completions.create({ ...valid, model: 'svc01', messages: [{ role: 'user', content: 'x' }], stream: true });
    for await (const _ of first) void _;
    const before = upstream.connections;
    for (let i = 0; i < 10; i++) {
      const stream = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: `q${i}` }], stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      expect(text).toBe('Paris is the capital of France.');
    }
    // One connection per request would be 10; the pool may open one more while the last tail is read.
    expect(upstream.connections - before).toBeLessThanOrEqual(2);
  });

  it('sends the frames of one upstream read in one write to the client', async () => {
    const words = 'one two three four five six seven eight nine ten eleven twelve'.split(' ');
    const frame = (delta: object, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'up', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    // Every frame in one piece: svc reads them in one go.
    upstream.setBehavior({ rawSse: [words.map((w, i) => frame(i === 0 ? { role: 'assistant', content: w } : { content: ` ${w}` }, null)).join('') + frame({}, 'stop') + 'data: [DONE]\n\n'] });
    const reads = await new Promise<{ frames: number; reads: number }>((resolve, reject) => {
      const req = httpRequest(
        `${server.url}/v1/chat/completions`,
        { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } },
        (res) => {
          let text = '';
          let reads = 0;
          res.on('data', (d: Buffer) => {
            reads += 1;
            text += d.toString('utf8');
          });
          res.on('end', () => resolve({ frames: text.split('\n\n').filter((f) => f.startsWith('data: ')).length, reads }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ ...valid, stream: true }));
    });
    // A write per frame would arrive as about one read per frame.
    expect(reads.frames).toBeGreaterThan(8);
    expect(reads.reads).toBeLessThan(reads.frames / 2);
  });
});
