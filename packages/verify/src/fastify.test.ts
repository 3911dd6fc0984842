import { createHmac } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { samplePayload, slowFirstClaimStore } from '../test/support.js';
import { verifyPlugin, type AuditPayload, type VerifyPluginOptions } from './fastify.js';
import { createDeduper, signWebhook } from './index.js';

const SECRET = 'whsec_fastify';
const BODY = JSON.stringify(samplePayload);
const hmac = (body: string | Buffer, secret = SECRET) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

let app: FastifyInstance | undefined;
afterEach(async () => {
  // After a test aborts a fetch (svc giving up), fetch's pool opens a fresh connection that sends nothing: close()
  // would wait for it until the pool drops it, 4 s later. It carries no request, so it is closed at once.
  const closing = app?.close();
  app?.server.closeAllConnections();
  await closing;
  app = undefined;
});

/** The receiver from the README's Fastify section, next to an ordinary JSON route. */
async function receiver(options: Partial<VerifyPluginOptions> = {}) {
  const received: AuditPayload[] = [];
  app = Fastify();
  app.register(async (scope) => {
    await scope.register(verifyPlugin, { secret: SECRET, allowUntimestamped: true, ...options });
    scope.post('/webhooks/svc', async (request, reply) => {
      expect(request.body).toBe(request.svcEvent);
      received.push(request.svcEvent!);
      return reply.code(204).send();
    });
  });
  app.post('/api/echo', async (request) => request.body);
  await app.ready();
  return { app, received };
}

const standard = (body: string, secret: string, timestamp = Math.floor(Date.now() / 1000), id = 'whd_standard') => ({
  'webhook-id': id,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signWebhook(body, { id, timestamp }, secret),
});

const deliver = (body: string | Buffer, headers: Record<string, string> = {}) =>
  app!.inject({ method: 'POST', url: '/webhooks/svc', payload: body, headers: { 'content-type': 'application/json', ...headers } });

