import { once } from 'node:events';
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { samplePayload } from '../test/support.js';
import { verifyMiddleware } from './express.js';
import { verifyPlugin } from './fastify.js';
import { createWebhookHandler } from './fetch.js';
import { signWebhook } from './index.js';

/**
 * The adapters behind real HTTP servers (Express middleware on node:http, the Fastify plugin, the Fetch handler fed
 * node's request), sent hostile requests over a raw socket: header names in odd case, a header sent twice, megabyte
 * values (the servers allow 2 MiB of headers, within node's limits), timestamps such as 1e308, bodies that are not UTF-8,
 * empty, at and one byte past the limit, chunked, a content-type that lies, a content-length that lies. Every answer is
 * 2xx only for a delivery signed with the secret, else 400/401/413, never a 5xx; a refusal's message quotes no more than 128 characters of what was sent; and after each hostile
 * request the next good delivery is accepted. Seeded (SVC_FUZZ_SEED explores others).
 */
const SEED = Number(process.env.SVC_FUZZ_SEED ?? 20261201);
const SECRET = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
const LIMIT = 4096;
const MAX_HEADER_SIZE = 2 * 1024 * 1024;
const BODY = Buffer.from(JSON.stringify(samplePayload));

interface Raw {
  headers: Array<[string, string | Buffer]>;
  body: Buffer;
  /** `exact` content-length, `chunked`, or a lie: declares more than is sent (then the socket is ended), or fewer. */
  framing: 'exact' | 'chunked' | 'more' | 'fewer';
}

interface Answer {
  status: number | null;
  text: string;
}

/** Sends one request on its own connection and reads the first answer (null: the connection closed without one). */
async function send(port: number, raw: Raw): Promise<Answer> {
  const lines: Buffer[] = [Buffer.from('POST /webhooks/svc HTTP/1.1\r\nhost: receiver\r\nconnection: close\r\n')];
  for (const [name, value] of raw.headers) lines.push(Buffer.concat([Buffer.from(`${name}: `), Buffer.from(value), Buffer.from('\r\n')]));
  const { body } = raw;
  if (raw.framing === 'chunked') {
    lines.push(Buffer.from('transfer-encoding: chunked\r\n\r\n'));
    if (body.length > 0) lines.push(Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n'));
    lines.push(Buffer.from('0\r\n\r\n'));
  } else {
    const declared = raw.framing === 'more' ? body.length + 10 : raw.framing === 'fewer' ? Math.max(body.length - 10, 0) : body.length;
    lines.push(Buffer.from(`content-length: ${declared}\r\n\r\n`), body);
  }
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {}); // A server that hangs up on a lying request: the answer, if any, is what was read.
  // `connection: close` has the server end the connection after its answer. A body shorter than declared never ends
  // on its own: the sender's end of the connection is closed after it, as a sender that gave up would.
  if (raw.framing === 'more') socket.end(Buffer.concat(lines));
  else socket.write(Buffer.concat(lines));
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  // Not events.once: it rejects on the 'error' (a reset) that comes before 'close'.
  await new Promise((resolve) => socket.on('close', resolve));
  const text = Buffer.concat(chunks).toString('latin1');
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
  return { status: status === undefined ? null : Number(status), text: text.slice(text.indexOf('\r\n\r\n') + 4) };
}

function signed(body: Buffer, options: { id?: string; timestamp?: number } = {}): [[string, string], [string, string], [string, string]] {
  const id = options.id ?? `whd_${Math.random().toString(16).slice(2)}`;
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  return [
    ['webhook-id', id],
    ['webhook-timestamp', String(timestamp)],
    ['webhook-signature', signWebhook(body, { id, timestamp }, SECRET)],
  ];
}

const oddCase = (name: string, mode: number) =>
  mode === 0 ? name : mode === 1 ? name.toUpperCase() : name.replace(/(^|-)(\w)/g, (m) => m.toUpperCase());
const CONTENT_TYPES = ['application/json', 'Application/JSON; charset=UTF-8', 'application/json; charset=latin1', 'text/plain', 'application/x-www-form-urlencoded', ''];

