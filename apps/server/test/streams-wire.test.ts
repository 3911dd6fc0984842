/**
 * What a streamed answer looks like on the wire, read from a raw TCP socket: HTTP/1.1 chunked framing that a
 * strict reader accepts (every chunk's size is its UTF-8 byte count, then the last chunk), a keep-alive
 * connection that serves the next request, pipelined requests answered whole and in order, HTTP/1.0 (no
 * chunking), the response's header block sent before the first token, and `: keep-alive` comments while a
 * reasoning model is silent.
 */
import { connect, type Socket } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';

// Multi-byte text: a chunk size counted in UTF-16 units instead of bytes would break the framing.
const ANSWER = 'Grüße aus Zürich — 東京 🎉 token3 token4 token5 token6 token7 token8 token9.';

let upstream: FakeUpstream;
let server: TestServer;
let token: string;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: ANSWER, trickle: { intervalMs: 5 } });
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RATE_LIMIT_RPM: '100000' } });
  ({ token } = await server.createKey());
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

function requestText(version: '1.1' | '1.0', content: string): string {
  const body = JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content }] });
  const host = new URL(server.url).host;
  return (
    `POST /v1/chat/completions HTTP/${version}\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/** Reads bytes off a socket and hands out what a strict HTTP/1.1 reader asks for. */
class WireReader {
  private buffer = Buffer.alloc(0);
  private ended = false;
  private waiter: (() => void) | null = null;

  constructor(private readonly socket: Socket) {
    socket.on('data', (part: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, part]);
      this.waiter?.();
    });
    for (const event of ['end', 'close']) {
      socket.on(event, () => {
        this.ended = true;
        this.waiter?.();
      });
    }
  }

  private async until(ready: () => boolean): Promise<void> {
    while (!ready()) {
      if (this.ended) throw new Error(`connection ended; unread: ${JSON.stringify(this.buffer.toString('latin1').slice(0, 200))}`);
      await new Promise<void>((resolve) => (this.waiter = resolve));
      this.waiter = null;
    }
  }

  async line(): Promise<string> {
    await this.until(() => this.buffer.includes('\r\n'));
    const end = this.buffer.indexOf('\r\n');
    const line = this.buffer.subarray(0, end).toString('latin1');
    this.buffer = this.buffer.subarray(end + 2);
    return line;
  }

  async bytes(n: number): Promise<Buffer> {
    await this.until(() => this.buffer.length >= n);
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return out;
  }

  async rest(): Promise<Buffer> {
    await this.until(() => this.ended);
    return this.buffer;
  }

  /** Status line and headers (lower-cased names). */
  async head(): Promise<{ status: string; headers: Map<string, string> }> {
    const status = await this.line();
    const headers = new Map<string, string>();
    for (let line = await this.line(); line !== ''; line = await this.line()) {
      const colon = line.indexOf(':');
      headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    return { status, headers };
  }

  /** A chunked body, strictly: hex size, CRLF, exactly that many bytes, CRLF; until the zero-size chunk. */
  async chunkedBody(): Promise<{ body: string; chunks: number }> {
    const parts: Buffer[] = [];
    for (;;) {
      const sizeLine = await this.line();
      expect(sizeLine).toMatch(/^[0-9a-f]+$/);
      const size = Number.parseInt(sizeLine, 16);
      if (size === 0) {
        expect(await this.line()).toBe('');
        break;
      }
      parts.push(await this.bytes(size));
      expect(await this.line()).toBe('');
    }
    return { body: Buffer.concat(parts).toString('utf8'), chunks: parts.length };
  }
}

/** The answer text of an SSE body, which must be nothing but `data:` lines and the blank lines between. */
function contentOf(sse: string): string {
  let content = '';
  for (const line of sse.split('\n')) {
    if (line === '') continue;
    expect(line).toMatch(/^data: /);
    if (line === 'data: [DONE]') continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: Array<{ delta?: { content?: string } }> };
    content += chunk.choices[0]?.delta?.content ?? '';
  }
  return content;
}

async function open(): Promise<{ socket: Socket; reader: WireReader }> {
  const { hostname, port } = new URL(server.url);
  const socket = connect({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return { socket, reader: new WireReader(socket) };
}

describe('a streamed answer on the wire', () => {
  it('is chunked as HTTP/1.1 says, frame after frame, and the connection serves the next request', async () => {
    const { socket, reader } = await open();
    try {
      for (const question of ['First?', 'Second?']) {
        socket.write(requestText('1.1', question));
        const { status, headers } = await reader.head();
        expect(status).toBe('HTTP/1.1 200 OK');
        expect(headers.get('transfer-encoding')).toBe('chunked');
        expect(headers.get('content-type')).toContain('text/event-stream');
        const { body, chunks } = await reader.chunkedBody();
        // Paced frames go out as they come: many chunks, not one at the end.
        expect(chunks).toBeGreaterThan(3);
        expect(contentOf(body)).toBe(ANSWER);
        expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
      }
    } finally {
      socket.destroy();
    }
  });

  it('answers pipelined requests whole and in order', async () => {
    const { socket, reader } = await open();
    try {
      // Each answer names its question, whichever of the two reaches the upstream first.
      const echo = (body: Record<string, unknown>): string => {
        const messages = body.messages as Array<{ content: string }>;
        return `${messages.at(-1)!.content} ${ANSWER}`;
      };
      upstream.nextBehavior({ answer: echo, trickle: { intervalMs: 5 } });
      upstream.nextBehavior({ answer: echo, trickle: { intervalMs: 5 } });
      socket.write(requestText('1.1', 'One?') + requestText('1.1', 'Two?'));
      const answers: string[] = [];
      for (let i = 0; i < 2; i++) {
        expect((await reader.head()).status).toBe('HTTP/1.1 200 OK');
        answers.push(contentOf((await reader.chunkedBody()).body));
      }
      expect(answers).toEqual([`One? ${ANSWER}`, `Two? ${ANSWER}`]);
    } finally {
      socket.destroy();
    }
  });

  it('is the raw event stream over HTTP/1.0, ended by closing the connection', async () => {
    const { socket, reader } = await open();
    try {
      socket.write(requestText('1.0', 'Old client?'));
      const { status, headers } = await reader.head();
      expect(status).toMatch(/^HTTP\/1\.1 200/);
      expect(headers.has('transfer-encoding')).toBe(false);
      const body = (await reader.rest()).toString('utf8');
      expect(contentOf(body)).toBe(ANSWER);
      expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    } finally {
      socket.destroy();
    }
  });

  it('starts with the response head as soon as the upstream answers, before any token', async () => {
    // The upstream sends its headers and then nothing until the client leaves.
    upstream.nextBehavior({ rawSse: [], hangMidStream: true });
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('no response head within 10 s')), 10_000);
    try {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Thinking long?' }] }),
        signal: controller.signal,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/event-stream');
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  });
});

describe('a model that thinks in silence', () => {
  let quiet: TestServer;
  let quietToken: string;

  beforeAll(async () => {
    // A short interval stands for the default 15 s: the comments come while the upstream is silent.
    quiet = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RATE_LIMIT_RPM: '100000', SVC_STREAM_KEEPALIVE_MS: '20' } });
    ({ token: quietToken } = await quiet.createKey());
  });

  afterAll(async () => {
    await quiet?.close();
  });

  it('gets `: keep-alive` comments until its first token, unbuffered by proxies, and the connection serves the next request', async () => {
    let think!: () => void;
    upstream.nextBehavior({ answer: ANSWER, silentUntil: new Promise<void>((resolve) => (think = resolve)) });
    const { hostname, port } = new URL(quiet.url);
    const socket = connect({ host: hostname, port: Number(port) });
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const reader = new WireReader(socket);
    const body = JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Think hard.' }] });
    const head = (content: string) =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${quietToken}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(content)}\r\n\r\n${content}`;
    try {
      socket.write(head(body));
      const { status, headers } = await reader.head();
      expect(status).toBe('HTTP/1.1 200 OK');
      // What keeps nginx from buffering the stream (and caches from keeping it).
      expect(headers.get('x-accel-buffering')).toBe('no');
      expect(headers.get('cache-control')).toBe('no-cache');
      expect(headers.get('connection')).toBe('keep-alive');
      // Three comments, each its own chunk, while the upstream has sent nothing after its headers.
      for (let i = 0; i < 3; i++) {
        const size = Number.parseInt(await reader.line(), 16);
        expect((await reader.bytes(size)).toString('utf8')).toBe(': keep-alive\n\n');
        expect(await reader.line()).toBe('');
      }
      think();
      const { body: rest } = await reader.chunkedBody();
      const frames = rest.split('\n').filter((line) => line !== '' && line !== ': keep-alive').join('\n');
      expect(contentOf(frames)).toBe(ANSWER);
      expect(rest.endsWith('data: [DONE]\n\n')).toBe(true);

      socket.write(head(JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Again.' }] })));
      expect((await reader.head()).status).toBe('HTTP/1.1 200 OK');
      expect(contentOf((await reader.chunkedBody()).body.replaceAll(': keep-alive\n\n', ''))).toBe(ANSWER);
    } finally {
      socket.destroy();
    }
  });

  it('reads as an ordinary stream through the OpenAI SDK', async () => {
    let think!: () => void;
    const thinking = new Promise<void>((resolve) => (think = resolve));
    upstream.nextBehavior({ answer: ANSWER, silentUntil: thinking });
    const comments: string[] = [];
    // The SDK's own fetch, watched: it sees the comments and skips them.
    const watched: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      const [mine, sdk] = res.body!.tee();
      void (async () => {
        for await (const part of mine as unknown as AsyncIterable<Uint8Array>) {
          const text = Buffer.from(part).toString('utf8');
          if (text.includes(': keep-alive')) comments.push(text);
          if (comments.length === 2) think();
        }
      })();
      return new Response(sdk, { status: res.status, headers: res.headers });
    };
    const client = new OpenAI({ apiKey: quietToken, baseURL: `${quiet.url}/v1`, maxRetries: 0, fetch: watched });
    const stream = await client.chat.completions.create({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Think.' }] });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
    expect(comments.length).toBeGreaterThanOrEqual(2);
    expect(content).toBe(ANSWER);
  });
});
