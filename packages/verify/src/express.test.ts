import { createHmac } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInNewContext } from 'node:vm';
import express, { type Express } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { samplePayload, slowFirstClaimStore } from '../test/support.js';
import { verifyMiddleware, type AuditPayload } from './express.js';
import { createDeduper, signWebhook, verifyWebhook } from './index.js';

const SECRET = 'whsec_express';
const BODY = JSON.stringify(samplePayload);
const hmac = (body: string | Buffer, secret = SECRET) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

let server: Server | undefined;
afterEach(async () => {
  server?.close();
  if (server) await once(server, 'close');
  server = undefined;
});

async function listen(app: Express | RequestListener): Promise<string> {
  server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/svc`;
}

const standard = (body: string, secret: string, timestamp = Math.floor(Date.now() / 1000), id = 'whd_standard') => ({
  'webhook-id': id,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signWebhook(body, { id, timestamp }, secret),
});

const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

const post = (url: string, body: string | Buffer, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

function receiver(setup?: (app: Express) => void, options: Partial<Parameters<typeof verifyMiddleware>[0]> = {}) {
  const app = express();
  const received: AuditPayload[] = [];
  setup?.(app);
  app.post('/webhooks/svc', verifyMiddleware({ secret: SECRET, allowUntimestamped: true, ...options }), (req, res) => {
    expect(req.body).toBe(req.svcEvent);
    received.push(req.svcEvent!);
    res.sendStatus(204);
  });
  return { app, received };
}

describe('verifyMiddleware with Express', () => {
  it('verifies the Standard Webhooks headers when the delivery carries them, and refuses a stale webhook-timestamp', async () => {
    const { app, received } = receiver();
    const url = await listen(app);
    expect((await post(url, BODY, standard(BODY, SECRET))).status).toBe(204);
    expect(received).toEqual([samplePayload]);
    const stale = await post(url, BODY, standard(BODY, SECRET, Math.floor(Date.now() / 1000) - 600));
    expect(stale.status).toBe(400);
    expect(await errorCode(stale)).toBe('timestamp_out_of_range');
    const wrong = await post(url, BODY, { ...standard(BODY, 'whsec_other'), 'x-svc-signature': hmac(BODY) });
    expect(wrong.status).toBe(401);
  });

  it('accepts a signed delivery and hands the typed payload to the route', async () => {
    const { app, received } = receiver();
    const res = await post(await listen(app), BODY, { 'x-svc-signature': hmac(BODY) });
    expect(res.status).toBe(204);
    expect(received).toEqual([samplePayload]);
  });

  it('verifies the exact bytes, non-ASCII included, whatever the JSON formatting', async () => {
    const { app, received } = receiver();
    const body = Buffer.from(JSON.stringify({ ...samplePayload, prompt: 'user: Ça va? 中文 🚀' }, null, 2));
    const res = await post(await listen(app), body, { 'x-svc-signature': hmac(body) });
    expect(res.status).toBe(204);
    expect(received[0]?.prompt).toBe('user: Ça va? 中文 🚀');
  });

  it('answers untrusted deliveries with 401/400 and svc\'s error body, never reaching the route', async () => {
    const { app, received } = receiver(undefined, { secret: ['whsec_new', SECRET] });
    const url = await listen(app);
    const cases: Array<[Record<string, string>, string, number, string]> = [
      [{}, BODY, 401, 'missing_signature'],
      [{ 'x-svc-signature': 'sha256=abc' }, BODY, 401, 'malformed_signature'],
      [{ 'x-svc-signature': hmac(BODY, 'whsec_old') }, BODY, 401, 'signature_mismatch'],
      [{ 'x-svc-signature': hmac('{}') }, '{}', 400, 'invalid_payload'],
    ];
    for (const [headers, body, status, code] of cases) {
      const res = await post(url, body, headers);
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({
        error: { message: expect.any(String), type: status === 401 ? 'authentication_error' : 'invalid_request_error', code, param: null },
      });
    }
    expect(received).toEqual([]);
  });

  it('rejects a duplicated signature header (node joins the values)', async () => {
    const { app } = receiver();
    const url = await listen(app);
    const res = await fetch(url, {
      method: 'POST',
      body: BODY,
      headers: [['x-svc-signature', hmac(BODY)], ['x-svc-signature', hmac(BODY)]],
    });
    expect(res.status).toBe(401);
    expect(await errorCode(res)).toBe('malformed_signature');
  });

  it('applies toleranceSeconds', async () => {
    const { app } = receiver(undefined, { toleranceSeconds: 60 });
    const res = await post(await listen(app), BODY, { 'x-svc-signature': hmac(BODY) });
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe('timestamp_out_of_range');
  });

  it('answers 413 above the limit, by content-length or by counting a chunked body', async () => {
    const { app, received } = receiver(undefined, { limit: 100 });
    const url = await listen(app);
    const big = Buffer.alloc(5000, 'a');
    const declared = await post(url, big, { 'x-svc-signature': hmac(big) });
    expect(declared.status).toBe(413);
    expect(await errorCode(declared)).toBe('payload_too_large');

    const chunked = await fetch(url, {
      method: 'POST',
      headers: { 'x-svc-signature': hmac(big) },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 5; i++) controller.enqueue(big.subarray(i * 1000, (i + 1) * 1000));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(received).toEqual([]);
  });

  it('uses a Buffer body from express.raw() and a rawBody kept by express.json({ verify })', async () => {
    const raw = receiver((app) => app.use(express.raw({ type: 'application/json' })));
    expect((await post(await listen(raw.app), BODY, { 'x-svc-signature': hmac(BODY) })).status).toBe(204);
    expect(raw.received).toHaveLength(1);
    server!.close();
    await once(server!, 'close');

    const kept = receiver((app) =>
      app.use(express.json({ verify: (req, _res, buf) => Object.assign(req, { rawBody: buf }) })),
    );
    expect((await post(await listen(kept.app), BODY, { 'x-svc-signature': hmac(BODY) })).status).toBe(204);
    expect(kept.received).toEqual([samplePayload]);
  });

  it('uses a rawBody kept as a string (express.json({ verify }) with buf.toString()), which was refused as "bytes are gone"', async () => {
    const body = JSON.stringify({ ...samplePayload, response_text: 'Café – oui 👍' });
    const kept = receiver((app) =>
      app.use(express.json({ verify: (req, _res, buf) => Object.assign(req, { rawBody: buf.toString() }) })),
    );
    const url = await listen(kept.app);
    expect((await post(url, body, standard(body, SECRET))).status).toBe(204);
    expect(kept.received).toEqual([JSON.parse(body)]);
    const tampered = await post(url, body.replace('oui', 'non'), standard(body, SECRET));
    expect(tampered.status).toBe(401);
    expect(await errorCode(tampered)).toBe('signature_mismatch');
  });

  it("uses a Buffer body made in another realm, as express.raw()'s is under Jest (was a TypeError: the body is not a Uint8Array here)", async () => {
    const ForeignUint8Array = runInNewContext('Uint8Array') as Uint8ArrayConstructor;
    const foreign = receiver((app) =>
      app.use(express.raw({ type: 'application/json' }), (req, _res, next) => {
        req.body = new ForeignUint8Array(req.body as Buffer);
        next();
      }),
    );
    const url = await listen(foreign.app);
    expect((await post(url, BODY, standard(BODY, SECRET))).status).toBe(204);
    expect(foreign.received).toEqual([samplePayload]);
  });

  it("README's receiver without the middleware (express.raw with its limit) takes a delivery of a 300 KB prompt; body-parser's 100 KB default answers 413", async () => {
    const big = JSON.stringify({ ...samplePayload, prompt: 'user: ' + 'Quarterly report, page after page. '.repeat(9000) });
    const readme = (raw: express.RequestHandler) => {
      const app = express();
      app.post('/webhooks/svc', raw, (req, res) => void res.sendStatus(verifyWebhook(req.body as Buffer, req.headers, SECRET) ? 204 : 401));
      return app;
    };
    expect((await post(await listen(readme(express.raw({ type: 'application/json', limit: '64mb' }))), big, standard(big, SECRET))).status).toBe(204);
    server!.close();
    await once(server!, 'close');
    expect((await post(await listen(readme(express.raw({ type: 'application/json' }))), big, standard(big, SECRET))).status).toBe(413);
  });

  it('uses a string body from express.text(): the text is the delivery, non-ASCII included (was refused as "already parsed")', async () => {
    const body = JSON.stringify({ ...samplePayload, response_text: 'Café – oui 👍' });
    const text = receiver((app) => app.use(express.text({ type: '*/*' })));
    const url = await listen(text.app);
    expect((await post(url, body, standard(body, SECRET))).status).toBe(204);
    expect(text.received).toEqual([JSON.parse(body)]);
    expect((await post(url, `${body} `, standard(body, SECRET))).status).toBe(401);
  });

  it("README's receiver without the middleware, written with express.raw() and no type: the error names the missing { type: 'application/json' }", async () => {
    // express.raw()'s default type is application/octet-stream: it skips svc's application/json, req.body stays
    // undefined, and the error said only "got undefined" with the general advice.
    const app = express();
    app.post('/webhooks/svc', express.raw(), (req, res) => {
      try {
        res.sendStatus(verifyWebhook(req.body as Buffer, req.headers, SECRET) ? 204 : 401);
      } catch (err) {
        res.status(500).send((err as Error).message);
      }
    });
    const res = await post(await listen(app), BODY, standard(BODY, SECRET));
    expect(res.status).toBe(500);
    expect(await res.text()).toMatch(/got undefined: nothing read the body \(express\.raw\(\) reads only application\/octet-stream unless given \{ type: 'application\/json' \}/);
  });

  it('explains, through next(err), that express.json() already consumed the body', async () => {
    const errors: unknown[] = [];
    const { app } = receiver((a) => a.use(express.json()));
    app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(err);
      res.status(500).json({ message: (err as Error).message });
    });
    const res = await post(await listen(app), BODY, { 'x-svc-signature': hmac(BODY) });
    expect(res.status).toBe(500);
    expect(errors[0]).toBeInstanceOf(TypeError);
    expect(((await res.json()) as { message: string }).message).toMatch(/a body parser \(express\.json\(\).*Put the webhook route before app\.use\(express\.json\(\)\)/);
  });

  it("in a Next.js pages/api route: Next's JSON parser is named with its off switch; with bodyParser: false the README's route verifies", async () => {
    // What Next's API routes do with the default config: read the stream, then req.body = the parsed JSON.
    const verify = verifyMiddleware({ secret: SECRET });
    let bodyParser = true;
    const nextApiRoute = (req: IncomingMessage & { body?: unknown; svcEvent?: AuditPayload }, res: ServerResponse) =>
      void verify(req, res, (err) => {
        if (err) return void res.writeHead(500).end((err as Error).message);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ got: req.svcEvent!.request_id }));
      });
    const url = await listen(async (req: IncomingMessage, res: ServerResponse) => {
      if (bodyParser) {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        Object.assign(req, { body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown });
      }
      nextApiRoute(req, res);
    });
    const parsed = await post(url, BODY, standard(BODY, SECRET));
    expect(parsed.status).toBe(500);
    expect(await parsed.text()).toContain('In a Next.js pages/api route, turn its parser off: export const config = { api: { bodyParser: false } }.');
    bodyParser = false;
    const raw = await post(url, BODY, standard(BODY, SECRET, undefined, 'whd_next'));
    expect(await raw.json()).toEqual({ got: samplePayload.request_id });
  });

  it('reads the body when a parser skipped the request but left Express 4\'s req.body = {} behind', async () => {
    // body-parser 1 (Express 4's express.urlencoded(), express.json({ type }), ...) sets req.body = {} first, then
    // skips a request of another content type without reading it: the signed bytes are all still there.
    const { app, received } = receiver((a) =>
      a.use((req, _res, next) => {
        req.body = req.body || {};
        next();
      }),
    );
    expect((await post(await listen(app), BODY, standard(BODY, SECRET))).status).toBe(204);
    expect(received).toEqual([samplePayload]);
  });

  it('explains when another middleware read the stream without setting req.body', async () => {
    const errors: unknown[] = [];
    const { app } = receiver((a) =>
      a.use((req, _res, next) => {
        req.resume();
        req.on('end', () => next());
      }),
    );
    app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(err);
      res.sendStatus(500);
    });
    expect((await post(await listen(app), BODY, { 'x-svc-signature': hmac(BODY) })).status).toBe(500);
    expect((errors[0] as Error).message).toMatch(/request stream was already read/);
  });

  it('passes a stream error to next', async () => {
    const middleware = verifyMiddleware({ secret: SECRET, allowUntimestamped: true });
    const errors: unknown[] = [];
    const url = await listen((req: IncomingMessage, res: ServerResponse) => {
      req.once('data', () => req.destroy(new Error('client went away')));
      void middleware(req, res, (err) => {
        errors.push(err);
        res.destroy();
      });
    });
    await expect(post(url, BODY, { 'x-svc-signature': hmac(BODY) })).rejects.toThrow();
    await expect.poll(() => errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('client went away');
  });

  it('works with plain node:http too, and with an empty body', async () => {
    const middleware = verifyMiddleware({ secret: SECRET, allowUntimestamped: true });
    const url = await listen((req: IncomingMessage, res: ServerResponse) => {
      void middleware(req, res, () => res.end('reached'));
    });
    const res = await fetch(url, { method: 'POST', headers: { 'x-svc-signature': hmac('') } });
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe('invalid_payload');
  });

  it.each([
    ['an empty secret', { secret: '' }],
    ['a bad limit', { secret: SECRET, limit: 0 }],
    ['a bad tolerance', { secret: SECRET, toleranceSeconds: -1 }],
  ])('rejects %s when the middleware is created', (_, options) => {
    expect(() => verifyMiddleware(options)).toThrow(TypeError);
  });
});

describe('verifyMiddleware with dedupe', () => {
  const signed = (id: string) => ({ ...standard(BODY, SECRET, undefined, id), 'x-svc-signature': hmac(BODY) });

  function deduping(route: (req: express.Request, res: express.Response) => void | Promise<void>, options: Partial<Parameters<typeof verifyMiddleware>[0]> = {}) {
    const app = express();
    const handled: string[] = [];
    app.post('/webhooks/svc', verifyMiddleware({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper(), ...options }), async (req, res) => {
      handled.push(req.svcEvent!.request_id);
      await route(req, res);
    });
    return { app, handled };
  }

  it('processes one of two concurrent deliveries with the same id; the other, still in flight, gets 409 with retry-after; once done, 200 and svc-duplicate: true', async () => {
    // The first delivery is held until the second has been answered, so the second always finds it in flight
    // (a fixed sleep let a loaded host finish the first before the second arrived).
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const { app, handled } = deduping(async (_req, res) => {
      await held;
      res.sendStatus(204);
    });
    const url = await listen(app);
    const pending = [post(url, BODY, signed('whd_1')), post(url, BODY, signed('whd_1'))];
    expect((await Promise.race(pending)).status).toBe(409);
    release();
    const responses = await Promise.all(pending);
    expect(responses.map((r) => r.status).sort()).toEqual([204, 409]);
    const inFlight = responses.find((r) => r.status === 409)!;
    expect(inFlight.headers.get('retry-after')).toBe('30');
    expect(await inFlight.json()).toEqual({ in_progress: true });
    expect(handled).toHaveLength(1);
    // Processed now: a duplicate is answered as done. The id travels in X-Svc-Delivery too (a GitHub-style receiver).
    const duplicate = await post(url, BODY, { 'x-svc-delivery': 'whd_1', 'x-svc-signature': hmac(BODY) });
    expect(duplicate.status).toBe(200);
    expect(duplicate.headers.get('svc-duplicate')).toBe('true');
    expect(await duplicate.json()).toEqual({ duplicate: true });
    expect((await post(url, BODY, signed('whd_2'))).status).toBe(204);
    expect(handled).toHaveLength(2);
  });

  it('releases the id when the route fails, so svc\'s retry is processed', async () => {
    let attempt = 0;
    const { app, handled } = deduping((_req, res) => {
      attempt += 1;
      if (attempt === 1) throw new Error('database down');
      if (attempt === 2) return void res.sendStatus(503);
      res.sendStatus(204);
    });
    app.use((_err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.sendStatus(500));
    const url = await listen(app);
    expect((await post(url, BODY, signed('whd_1'))).status).toBe(500);
    expect((await post(url, BODY, signed('whd_1'))).status).toBe(503);
    expect((await post(url, BODY, signed('whd_1'))).status).toBe(204);
    expect((await post(url, BODY, signed('whd_1'))).headers.get('svc-duplicate')).toBe('true');
    expect(handled).toHaveLength(3);
  });

  it('lets a route that answers after svc hung up (its timeout) decide: after a 2xx the retry is a duplicate, after a 500 it is processed', async () => {
    const route = new EventEmitter();
    const statuses = [204, 500];
    const { app, handled } = deduping(async (_req, res) => {
      if (statuses.length === 0) return void res.sendStatus(204);
      route.emit('started');
      await once(res, 'close'); // svc stopped waiting: a slow route, still at work
      res.sendStatus(statuses.shift()!);
      route.emit('answered');
    });
    const url = await listen(app);
    for (const id of ['whd_slow_ok', 'whd_slow_failed']) {
      const svcGivesUp = new AbortController();
      const started = once(route, 'started');
      const attempt = fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...signed(id) }, signal: svcGivesUp.signal });
      await started;
      // A retry while the first copy is still at work: not processed alongside it.
      expect((await post(url, BODY, signed(id))).status).toBe(409);
      const answered = once(route, 'answered');
      svcGivesUp.abort();
      await expect(attempt).rejects.toThrow();
      await answered;
    }
    const afterOk = await post(url, BODY, signed('whd_slow_ok'));
    expect([afterOk.status, afterOk.headers.get('svc-duplicate')]).toEqual([200, 'true']);
    expect((await post(url, BODY, signed('whd_slow_failed'))).status).toBe(204);
    expect(handled).toEqual(['chatcmpl-1', 'chatcmpl-1', 'chatcmpl-1']);
  });

  it('keeps the id of a route slower than svc\'s timeout for the grace period: svc\'s retry meanwhile gets 409, the route runs once, its 2xx makes later retries duplicates', async () => {
    const route = new EventEmitter();
    let work = 0;
    let answer: () => void = () => {};
    const { app, handled } = deduping(async (_req, res) => {
      work += 1;
      if (work > 1) return void res.sendStatus(204); // a second processing of the delivery
      res.on('close', () => route.emit('closed'));
      route.emit('started');
      await new Promise<void>((resolve) => (answer = resolve)); // still at work when svc hangs up
      res.sendStatus(204);
      route.emit('answered');
    });
    const url = await listen(app);
    const svcGivesUp = new AbortController();
    const started = once(route, 'started');
    const attempt = fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...signed('whd_slow') }, signal: svcGivesUp.signal });
    await started;
    const closed = once(route, 'closed');
    svcGivesUp.abort();
    await expect(attempt).rejects.toThrow();
    await closed;
    // svc's retry (5 s after its 10 s timeout) while the route is still at work: not processed alongside it.
    const retry = await post(url, BODY, signed('whd_slow'));
    expect([retry.status, retry.headers.get('retry-after')]).toEqual([409, '30']);
    const answered = once(route, 'answered');
    answer();
    await answered;
    const later = await post(url, BODY, signed('whd_slow'));
    expect([later.status, later.headers.get('svc-duplicate')]).toEqual([200, 'true']);
    expect(work).toBe(1);
    expect(handled).toHaveLength(1);
  });

  it('releases the id of a route that never answers once the grace period after svc hung up has passed: the retry is processed, not answered 409 until the TTL', async () => {
    const route = new EventEmitter();
    const seen = new Set<string>();
    const store = { setIfAbsent: (id: string) => !seen.has(id) && !!seen.add(id), delete: (id: string) => void (seen.delete(id) && route.emit('released')) };
    let calls = 0;
    const { app, handled } = deduping((_req, res) => {
      calls += 1;
      if (calls > 1) return void res.sendStatus(204);
      // Express 4 with a rejected async handler: no answer, ever.
      res.on('close', () => route.emit('closed'));
      route.emit('started');
    }, { dedupe: createDeduper({ store }), dropGraceMs: 20 });
    const url = await listen(app);
    const svcGivesUp = new AbortController();
    const started = once(route, 'started');
    const attempt = fetch(url, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', ...signed('whd_hung') }, signal: svcGivesUp.signal });
    await started;
    expect((await post(url, BODY, signed('whd_hung'))).status).toBe(409);
    const closed = once(route, 'closed');
    const released = once(route, 'released');
    svcGivesUp.abort();
    await expect(attempt).rejects.toThrow();
    await closed;
    await released;
    expect((await post(url, BODY, signed('whd_hung'))).status).toBe(204);
    expect((await post(url, BODY, signed('whd_hung'))).headers.get('svc-duplicate')).toBe('true');
    expect(handled).toHaveLength(2);
  });

  it('releases the id when svc hung up while the store was still claiming it', async () => {
    const connection = new EventEmitter();
    // The first claim waits until svc has gone; the others answer at once.
    const { store, seen, finishClaim } = slowFirstClaimStore(connection);
    const app = express();
    let handled = 0;
    app.use((_req, res, next) => {
      res.on('close', () => connection.emit('closed'));
      next();
    });
    app.post('/webhooks/svc', verifyMiddleware({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper({ store }), dropGraceMs: 20 }), (_req, res) => {
      handled += 1;
      // The first copy's route never answers (its client is gone); a retry's does.
      if (handled > 1) res.sendStatus(204);
      else connection.emit('routed');
    });
    const url = await listen(app);
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
    expect((await post(url, BODY, signed('whd_slow_store'))).status).toBe(204);
    expect(handled).toBe(2);
  });

  it('processes every delivery that carries no id, and leaves the id claimed when a release fails', async () => {
    const app = express();
    let handled = 0;
    const seen = new Set<string>();
    const store = { setIfAbsent: (id: string) => !seen.has(id) && !!seen.add(id), delete: () => Promise.reject(new Error('store down')) };
    app.post('/webhooks/svc', verifyMiddleware({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper({ store }) }), (_req, res) => {
      handled += 1;
      res.sendStatus(500);
    });
    const url = await listen(app);
    expect((await post(url, BODY, { 'x-svc-signature': hmac(BODY) })).status).toBe(500);
    expect((await post(url, BODY, { 'x-svc-signature': hmac(BODY) })).status).toBe(500);
    expect((await post(url, BODY, signed('whd_1'))).status).toBe(500);
    expect((await post(url, BODY, signed('whd_1'))).headers.get('svc-duplicate')).toBe('true');
    expect(handled).toBe(3);
  });

  it('passes a store failure to next, so the delivery is answered 500 and retried', async () => {
    const app = express();
    const store = { setIfAbsent: () => Promise.reject(new Error('store down')), delete: () => {} };
    app.post('/webhooks/svc', verifyMiddleware({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper({ store }) }), (_req, res) => void res.sendStatus(204));
    app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(500).send(err.message));
    const res = await post(await listen(app), BODY, signed('whd_1'));
    expect(res.status).toBe(500);
    expect(await res.text()).toBe('store down');
  });

  it('rejects a dedupe that is not a deduper when created', () => {
    // @ts-expect-error misuse on purpose
    expect(() => verifyMiddleware({ secret: SECRET, dedupe: new Set() })).toThrow(/createDeduper/);
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, '60000'])('rejects dropGraceMs %s when created', (dropGraceMs) => {
    // @ts-expect-error a string on purpose; the numbers are misuse too
    expect(() => verifyMiddleware({ secret: SECRET, dedupe: createDeduper(), dropGraceMs })).toThrow(/dropGraceMs must be a positive number of milliseconds/);
  });
});
