import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/test-server.js';
import { until } from './support/reliability-http.js';

/**
 * Issue #26: 250 unfinished 10 MiB uploads pushed RSS to 2.7 GB. Request bodies in flight are capped per
 * process (SVC_MAX_BODY_BYTES_IN_FLIGHT); past the cap a new body is answered 429 with retry-after at once,
 * and the bytes come back when the holders finish or go away.
 */

const MiB = 1024 * 1024;
let server: TestServer | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await server?.close();
  server = undefined;
});

/** A chat request whose body is `size` bytes of valid JSON. */
function bodyOf(size: number): string {
  const prefix = '{"model":"svc01","messages":[{"role":"user","content":"';
  const suffix = '"}],"svc":{"dehallucinate":false}}';
  const words = 'Tell me about it. '.repeat(Math.ceil(size / 18)).slice(0, size - prefix.length - suffix.length);
  return prefix + words + suffix;
}

/** Starts an upload of `declared` bytes that sends only `sent` of them and then waits (never finishes). */
async function unfinishedUpload(url: string, token: string, declared: number, sent: number): Promise<Socket> {
  const { port } = new URL(url);
  const socket = connect(Number(port), '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n\r\n`,
  );
  socket.write(bodyOf(declared).slice(0, sent));
  return socket;
}

async function postSized(url: string, token: string, size: number, chunked = false) {
  const body = bodyOf(size);
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    // A stream has no content-length: the body is sent chunked and counted as it arrives.
    body: chunked ? new Blob([body]).stream() : body,
    ...(chunked ? { duplex: 'half' } : {}),
  } as RequestInit);
  return { status: res.status, retryAfter: res.headers.get('retry-after'), json: (await res.json()) as any };
}

describe('request-body bytes in flight', () => {
  it('past SVC_MAX_BODY_BYTES_IN_FLIGHT a new body gets 429 with retry-after at once; the bytes come back when the holders go', async () => {
    server = await startTestServer({ env: { SVC_MAX_BODY_BYTES_IN_FLIGHT: '20MiB', SVC_RATE_LIMIT_RPM: '100000' } });
    const { token } = await server.createKey();
    const holders = [(await server.createKey()).token, (await server.createKey()).token];
    // Two uploads (of two other keys: one key holds a quarter at most, below) declare 9 MiB each and stall after
    // 1 MiB: 18 of the 20 MiB are held.
    await unfinishedUpload(server.url, holders[0]!, 9 * MiB, MiB);
    await unfinishedUpload(server.url, holders[1]!, 9 * MiB, MiB);
    const refused = await until(async () => {
      const res = await postSized(server!.url, token, 3 * MiB);
      return res.status === 429 ? res : undefined;
    }, 10_000, 'a 3 MiB body refused');
    expect(refused.retryAfter).toBe('1');
    expect(refused.json.error).toEqual({ message: expect.stringContaining('too many request bodies'), type: 'rate_limit_error', code: 'rate_limit_exceeded', param: null });
    // Chunked (no declared size): refused once its bytes pass what is left.
    const chunked = await postSized(server.url, token, 3 * MiB, true);
    expect(chunked.status).toBe(429);
    // Within what is left: served.
    expect((await postSized(server.url, token, MiB)).status).toBe(200);
    // The holders go away: their bytes come back.
    for (const socket of sockets.splice(0)) socket.destroy();
    await until(async () => (await postSized(server!.url, token, 9 * MiB)).status === 200, 10_000, 'a 9 MiB body served');
    expect(server.logs.filter((line) => JSON.parse(line).level >= 50)).toEqual([]);
  });

  it('one key holds a quarter of them at most (one largest body when that is more): its uploads cannot hold the other keys out', async () => {
    server = await startTestServer({ env: { SVC_MAX_BODY_BYTES_IN_FLIGHT: '40MiB', SVC_RATE_LIMIT_RPM: '100000' } });
    const hog = (await server.createKey()).token;
    const other = (await server.createKey()).token;
    // A quarter of 40 MiB is the 10 MiB of one largest body: the hog's 9 MiB that never come hold most of it.
    await unfinishedUpload(server.url, hog, 9 * MiB, MiB);
    const refused = await until(async () => {
      const res = await postSized(server!.url, hog, 3 * MiB);
      return res.status === 429 ? res : undefined;
    }, 10_000, "the hog's next body refused");
    expect(refused.retryAfter).toBe('1');
    expect(refused.json.error).toMatchObject({ message: expect.stringContaining('This API key is sending too many request bodies'), code: 'rate_limit_exceeded' });
    // Chat completions and the Responses API share the budget: the hog's share is as full there.
    const input = 'Tell me about it. '.repeat((3 * MiB) / 18);
    const responses = await fetch(`${server.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${hog}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', input, svc: { dehallucinate: false } }),
    });
    expect(responses.status).toBe(429);
    // The server has 31 MiB left: another key's bodies are served.
    expect((await postSized(server.url, other, 9 * MiB)).status).toBe(200);
    expect((await postSized(server.url, hog, MiB)).status).toBe(200);
  });
});
