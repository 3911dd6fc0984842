import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { samplePayload } from '../test/support.js';
import { verifyMiddleware } from './express.js';
import { verifyPlugin } from './fastify.js';
import { createWebhookHandler } from './fetch.js';
import { createDeduper, signWebhook } from './index.js';

/**
 * `X-Svc-Signature` has no timestamp and `X-Svc-Delivery` is not signed: a delivery captured once, sent again
 * without its Standard Webhooks headers and with a new delivery id, passed every adapter's signature check and
 * its `dedupe` (found by a review: the handler ran three times for one delivery). The adapters now require
 * `webhook-signature` unless `allowUntimestamped` says otherwise.
 */

const SECRET = 'whsec_untimestamped';
const BODY = JSON.stringify(samplePayload);
const xSvc = (body: string) => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

/** A delivery as svc sends it: both signatures, signed an hour ago (so its own timestamp is refused). */
function captured(id = 'whd_captured') {
  const timestamp = Math.floor(Date.now() / 1000) - 3600;
  return {
    'content-type': 'application/json',
    'x-svc-delivery': id,
    'x-svc-signature': xSvc(BODY),
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(BODY, { id, timestamp }, SECRET),
  };
}

/** The same delivery replayed: only X-Svc-Signature kept, under a delivery id never seen. */
function replayed(n: number) {
  const { 'webhook-id': _i, 'webhook-timestamp': _t, 'webhook-signature': _s, ...rest } = captured();
  return { ...rest, 'x-svc-delivery': `whd_forged_${n}` };
}

let server: Server | undefined;
afterEach(async () => {
  server?.close();
  if (server) await once(server, 'close');
  server = undefined;
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

const post = (url: string, headers: Record<string, string>) => fetch(url, { method: 'POST', body: BODY, headers });

/** Each adapter with `dedupe`, counting what reaches the handler. */
const adapters: Array<[string, (handled: { n: number }, options?: { allowUntimestamped?: boolean }) => Promise<{ url: string; close?: () => Promise<void> }>]> = [
  [
    'Express',
    async (handled, options = {}) => {
      const app = express();
      app.post('/hook', verifyMiddleware({ secret: SECRET, dedupe: createDeduper(), ...options }), (_req, res) => {
        handled.n++;
        res.sendStatus(204);
      });
      return { url: await serve(app) };
    },
  ],
  [
    'Fastify',
    async (handled, options = {}) => {
      const app = Fastify();
      await app.register(async (scope) => {
        await scope.register(verifyPlugin, { secret: SECRET, dedupe: createDeduper(), ...options });
        scope.post('/hook', async (_req, reply) => {
          handled.n++;
          return reply.code(204).send();
        });
      });
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      return { url: `${address}/hook`, close: () => app.close() };
    },
  ],
  [
    'Fetch',
    async (handled, options = {}) => {
      const handle = createWebhookHandler({ secret: SECRET, dedupe: createDeduper(), ...options }, () => {
        handled.n++;
        return new Response(null, { status: 204 });
      });
      return {
        url: await serve(async (req, res) => {
          const chunks: Buffer[] = [];
          for await (const chunk of req) chunks.push(chunk as Buffer);
          const headers = new Headers();
          for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(name, value);
          const answer = await handle(new Request(`http://127.0.0.1${req.url}`, { method: 'POST', headers, body: Buffer.concat(chunks) }));
          res.writeHead(answer.status, Object.fromEntries(answer.headers)).end(Buffer.from(await answer.arrayBuffer()));
        }),
      };
    },
  ],
];

describe.each(adapters)('%s adapter: a delivery signed only with X-Svc-Signature', (_name, start) => {
  it('is refused by default (401 missing_signature, saying why), so a captured delivery cannot be replayed under new ids', async () => {
    const handled = { n: 0 };
    const { url, close } = await start(handled);
    try {
      expect((await post(url, captured())).status).toBe(400); // its own timestamp is an hour old
      for (const n of [1, 2, 3]) {
        const res = await post(url, replayed(n));
        expect(res.status).toBe(401);
        const body = (await res.json()) as { error: { code: string; message: string } };
        expect(body.error.code).toBe('missing_signature');
        expect(body.error.message).toContain('X-Svc-Signature alone carries no timestamp');
      }
      expect(handled.n).toBe(0);
    } finally {
      await close?.();
    }
  });

  it('without any signature header: 401 missing_signature naming every header it looked for, and where to set a secret', async () => {
    const handled = { n: 0 };
    const { url, close } = await start(handled);
    try {
      const res = await post(url, { 'content-type': 'application/json' });
      expect(res.status).toBe(401);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('missing_signature');
      expect(body.error.message).toMatch(/^Missing webhook-id, webhook-timestamp and webhook-signature headers \(and X-Svc-Signature\): svc signs a delivery only when its API key has a signing secret/);
      expect(body.error.message).toContain('svc-server keys update KEY --signing-secret');
      expect(handled.n).toBe(0);
    } finally {
      await close?.();
    }
  });

  it('is accepted with allowUntimestamped: true (a sender that signs only X-Svc-Signature)', async () => {
    const handled = { n: 0 };
    const { url, close } = await start(handled, { allowUntimestamped: true });
    try {
      expect((await post(url, replayed(1))).status).toBe(204);
      expect(handled.n).toBe(1);
    } finally {
      await close?.();
    }
  });
});