/** A hostile request: no entry signed with the secret, or a good delivery made bad (a byte changed, stale, cut). */
const hostileArb = fc
  .record({
    id: fc.oneof(fc.string({ minLength: 1, maxLength: 30 }), fc.constant('é中🚀'), fc.constant('i'.repeat(1024 * 1024))),
    timestamp: fc.oneof(
      fc.constantFrom('1e308', '-1', '0x10', 'NaN', '00000000001', '1'.repeat(300), '', 'abc'),
      fc.integer({ min: 0, max: 2_000_000_000 }).map(String),
    ),
    entries: fc.oneof(
      fc.array(fc.constantFrom('v1,', 'v1,!!!!', `v1,${'A'.repeat(43)}=`, `v2,${'A'.repeat(43)}=`, 'v1a,x'), { maxLength: 5 }),
      fc.integer({ min: 1000, max: 20_000 }).map((n) => Array.from({ length: n }, () => 'v1,')),
      fc.constant([`v1,${'Q'.repeat(1024 * 1024)}`]),
    ),
    body: fc.oneof(
      fc.constant(BODY),
      fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
      fc.constantFrom(Buffer.alloc(0), Buffer.from([0xff, 0xfe, 0xfd]), Buffer.alloc(LIMIT, 0xc3), Buffer.alloc(LIMIT + 1, 0x7b)),
    ),
    spoil: fc.constantFrom('unsigned', 'byte changed', 'stale', 'cut'),
    caseMode: fc.integer({ min: 0, max: 2 }),
    contentType: fc.constantFrom(...CONTENT_TYPES),
    framing: fc.constantFrom<Raw['framing']>('exact', 'chunked', 'more', 'fewer'),
  })
  .map(({ id, timestamp, entries, body, spoil, caseMode, contentType, framing }): Raw & { sent: string[] } => {
    let headers: Array<[string, string | Buffer]>;
    if (spoil === 'unsigned') {
      headers = [
        ['webhook-id', Buffer.from(id)],
        ['webhook-timestamp', timestamp],
        ['webhook-signature', entries.join(' ')],
      ];
    } else {
      const good = signed(body, spoil === 'stale' ? { timestamp: Math.floor(Date.now() / 1000) - 3600 } : {});
      headers = [...good];
      if (spoil === 'byte changed') body = Buffer.concat([body, Buffer.from(' ')]);
      // 'cut': the body is cut short by a lying content-length or a lost connection.
      if (spoil === 'cut') framing = framing === 'more' ? 'more' : 'fewer';
    }
    if (contentType !== '') headers.push(['content-type', contentType]);
    headers = headers.map(([name, value]) => [oddCase(name, caseMode), value]);
    const sent = headers.map(([, value]) => value.toString());
    return { headers, body, framing: spoil === 'cut' && body.length < 10 ? 'more' : framing, sent };
  });

function expectRefused(answer: Answer, sent: readonly string[], allowed: readonly number[]): void {
  if (answer.status === null) return; // A lying content-length: the connection ended before a whole request.
  expect(allowed, `${answer.status} ${answer.text.slice(0, 300)}`).toContain(answer.status);
  for (const value of sent) {
    if (value.length > 128) expect(answer.text).not.toContain(value.slice(0, 129));
  }
}

interface Target {
  name: string;
  port: number;
  received: number;
  close(): Promise<void>;
  /** Statuses a hostile request may get. */
  refusals: number[];
}

