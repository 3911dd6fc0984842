import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

/** What the receiver does with one request. */
export interface ReceiverReply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Answer once this settles (after `delayMs`, if both are given). */
  until?: Promise<unknown>;
  /** Never answer. */
  hang?: boolean;
  /** Destroy the connection without answering. */
  reset?: boolean;
}

export interface ReceivedDelivery {
  headers: IncomingHttpHeaders;
  /** The exact bytes received. */
  raw: Buffer;
  /** Date.now() when the body had been read. */
  receivedAt: number;
  /** What the receiver answered (undefined for reset/hang). */
  replied: number | undefined;
}

export interface Receiver {
  url: string;
  received: ReceivedDelivery[];
  /** Replies for the following requests, in order; then `fallback`. */
  queue: ReceiverReply[];
  fallback: ReceiverReply;
  /** Resolves once `predicate` holds for the received list; rejects after `timeoutMs`. */
  waitFor(predicate: (received: ReceivedDelivery[]) => boolean, timeoutMs?: number): Promise<ReceivedDelivery[]>;
  close(): Promise<void>;
}

/**
 * A real webhook receiver on 127.0.0.1 (random port) that records every request's raw bytes and answers as
 * told: 200 by default, or a queued status / delay / hold / hang / connection reset.
 */
export async function startReceiver(fallback: ReceiverReply = {}, options: { port?: number } = {}): Promise<Receiver> {
  const received: ReceivedDelivery[] = [];
  const sockets = new Set<Socket>();
  const waiters = new Set<() => void>();
  const receiver: Receiver = {
    url: '',
    received,
    queue: [],
    fallback,
    waitFor(predicate, timeoutMs = 15_000) {
      if (predicate(received)) return Promise.resolve(received);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (predicate(received)) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(received);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`receiver: condition not met after ${timeoutMs} ms (${received.length} received)`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const reply = receiver.queue.shift() ?? receiver.fallback;
    const entry: ReceivedDelivery = { headers: req.headers, raw: Buffer.concat(chunks), receivedAt: Date.now(), replied: undefined };
    received.push(entry);
    for (const waiter of [...waiters]) waiter();
    if (reply.reset) {
      req.socket.destroy();
      return;
    }
    if (reply.hang) return;
    if (reply.delayMs) await delay(reply.delayMs);
    if (reply.until) await reply.until.catch(() => undefined);
    if (res.destroyed) return;
    entry.replied = reply.status ?? 200;
    res.writeHead(entry.replied, { 'content-type': 'text/plain', ...reply.headers });
    res.end(reply.body ?? 'ok');
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}

/** Polls `fn` until it returns a truthy value. */
export async function eventually<T>(fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met after ${timeoutMs} ms`);
    await delay(25);
  }
}
