import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../../src/http/errors.js';
import { bodyParseThread, readJsonBody, THREAD_BODY_BYTES } from '../../../src/http/json-body.js';
import { JsonParseThread } from '../../../src/http/json-parse-thread.js';

// The thread runs the build's dist/json-parse-worker.js (npm test builds first).
const thread = JsonParseThread.beside(new URL('../../../dist/index.js', import.meta.url).href);

let server: Server;
let url: string;
/** The longest text JSON.parse was given on this (the main) thread. */
let longestParsedHere = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    readJsonBody(req).then(
      (value) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ value })),
      (err: unknown) => {
        const e = err as ApiError;
        res.writeHead(e.status ?? 500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: e.code, message: e.message } }));
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  bodyParseThread(null);
  await new Promise((resolve) => server.close(resolve));
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** Posts `body` with the parse thread `using` (or none): status and answer, and the longest main-thread parse of the body. */
async function post(body: Buffer | string, using: JsonParseThread | null): Promise<{ status: number; text: string; longest: number }> {
  bodyParseThread(using);
  const parse = JSON.parse;
  let longest = 0;
  vi.spyOn(JSON, 'parse').mockImplementation((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    // The server's answer is parsed by fetch's caller below, not counted: only bodies the size of the request.
    if (text.length > longest) longest = text.length;
    return parse(text, reviver);
  });
  const res = await fetch(`${url}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : new Uint8Array(body) });
  const text = await res.text();
  vi.restoreAllMocks();
  longestParsedHere = longest;
  return { status: res.status, text, longest };
}

const documents = (bytes: number) => 'The tower was finished in 1889 and is 330 metres tall. Ünïcödé 😀 "quoted" \\ \n'.repeat(Math.ceil(bytes / 40)).slice(0, bytes);

describe('request bodies parsed on a thread', () => {
  it('is found beside the build, and not beside the source', () => {
    expect(thread).toBeDefined();
    expect(JsonParseThread.beside(import.meta.url)).toBeUndefined();
  });

  it('parses 800 KB of retrieved documents off the main thread, with the same value as inline', async () => {
    const body = JSON.stringify({
      model: 'svc01',
      ['__proto__']: { own: true },
      n: -0,
      big: 12345678901234567890,
      messages: [{ role: 'system', content: documents(800_000) }, ...Array.from({ length: 150 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}` }))],
    });
    const inline = await post(body, null);
    const threaded = await post(body, thread!);
    expect(threaded.status).toBe(200);
    expect(threaded.text).toBe(inline.text);
    expect(JSON.parse(threaded.text).value.messages[0].content).toBe(documents(800_000));
    // Inline, the whole body is one JSON.parse on the main thread; on the thread none of it is.
    expect(inline.longest).toBeGreaterThan(800_000);
    expect(threaded.longest).toBeLessThan(THREAD_BODY_BYTES);
  });

  it('answers a byte-order mark, bad UTF-8, bad JSON and deep nesting as inline', async () => {
    const pad = ' '.repeat(THREAD_BODY_BYTES);
    const bodies = [
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`{"a":1}${pad}`)]),
      Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff, 0xfe]), Buffer.from(`"}${pad}`)]),
      Buffer.from(`{"a":${pad}`),
      Buffer.from(`${'['.repeat(300)}${']'.repeat(300)}${pad}`),
      Buffer.from(`${pad}`),
    ];
    for (const body of bodies) {
      const inline = await post(body, null);
      const threaded = await post(body, thread!);
      expect({ status: threaded.status, text: threaded.text }).toEqual({ status: inline.status, text: inline.text });
    }
    expect(longestParsedHere).toBeLessThan(THREAD_BODY_BYTES);
  });

  it('parses concurrent bodies each to its own value', async () => {
    const bodies = [0, 1, 2, 3].map((i) => JSON.stringify({ i, messages: [{ role: 'user', content: documents(100_000 + i) }] }));
    bodyParseThread(thread!);
    const answers = await Promise.all(bodies.map((body) => fetch(url, { method: 'POST', body }).then((r) => r.json() as Promise<{ value: { i: number; messages: Array<{ content: string }> } }>)));
    answers.forEach((a, i) => {
      expect(a.value.i).toBe(i);
      expect(a.value.messages[0]!.content.length).toBe(100_000 + i);
    });
  });
});