describe('verifyPlugin with Fastify', () => {
  it('verifies the Standard Webhooks headers when the delivery carries them, and refuses a stale webhook-timestamp', async () => {
    const { received } = await receiver();
    expect((await deliver(BODY, standard(BODY, SECRET))).statusCode).toBe(204);
    expect(received).toEqual([samplePayload]);
    const stale = await deliver(BODY, standard(BODY, SECRET, Math.floor(Date.now() / 1000) - 600));
    expect(stale.statusCode).toBe(400);
    expect(stale.json().error.code).toBe('timestamp_out_of_range');
  });

  it("a route with a body schema validates the verified event, not the raw bytes (every delivery was a 400 'body must have required property')", async () => {
    app = Fastify();
    const received: AuditPayload[] = [];
    app.register(async (scope) => {
      await scope.register(verifyPlugin, { secret: SECRET });
      const schema = { body: { type: 'object', required: ['event', 'request_id'], properties: { request_id: { type: 'string', minLength: 1 } } } };
      scope.post('/webhooks/svc', { schema }, async (request, reply) => {
        received.push(request.svcEvent!);
        return reply.code(204).send();
      });
    });
    const good = await deliver(BODY, standard(BODY, SECRET));
    expect(good.statusCode, good.body).toBe(204);
    expect(received).toEqual([samplePayload]);
    // Verification still comes first: a forged delivery is a 401, not a schema error.
    expect((await deliver(BODY, standard(BODY, 'whsec_other'))).json().error.code).toBe('signature_mismatch');
  });

  it('accepts a signed delivery over a real socket, and leaves JSON parsing of other routes alone', async () => {
    const { received } = await receiver();
    const base = await app!.listen({ port: 0, host: '127.0.0.1' });
    const body = Buffer.from(JSON.stringify({ ...samplePayload, prompt: 'user: 中文' }, null, 2));
    const res = await fetch(`${base}/webhooks/svc`, { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-svc-signature': hmac(body) } });
    expect(res.status).toBe(204);
    expect(received[0]?.prompt).toBe('user: 中文');

    const echo = await fetch(`${base}/api/echo`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(await echo.json()).toEqual({ a: 1 });
  });

  it.each([
    [{}, BODY, 401, 'missing_signature'],
    [{ 'x-svc-signature': hmac(BODY).toUpperCase() }, BODY, 401, 'malformed_signature'],
    [{ 'x-svc-signature': hmac(BODY, 'whsec_wrong') }, BODY, 401, 'signature_mismatch'],
    [{ 'x-svc-signature': hmac('{"a":1}') }, '{"a":1}', 400, 'invalid_payload'],
  ])('answers %j with status and svc error body', async (headers, body, status, code) => {
    const { received } = await receiver();
    const res = await deliver(body, headers);
    expect(res.statusCode).toBe(status);
    expect(res.json()).toEqual({
      error: { message: expect.any(String), type: status === 401 ? 'authentication_error' : 'invalid_request_error', code, param: null },
    });
    expect(received).toEqual([]);
  });

  it('treats a request without a body as the empty body', async () => {
    await receiver();
    const res = await app!.inject({ method: 'POST', url: '/webhooks/svc', headers: { 'x-svc-signature': hmac('') } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('invalid_payload');
  });

  it('rotates secrets and applies toleranceSeconds', async () => {
    await receiver({ secret: ['whsec_new', SECRET], toleranceSeconds: 60 });
    const res = await deliver(BODY, { 'x-svc-signature': hmac(BODY) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('timestamp_out_of_range');
  });

  it('answers 413 above bodyLimit', async () => {
    await receiver({ bodyLimit: 100 });
    expect((await deliver(BODY, { 'x-svc-signature': hmac(BODY) })).statusCode).toBe(413);
  });

  it('verifies a text/plain body as its UTF-8 bytes', async () => {
    await receiver();
    const res = await app!.inject({ method: 'POST', url: '/webhooks/svc', payload: 'x', headers: { 'content-type': 'text/plain', 'x-svc-signature': hmac('x') } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('invalid_payload');
  });

  it("keeps the bytes of a type the app parses outside the scope (a form parser at its root, as @fastify/formbody registers): verified, not a 500", async () => {
    app = Fastify();
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => done(null, { body }));
    const received: AuditPayload[] = [];
    app.register(async (scope) => {
      await scope.register(verifyPlugin, { secret: SECRET, allowUntimestamped: true });
      scope.post('/webhooks/svc', async (request, reply) => {
        received.push(request.svcEvent!);
        return reply.code(204).send();
      });
    });
    app.post('/form', async (request) => request.body);
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expect((await deliver(BODY, { ...form, 'x-svc-signature': hmac(BODY) })).statusCode).toBe(204);
    expect(received).toEqual([samplePayload]);
    const unsigned = await deliver('a=1', form);
    expect(unsigned.statusCode).toBe(401);
    // Outside the scope the app's parser still parses.
    expect((await app.inject({ method: 'POST', url: '/form', payload: 'a=1', headers: form })).json()).toEqual({ body: 'a=1' });
  });

  it('reports misuse (a body another parser turned into an object: one the scope adds after the plugin) as a 500 that explains the raw body', async () => {
    app = Fastify();
    app.register(async (scope) => {
      await scope.register(verifyPlugin, { secret: SECRET, allowUntimestamped: true });
      scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => done(null, { body }));
      scope.post('/webhooks/svc', async (_request, reply) => reply.code(204).send());
    });
    const res = await app!.inject({
      method: 'POST',
      url: '/webhooks/svc',
      payload: 'a=1',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-svc-signature': hmac('a=1') },
    });
    expect(res.statusCode).toBe(500);
    expect(res.json().message).toMatch(/rawBody must be the raw request body, got object/);
  });

  it('rejects bad options when registered', async () => {
    app = Fastify();
    app.register(verifyPlugin, { secret: '' });
    await expect(app.ready()).rejects.toThrow(TypeError);
  });

  it.each([-1, 0, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1048576', null])('rejects bodyLimit %s when registered, like the other options', async (bodyLimit) => {
    // Were taken as they came: NaN, Infinity, 0 and '1048576' left bodies unlimited, -1 and 1.5 refused every body (413).
    app = Fastify();
    app.register(verifyPlugin, { secret: SECRET, bodyLimit: bodyLimit as number });
    await expect(app.ready()).rejects.toThrow(new TypeError('[@svc/verify] bodyLimit must be a positive whole number of bytes.'));
  });

  it('accepts a bodyLimit of a whole number of bytes and answers 413 above it', async () => {
    app = Fastify();
    app.register(async (scope) => {
      await scope.register(verifyPlugin, { secret: SECRET, bodyLimit: BODY.length - 1 });
      scope.post('/webhooks/svc', async (_request, reply) => reply.code(204).send());
    });
    const res = await app.inject({ method: 'POST', url: '/webhooks/svc', payload: BODY, headers: { 'content-type': 'application/json', 'x-svc-signature': hmac(BODY) } });
    expect(res.statusCode).toBe(413);
  });
});

describe('verifyPlugin with dedupe', () => {
  const signed = (id: string) => ({ ...standard(BODY, SECRET, undefined, id), 'x-svc-signature': hmac(BODY) });

  async function deduping(route: (reply: import('fastify').FastifyReply) => Promise<unknown>, options: Partial<VerifyPluginOptions> = {}) {
    let handled = 0;
    app = Fastify();
    app.register(async (scope) => {
      await scope.register(verifyPlugin, { secret: SECRET, allowUntimestamped: true, dedupe: createDeduper(), ...options });
      scope.post('/webhooks/svc', async (_request, reply) => {
        handled += 1;
        return route(reply);
      });
    });
    await app.ready();
    return { handled: () => handled };
  }

  it('processes one of two concurrent deliveries with the same id; the other, still in flight, gets 409; once done, 200 and svc-duplicate: true', async () => {
    const { handled } = await deduping(async (reply) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return reply.code(204).send();
    });
    const responses = await Promise.all([deliver(BODY, signed('whd_1')), deliver(BODY, signed('whd_1'))]);
    expect(responses.map((r) => r.statusCode).sort()).toEqual([204, 409]);
    const inFlight = responses.find((r) => r.statusCode === 409)!;
    expect(inFlight.headers['retry-after']).toBe('30');
    expect(inFlight.json()).toEqual({ in_progress: true });
    expect(handled()).toBe(1);
    const duplicate = await deliver(BODY, signed('whd_1'));
    expect(duplicate.statusCode).toBe(200);
    expect(duplicate.headers['svc-duplicate']).toBe('true');
    expect(duplicate.json()).toEqual({ duplicate: true });
    // Without an id there is nothing to de-duplicate on: processed.
    expect((await deliver(BODY, { 'x-svc-signature': hmac(BODY) })).statusCode).toBe(204);
    expect(handled()).toBe(2);
  });

  it('releases the id when the route fails, so svc\'s retry is processed', async () => {
    let attempt = 0;
    const { handled } = await deduping(async (reply) => {
      attempt += 1;
      if (attempt === 1) throw new Error('database down');
      return reply.code(204).send();
    });
    expect((await deliver(BODY, signed('whd_1'))).statusCode).toBe(500);
    expect((await deliver(BODY, signed('whd_1'))).statusCode).toBe(204);
    expect((await deliver(BODY, signed('whd_1'))).headers['svc-duplicate']).toBe('true');
    expect(handled()).toBe(2);
  });

  it('lets a route that answers after svc hung up (its timeout) decide: after a 2xx the retry is a duplicate, after a 500 it is processed', async () => {
    const route = new EventEmitter();
    const statuses = [204, 500];
    const { handled } = await deduping(async (reply) => {
      if (statuses.length === 0) return reply.code(204).send();
      route.emit('started');
      await once(reply.raw, 'close'); // svc stopped waiting: a slow route, still at work
      await reply.code(statuses.shift()!).send();
      route.emit('answered');
    });
    const url = `${await app!.listen({ port: 0, host: '127.0.0.1' })}/webhooks/svc`;
    for (const id of ['whd_slow_ok', 'whd_slow_failed']) {
      const svcGivesUp = new AbortController();
      const started = once(route, 'started');
      const attempt = fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...signed(id) }, signal: svcGivesUp.signal });
      await started;
      // A retry while the first copy is still at work: not processed alongside it.
      expect((await deliver(BODY, signed(id))).statusCode).toBe(409);
      const answered = once(route, 'answered');
      svcGivesUp.abort();
      await expect(attempt).rejects.toThrow();
      await answered;
    }
    const afterOk = await deliver(BODY, signed('whd_slow_ok'));
    expect([afterOk.statusCode, afterOk.headers['svc-duplicate']]).toEqual([200, 'true']);
    expect((await deliver(BODY, signed('whd_slow_failed'))).statusCode).toBe(204);
    expect(handled()).toBe(3);
  });

  it('keeps the id of a route slower than svc\'s timeout for the grace period: svc\'s retry meanwhile gets 409, the route runs once, its 2xx makes later retries duplicates', async () => {
    const route = new EventEmitter();
    let answer: () => void = () => {};
    const { handled } = await deduping(async (reply) => {
      if (handled() > 1) return reply.code(204).send(); // a second processing of the delivery
      reply.raw.on('close', () => route.emit('closed'));
      route.emit('started');
      await new Promise<void>((resolve) => (answer = resolve)); // still at work when svc hangs up
      await reply.code(204).send();
      route.emit('answered');
    });
    const url = `${await app!.listen({ port: 0, host: '127.0.0.1' })}/webhooks/svc`;
    const svcGivesUp = new AbortController();
    const started = once(route, 'started');
    const attempt = fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...signed('whd_slow') }, signal: svcGivesUp.signal });
    await started;
    const closed = once(route, 'closed');
    svcGivesUp.abort();
    await expect(attempt).rejects.toThrow();
    await closed;
    // svc's retry (5 s after its 10 s timeout) while the route is still at work: not processed alongside it.
    const retry = await deliver(BODY, signed('whd_slow'));
    expect([retry.statusCode, retry.headers['retry-after']]).toEqual([409, '30']);
    const answered = once(route, 'answered');
    answer();
    await answered;
    const later = await deliver(BODY, signed('whd_slow'));
    expect([later.statusCode, later.headers['svc-duplicate']]).toEqual([200, 'true']);
    expect(handled()).toBe(1);
  });

  it('releases the id of a route that never answers once the grace period after svc hung up has passed: the retry is processed, not answered 409 until the TTL', async () => {
    const route = new EventEmitter();
    const seen = new Set<string>();
    const store = { setIfAbsent: (id: string) => !seen.has(id) && !!seen.add(id), delete: (id: string) => void (seen.delete(id) && route.emit('released')) };
    const { handled } = await deduping(async (reply) => {
      if (handled() > 1) return reply.code(204).send();
      reply.raw.on('close', () => route.emit('closed'));
      route.emit('started');
      return new Promise(() => {}); // no answer, ever
    }, { dedupe: createDeduper({ store }), dropGraceMs: 20 });
    const url = `${await app!.listen({ port: 0, host: '127.0.0.1' })}/webhooks/svc`;
    const svcGivesUp = new AbortController();
    const started = once(route, 'started');
    const attempt = fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...signed('whd_hung') }, signal: svcGivesUp.signal });
    await started;
    expect((await deliver(BODY, signed('whd_hung'))).statusCode).toBe(409);
    const closed = once(route, 'closed');
    const released = once(route, 'released');
    svcGivesUp.abort();
    await expect(attempt).rejects.toThrow();
    await closed;
    await released;
    expect((await deliver(BODY, signed('whd_hung'))).statusCode).toBe(204);
    expect((await deliver(BODY, signed('whd_hung'))).headers['svc-duplicate']).toBe('true');
    expect(handled()).toBe(2);
  });

  it('releases the id when svc hung up while the store was still claiming it', async () => {
    const connection = new EventEmitter();
    // The first claim waits until svc has gone; the others answer at once.
    const { store, seen, finishClaim } = slowFirstClaimStore(connection);
    let handled = 0;
    app = Fastify();
    app.addHook('onRequest', async (_request, reply) => {
      reply.raw.on('close', () => connection.emit('closed'));
    });
    app.register(async (scope) => {
      await scope.register(verifyPlugin, { secret: SECRET, allowUntimestamped: true, dedupe: createDeduper({ store }), dropGraceMs: 20 });
      scope.post('/webhooks/svc', async (_request, reply) => {
        handled += 1;
        if (handled > 1) return reply.code(204).send();
        connection.emit('routed');
        return new Promise(() => {}); // its client is gone: no answer
      });
    });
    const url = `${await app.listen({ port: 0, host: '127.0.0.1' })}/webhooks/svc`;
    const svcGivesUp = new AbortController();
    const attempt = fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...signed('whd_slow_store') }, signal: svcGivesUp.signal });
    await expect.poll(() => seen.size).toBe(1);
    const closed = once(connection, 'closed');
    svcGivesUp.abort();
    await expect(attempt).rejects.toThrow();
    await closed;
    const routed = once(connection, 'routed');
    const released = once(connection, 'released');
    finishClaim();
    await routed;
    await released;
    expect((await deliver(BODY, signed('whd_slow_store'))).statusCode).toBe(204);
    expect(handled).toBe(2);
  });

  it('rejects a dedupe that is not a deduper when registered', async () => {
    app = Fastify();
    // @ts-expect-error misuse on purpose
    app.register(verifyPlugin, { secret: SECRET, dedupe: {} });
    await expect(app.ready()).rejects.toThrow(/createDeduper/);
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, '60000', null])('rejects dropGraceMs %s when registered', async (dropGraceMs) => {
    app = Fastify();
    app.register(verifyPlugin, { secret: SECRET, dedupe: createDeduper(), dropGraceMs: dropGraceMs as number });
    await expect(app.ready()).rejects.toThrow(new TypeError('[@svc/verify] dropGraceMs must be a positive number of milliseconds.'));
  });
});
