import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bodyParser } from '@koa/bodyparser';
import Koa from 'koa';
import { afterEach, describe, expect, it } from 'vitest';
import { samplePayload } from '../test/support.js';
import { constructWebhookEvent, errorBody, signWebhook, WebhookVerificationError, type AuditPayload } from './index.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

let server: Server | undefined;
afterEach(async () => {
  server?.close();
  // fetch's pool keeps the connection of a refused delivery (its body unread) open, and the server does not count it
  // idle: close() waited ~3 s for the pool to drop it. Nothing is asserted after a test, so it is closed at once.
  server?.closeAllConnections();
  if (server) await once(server, 'close');
  server = undefined;
});

/** The README's Koa receiver; `parsed` passes ctx.request.body instead, the usual mistake. */
async function koaReceiver(received: AuditPayload[], parsed = false, errors: unknown[] = [], options: Parameters<typeof bodyParser>[0] = { jsonLimit: '64mb' }): Promise<string> {
  const app = new Koa();
  app.on('error', (err: unknown) => errors.push(err));
  app.use(bodyParser(options)); // the rest of the API parses JSON; it keeps the text as ctx.request.rawBody
  app.use(async (ctx) => {
    try {
      const event = constructWebhookEvent(parsed ? (ctx.request.body as string) : ctx.request.rawBody, ctx.request.headers, SECRET);
      received.push(event);
      ctx.status = 204;
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) throw err;
      ctx.status = err.status;
      ctx.body = errorBody(err);
    }
  });
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/svc`;
}

function deliver(url: string, body: string, secret = SECRET): Promise<Response> {
  const id = 'whd_koa';
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signWebhook(body, { id, timestamp }, secret) };
  return fetch(url, { method: 'POST', headers, body });
}

describe('a Koa receiver (README)', () => {
  it("verifies @koa/bodyparser's ctx.request.rawBody, non-ASCII and a JSON layout no re-serialisation keeps", async () => {
    const received: AuditPayload[] = [];
    const url = await koaReceiver(received);
    const body = JSON.stringify({ ...samplePayload, response_text: 'Café ☕' }, null, 1);
    expect((await deliver(url, body)).status).toBe(204);
    expect(received).toEqual([JSON.parse(body)]);
    const wrong = await deliver(url, body, 'whsec_other');
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as ReturnType<typeof errorBody>).error.code).toBe('signature_mismatch');
  });

  it("takes a delivery of a 2 MB prompt with the README's jsonLimit; @koa/bodyparser's 1 MB default answers 413", async () => {
    const big = JSON.stringify({ ...samplePayload, prompt: 'user: ' + 'Quarterly report, page after page. '.repeat(60_000) });
    const received: AuditPayload[] = [];
    expect((await deliver(await koaReceiver(received), big)).status).toBe(204);
    expect(received).toHaveLength(1);
    server!.close();
    await once(server!, 'close');
    expect((await deliver(await koaReceiver([], false, [], {}), big)).status).toBe(413);
  });

  it('passing the parsed ctx.request.body is a TypeError that names ctx.request.rawBody', async () => {
    const errors: unknown[] = [];
    const url = await koaReceiver([], true, errors);
    expect((await deliver(url, JSON.stringify(samplePayload))).status).toBe(500);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(TypeError);
    expect((errors[0] as Error).message).toMatch(/got object\. .*Koa with @koa\/bodyparser: ctx\.request\.rawBody/);
  });
});
