import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterEach, describe, expect, it } from 'vitest';
import { builds, samplePayload } from '../test/support.js';
import { verifyMiddleware } from './express.js';
import { verifyPlugin } from './fastify.js';
import { createWebhookHandler } from './fetch.js';
import { createDeduper, DUPLICATE_HEADER } from './index.js';
import { deliveryId } from './deduper.js';

// A receiver moved from Svix: Svix sends svix-id, svix-timestamp and svix-signature, which the `svix` library reads
// (before webhook-*, each on its own); its tests sign with `svix` and send those names. @svc/verify reads them too.
const BODY = JSON.stringify(samplePayload);
const ID = 'msg_2mOn0VxKfLbSTOHL5o9NE2wHRj5';

function svixSigned(secret: string, timestamp = Math.floor(Date.now() / 1000), id = ID): Record<string, string> {
  return {
    'svix-id': id,
    'svix-timestamp': String(timestamp),
    'svix-signature': new SvixWebhook(secret).sign(id, new Date(timestamp * 1000), BODY),
  };
}

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

describe.each(builds)('svix-* headers ($name build)', ({ verifyWebhook, constructWebhookEvent, signWebhook }) => {
  it('verifies what the svix library signed under the svix-* names, and refuses it under another secret or stale', async () => {
    const secret = newSecret();
    const headers = svixSigned(secret);
    expect(await verifyWebhook(BODY, headers, secret)).toBe(true);
    expect(await verifyWebhook(BODY, new Headers(headers), secret)).toBe(true);
    expect(await constructWebhookEvent(BODY, headers, secret)).toEqual(samplePayload);
    expect(await verifyWebhook(BODY, headers, newSecret())).toBe(false);
    const stale = svixSigned(secret, Math.floor(Date.now() / 1000) - 301);
    await expect(Promise.resolve().then(() => constructWebhookEvent(BODY, stale, secret))).rejects.toMatchObject({ code: 'timestamp_out_of_range' });
  });

  it('signs what svix and standardwebhooks verify, under either name; a rotated pair in one header included', async () => {
    const [current, previous] = [newSecret(), newSecret()];
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = await signWebhook(BODY, { id: ID, timestamp }, [current, previous]);
    const svixNames = { 'svix-id': ID, 'svix-timestamp': String(timestamp), 'svix-signature': signature };
    const standardNames = { 'webhook-id': ID, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature };
    for (const secret of [current, previous]) {
      expect(new SvixWebhook(secret).verify(BODY, svixNames)).toEqual(samplePayload);
      expect(new SvixWebhook(secret).verify(BODY, standardNames)).toEqual(samplePayload);
      expect(new StandardWebhook(secret).verify(BODY, standardNames)).toEqual(samplePayload);
      expect(await verifyWebhook(BODY, svixNames, secret)).toBe(true);
    }
  });

  it('names the missing header when a svix-* set is incomplete', async () => {
    const secret = newSecret();
    const { 'svix-timestamp': _, ...noTimestamp } = svixSigned(secret);
    await expect(Promise.resolve().then(() => constructWebhookEvent(BODY, noTimestamp, secret))).rejects.toMatchObject({
      code: 'missing_signature',
      message: 'Missing webhook-timestamp header.',
    });
  });
});

describe('deliveryId', () => {
  it('is svix-id when the delivery has no webhook-id, so a receiver moved from Svix de-duplicates its retries', () => {
    expect(deliveryId({ 'svix-id': ID })).toBe(ID);
    expect(deliveryId(new Headers({ 'svix-id': ID, 'x-svc-delivery': 'whd_other' }))).toBe(ID);
    expect(deliveryId({ 'webhook-id': 'whd_a', 'svix-id': ID })).toBe('whd_a');
  });
});

describe('adapters with svix-* headers', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.close();
    if (server) await once(server, 'close');
    server = undefined;
  });

  const post = (url: string, headers: Record<string, string>) =>
    fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...headers } });

  it('Express verifyMiddleware accepts a delivery signed by svix, and a second one with the same svix-id is a duplicate', async () => {
    const secret = newSecret();
    const app = express();
    const received: unknown[] = [];
    app.post('/hooks', verifyMiddleware({ secret, dedupe: createDeduper() }), (req, res) => {
      received.push(req.svcEvent);
      res.sendStatus(204);
    });
    server = createServer(app).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    expect((await post(url, svixSigned(secret))).status).toBe(204);
    const again = await post(url, svixSigned(secret));
    expect(again.status).toBe(200);
    expect(again.headers.get(DUPLICATE_HEADER)).toBe('true');
    expect(received).toEqual([samplePayload]);
  });

  it('Fastify verifyPlugin and the Fetch handler accept a delivery signed by svix', async () => {
    const secret = newSecret();
    const app = Fastify();
    await app.register(verifyPlugin, { secret });
    app.post('/hooks', async (request, reply) => reply.code(204).send());
    try {
      const res = await app.inject({ method: 'POST', url: '/hooks', payload: BODY, headers: { 'content-type': 'application/json', ...svixSigned(secret) } });
      expect(res.statusCode).toBe(204);
    } finally {
      await app.close();
    }
    const handler = createWebhookHandler({ secret }, (event) => Response.json(event));
    const res = await handler(new Request('http://receiver/hooks', { method: 'POST', body: BODY, headers: svixSigned(secret) }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(samplePayload);
  });
});
