import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatContext } from '../../../src/chat/chat-context.js';
import { sendSerialised } from '../../../src/chat/completion.js';

let server: Server;
let url: string;
let next = '';
/** The last answer's slices written, and its end. */
let writes = 0;
let sent: Promise<void> = Promise.resolve();

beforeAll(async () => {
  server = createServer((_req, res) => {
    writes = 0;
    const write = res.write.bind(res);
    res.write = ((chunk: string) => (writes++, write(chunk))) as typeof res.write;
    sent = sendSerialised({ exchange: { res }, deps: { config: { upstream: { timeoutMs: 30_000 } } } } as unknown as ChatContext, next, undefined, () => true);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('sendSerialised', () => {
  it.each([
    ['a short body, in one write', JSON.stringify({ text: 'Hi 😀' })],
    // 😀 is two UTF-16 units: with the slices at 1 MiB, one pair is cut by the boundary unless the slice keeps it.
    ['3 MiB cut into slices, a surrogate pair across each boundary', JSON.stringify({ text: `${'a'.repeat(1024 * 1024 - 10)}${'😀'.repeat(1024 * 1024)}` })],
  ])('%s: the client reads the same text, with a matching content-length', async (_, json) => {
    if (json.length > 1024 * 1024) expect(json.codePointAt(1024 * 1024 - 1)).toBe(0x1f600); // a pair across the first boundary
    next = json;
    const res = await fetch(url);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(Number(res.headers.get('content-length'))).toBe(bytes.length);
    expect(bytes.toString('utf8')).toBe(json);
  });

  it('stops writing when the client goes, and ends without waiting for it', async () => {
    next = JSON.stringify({ text: 'a'.repeat(64 * 1024 * 1024) });
    const controller = new AbortController();
    const res = await fetch(url, { signal: controller.signal });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await sent;
    // 64 slices of 1 MiB; a client that read one chunk and left got far fewer written to it.
    expect(writes).toBeLessThan(32);
  });
});
