import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { SseWriter } from '../../../src/chat/sse-writer.js';

/** Counts the writes a response makes through node (`res.write`) and straight to its socket. */
function countWrites(res: ServerResponse): { viaResponse: number; viaSocket: number } {
  const counts = { viaResponse: 0, viaSocket: 0 };
  const socket = res.socket as Socket;
  let inNode = false;
  // node's own `write`, `end` and `flushHeaders` write to the socket too: only writes made outside them count.
  for (const name of ['write', 'end', 'flushHeaders'] as const) {
    const original = (res[name] as (...args: unknown[]) => unknown).bind(res);
    (res as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      if (name === 'write') counts.viaResponse += 1;
      inNode = true;
      try {
        return original(...args);
      } finally {
        inNode = false;
      }
    };
  }
  const socketWrite = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  socket.write = ((...args: unknown[]) => {
    if (!inNode) counts.viaSocket += 1;
    return socketWrite(...args);
  }) as Socket['write'];
  return counts;
}

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

async function serve(handler: (res: ServerResponse) => Promise<void>): Promise<string> {
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    void handler(res);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function get(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => request(url, resolve).on('error', reject).end());
}

describe('SseWriter', () => {
  it('sends the head at once, then each flush as one write straight to the socket', async () => {
    let counts: { viaResponse: number; viaSocket: number } | undefined;
    let go!: () => void;
    const started = new Promise<void>((resolve) => (go = resolve));
    const url = await serve(async (res) => {
      counts = countWrites(res);
      const sse = new SseWriter(res);
      await started;
      for (let i = 0; i < 5; i++) {
        await sse.write(JSON.stringify({ i, text: 'é🎉' }));
        await delay(5);
      }
      sse.hold();
      await sse.write('[DONE]');
      sse.end();
    });
    // The head comes before any frame was written.
    const res = await get(url);
    expect(res.statusCode).toBe(200);
    go();
    res.setEncoding('utf8');
    let body = '';
    for await (const part of res) body += part;
    expect(body).toBe([0, 1, 2, 3, 4].map((i) => `data: {"i":${i},"text":"é🎉"}\n\n`).join('') + 'data: [DONE]\n\n');
    // The head went out on its own (`flushHeaders`), so every frame went straight to the socket, one write
    // each; the end went through `res.end`.
    expect(counts).toEqual({ viaResponse: 0, viaSocket: 5 });
  });

  it('waits for the socket to drain when the reader is behind, and leaves no listeners', async () => {
    const frame = 'x'.repeat(256 * 1024);
    let socket: Socket | undefined;
    let baseline = 0;
    let waits = 0;
    let mostDrainListeners = 0;
    const url = await serve(async (res) => {
      socket = res.socket as Socket;
      baseline = socket.listenerCount('drain');
      const sse = new SseWriter(res);
      for (let i = 0; i < 40; i++) {
        const behind = sse.write(frame);
        mostDrainListeners = Math.max(mostDrainListeners, socket.listenerCount('drain'));
        if (behind) {
          waits += 1;
          await behind;
        }
        await delay(1);
      }
      sse.end();
    });
    const res = await get(url);
    // Read nothing for a while: the server must stop writing rather than buffer 10 MiB.
    res.pause();
    await delay(300);
    expect(socket!.writableLength).toBeLessThan(2 * 1024 * 1024);
    let received = 0;
    res.on('data', (part: Buffer) => (received += part.length));
    res.resume();
    await new Promise((resolve) => res.on('end', resolve));
    expect(received).toBe(40 * (frame.length + 'data: \n\n'.length));
    expect(waits).toBeGreaterThan(0);
    // One wait at a time at most, and none left once everything was read (the last wait ends with a 'drain').
    expect(mostDrainListeners).toBeLessThanOrEqual(baseline + 1);
    for (let i = 0; i < 100 && socket!.listenerCount('drain') > baseline; i++) await delay(10);
    expect(socket!.listenerCount('drain')).toBe(baseline);
  });
});