async function nodeServer(listener: RequestListener): Promise<Server> {
  const server = createServer({ maxHeaderSize: MAX_HEADER_SIZE }, listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

function toRequest(req: IncomingMessage): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  return new Request(`http://receiver${req.url}`, { method: 'POST', headers, body: Readable.toWeb(req) as ReadableStream, duplex: 'half' } as RequestInit);
}

const targets: Target[] = [];

beforeAll(async () => {
  const express: Target = { name: 'express', port: 0, received: 0, refusals: [400, 401, 413], close: async () => {} };
  const middleware = verifyMiddleware({ secret: SECRET, limit: LIMIT });
  const expressServer = await nodeServer((req, res) => {
    void middleware(req, res, (err) => {
      if (err !== undefined) {
        res.statusCode = 500;
        res.end(String(err));
        return;
      }
      express.received++;
      res.statusCode = 204;
      res.end();
    });
  });
  express.port = (expressServer.address() as AddressInfo).port;
  express.close = async () => void (await new Promise((resolve) => expressServer.close(resolve)));

  const fetchTarget: Target = { name: 'fetch', port: 0, received: 0, refusals: [400, 401, 413], close: async () => {} };
  const handler = createWebhookHandler({ secret: SECRET, limit: LIMIT }, () => {
    fetchTarget.received++;
    return new Response(null, { status: 204 });
  });
  const fetchServer = await nodeServer(async (req, res) => {
    try {
      const response = await handler(toRequest(req));
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    } catch (err) {
      res.statusCode = 500;
      res.end(String(err));
    }
  });
  fetchTarget.port = (fetchServer.address() as AddressInfo).port;
  fetchTarget.close = async () => void (await new Promise((resolve) => fetchServer.close(resolve)));

  const fastifyTarget: Target = { name: 'fastify', port: 0, received: 0, refusals: [400, 401, 413], close: async () => {} };
  const app = Fastify({ serverFactory: (listener) => createServer({ maxHeaderSize: MAX_HEADER_SIZE }, listener) });
  app.register(async (scope) => {
    await scope.register(verifyPlugin, { secret: SECRET, bodyLimit: LIMIT });
    scope.post('/webhooks/svc', async (_request, reply) => {
      fastifyTarget.received++;
      return reply.code(204).send();
    });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  fastifyTarget.port = (app.server.address() as AddressInfo).port;
  fastifyTarget.close = () => app.close();

  targets.push(express, fetchTarget, fastifyTarget);
});

afterAll(async () => {
  await Promise.all(targets.map((t) => t.close()));
});

describe.each(['express', 'fetch', 'fastify'])('%s adapter under hostile requests', (name) => {
  const target = () => targets.find((t) => t.name === name)!;

  it('refuses every hostile request with 400/401/413 (never a 5xx, never the route) and still accepts the next good delivery', async () => {
    await fc.assert(
      fc.asyncProperty(hostileArb, async (raw) => {
        const t = target();
        const before = t.received;
        expectRefused(await send(t.port, raw), raw.sent, t.refusals);
        expect(t.received).toBe(before);
        const good = await send(t.port, { headers: [...signed(BODY), ['content-type', 'application/json']], body: BODY, framing: 'exact' });
        expect(good.status, good.text.slice(0, 300)).toBe(204);
        expect(t.received).toBe(before + 1);
      }),
      { seed: SEED + 10, numRuns: 40 },
    );
  });

  it('accepts a good delivery in hostile clothes: odd-case names, the signature header sent twice among junk, chunked, at the limit, a content-type that lies', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(BODY, Buffer.alloc(LIMIT, 0x20), Buffer.alloc(0), Buffer.from([0xc3, 0x28, 0xff])),
        fc.integer({ min: 0, max: 2 }),
        fc.boolean(),
        fc.constantFrom<Raw['framing']>('exact', 'chunked'),
        fc.constantFrom(...CONTENT_TYPES),
        fc.constantFrom('é', 'whd_1', 'x'.repeat(100_000)),
        async (body, caseMode, twice, framing, contentType, id) => {
          const t = target();
          const [[, idValue], timestamp, [, signature]] = signed(body, { id });
          const headers: Array<[string, string | Buffer]> = [
            [oddCase('webhook-id', caseMode), Buffer.from(idValue, 'latin1')],
            [oddCase(timestamp[0], caseMode), timestamp[1]],
          ];
          const junk = `v1,${'A'.repeat(43)}= v2,x`;
          if (twice) headers.push([oddCase('webhook-signature', caseMode), signature], [oddCase('webhook-signature', caseMode), junk]);
          else headers.push([oddCase('webhook-signature', caseMode), `${junk} ${signature}`]);
          if (contentType !== '') headers.push(['content-type', contentType]);
          const answer = await send(t.port, { headers, body, framing });
          // Signed and verified; an empty or non-JSON body is then an unusable payload (400), never a signature refusal.
          const payload = body === BODY;
          expect(answer.status, answer.text.slice(0, 300)).toBe(payload ? 204 : 400);
          if (answer.status === 400) expect(answer.text).toContain('invalid_payload');
        },
      ),
      { seed: SEED + 11, numRuns: 40 },
    );
  });
});
