import { createHmac } from 'node:crypto';
import { Hono } from 'hono';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { samplePayload } from '../test/support.js';
import { WebhookVerificationError, createWebhookHandler, errorResponse, verifyRequest, type AuditPayload } from './fetch.js';
import { createDeduper, signWebhook } from './index.js';

const SECRET = 'whsec_fetch';
const BODY = JSON.stringify(samplePayload);
const hmac = (body: string | Uint8Array, secret = SECRET) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

/** The receiver from the README's Hono section. */
function honoApp(received: AuditPayload[]) {
  const app = new Hono();
  app.post('/webhooks/svc', async (c) => {
    const event = await verifyRequest(c.req.raw, [`${SECRET}_new`, SECRET], { allowUntimestamped: true });
    received.push(event);
    return c.body(null, 204);
  });
  app.onError((err, c) => {
    if (err instanceof WebhookVerificationError) return errorResponse(err);
    return c.text('Internal Server Error', 500);
  });
  return app;
}

const standard = (body: string, secret: string, timestamp = Math.floor(Date.now() / 1000), id = 'whd_standard') => ({
  'webhook-id': id,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signWebhook(body, { id, timestamp }, secret),
});

const request = (body: string | Uint8Array | null, headers: Record<string, string> = {}) =>
  new Request('http://receiver.test/webhooks/svc', { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

describe('verifyRequest with Hono', () => {
  it('verifies the Standard Webhooks headers when the delivery carries them, with either of two secrets, and refuses a stale webhook-timestamp', async () => {
    const received: AuditPayload[] = [];
    const app = honoApp(received);
    expect((await app.request(request(BODY, standard(BODY, SECRET)))).status).toBe(204);
    expect((await app.request(request(BODY, standard(BODY, `${SECRET}_new`)))).status).toBe(204);
    expect(received).toHaveLength(2);
    const stale = await app.request(request(BODY, standard(BODY, SECRET, Math.floor(Date.now() / 1000) - 600)));
    expect(stale.status).toBe(400);
    expect(((await stale.json()) as { error: { code: string } }).error.code).toBe('timestamp_out_of_range');
  });

  it('accepts a signed delivery, non-ASCII bytes included', async () => {
    const received: AuditPayload[] = [];
    const body = new TextEncoder().encode(JSON.stringify({ ...samplePayload, response_text: 'Très bien 🚀' }));
    const res = await honoApp(received).request(request(body, { 'x-svc-signature': hmac(body) }));
    expect(res.status).toBe(204);
    expect(received[0]?.response_text).toBe('Très bien 🚀');
  });

  it('answers misuse with the app\'s own 500, not a verification error', async () => {
    const app = new Hono();
    app.post('/webhooks/svc', async (c) => {
      await c.req.json();
      return c.json(await verifyRequest(c.req.raw, SECRET, { allowUntimestamped: true }));
    });
    app.onError((err, c) => (err instanceof WebhookVerificationError ? errorResponse(err) : c.text(err.message, 500)));
    const res = await app.request(request(BODY, { 'x-svc-signature': hmac(BODY) }));
    expect(res.status).toBe(500);
    expect(await res.text()).toMatch(/already read/);
  });

  it.each([
    [{}, BODY, 401, 'missing_signature'],
    // Headers trims whitespace itself, so the malformed case that survives fetch is a duplicated header.
    [{ 'x-svc-signature': `${hmac(BODY)}, ${hmac(BODY)}` }, BODY, 401, 'malformed_signature'],
    [{ 'x-svc-signature': hmac(BODY, 'whsec_wrong') }, BODY, 401, 'signature_mismatch'],
    [{ 'x-svc-signature': hmac('[]') }, '[]', 400, 'invalid_payload'],
  ])('answers %j with %#: status and svc error body', async (headers, body, status, code) => {
    const received: AuditPayload[] = [];
    const res = await honoApp(received).request(request(body, headers));
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      error: { message: expect.any(String), type: status === 401 ? 'authentication_error' : 'invalid_request_error', code, param: null },
    });
    expect(received).toEqual([]);
  });
});

describe('verifyRequest with a plain Request (Next.js route handlers, Workers)', () => {
  it('verifies a request with no body as the empty body', async () => {
    await expect(verifyRequest(request(null, { 'x-svc-signature': hmac('') }), SECRET, { allowUntimestamped: true })).rejects.toMatchObject({ code: 'invalid_payload' });
  });

  it('applies toleranceSeconds', async () => {
    await expect(verifyRequest(request(BODY, { 'x-svc-signature': hmac(BODY) }), SECRET, { toleranceSeconds: 60, allowUntimestamped: true })).rejects.toMatchObject({
      code: 'timestamp_out_of_range',
      status: 400,
    });
  });

  it('explains that the body was already read', async () => {
    const req = request(BODY, { 'x-svc-signature': hmac(BODY) });
    await req.json();
    await expect(verifyRequest(req, SECRET, { allowUntimestamped: true })).rejects.toThrow(/already read .* Call verifyRequest\(request, secret\) before anything reads/);
  });

  it('accepts a clone when something else needs the body first', async () => {
    const req = request(BODY, { 'x-svc-signature': hmac(BODY) });
    const copy = req.clone();
    await req.json();
    expect(await verifyRequest(copy, SECRET, { allowUntimestamped: true })).toEqual(samplePayload);
  });
});

describe('createWebhookHandler', () => {
  const signed = (id: string) => ({ ...standard(BODY, SECRET, undefined, id), 'x-svc-signature': hmac(BODY) });

  it('verifies, hands the typed payload to the handler and returns its response; an untrusted delivery gets errorResponse', async () => {
    const received: AuditPayload[] = [];
    const handle = createWebhookHandler({ secret: SECRET, allowUntimestamped: true }, (event) => {
      received.push(event);
      return new Response(null, { status: 204 });
    });
    expect((await handle(request(BODY, signed('whd_1')))).status).toBe(204);
    expect((await handle(request(BODY, signed('whd_1')))).status).toBe(204);
    expect(received).toEqual([samplePayload, samplePayload]);
    const refused = await handle(request(BODY, { 'x-svc-signature': hmac(BODY, 'whsec_wrong') }));
    expect(refused.status).toBe(401);
    const consumed = request(BODY, { 'x-svc-signature': hmac(BODY) });
    await consumed.text();
    await expect(handle(consumed)).rejects.toThrow(/already read/);
  });

  it('with dedupe: processes one of two concurrent deliveries with the same id; the other, still in flight, gets 409; once done, 200 and svc-duplicate: true', async () => {
    let handled = 0;
    const handle = createWebhookHandler({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper() }, async () => {
      handled += 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return new Response(null, { status: 204 });
    });
    const responses = await Promise.all([handle(request(BODY, signed('whd_1'))), handle(request(BODY, signed('whd_1')))]);
    expect(responses.map((r) => r.status).sort()).toEqual([204, 409]);
    const inFlight = responses.find((r) => r.status === 409)!;
    expect(inFlight.headers.get('retry-after')).toBe('30');
    expect(await inFlight.json()).toEqual({ in_progress: true });
    expect(handled).toBe(1);
    const duplicate = await handle(request(BODY, signed('whd_1')));
    expect(duplicate.status).toBe(200);
    expect(duplicate.headers.get('svc-duplicate')).toBe('true');
    expect(await duplicate.json()).toEqual({ duplicate: true });
    expect((await handle(request(BODY, { 'x-svc-signature': hmac(BODY) }))).status).toBe(204);
    expect(handled).toBe(2);
  });

  it('with dedupe: releases the id when the handler rejects or answers other than 2xx, so svc\'s retry is processed', async () => {
    const outcomes: Array<() => Response> = [
      () => {
        throw new Error('database down');
      },
      () => new Response(null, { status: 503 }),
      () => new Response(null, { status: 204 }),
    ];
    const handle = createWebhookHandler({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper() }, () => outcomes.shift()!());
    await expect(handle(request(BODY, signed('whd_1')))).rejects.toThrow('database down');
    expect((await handle(request(BODY, signed('whd_1')))).status).toBe(503);
    expect((await handle(request(BODY, signed('whd_1')))).status).toBe(204);
    expect((await handle(request(BODY, signed('whd_1')))).headers.get('svc-duplicate')).toBe('true');
    expect(outcomes).toEqual([]);
  });

  it('says so when the handler returns no Response, and with dedupe releases the id so the retry is processed', async () => {
    // Was "Cannot read properties of undefined (reading 'status')", and the id stayed claimed: every retry got 409.
    const returns: unknown[] = [undefined, null, new Response(null, { status: 204 })];
    const handle = createWebhookHandler({ secret: SECRET, dedupe: createDeduper() }, () => returns.shift() as Response);
    await expect(handle(request(BODY, signed('whd_1')))).rejects.toThrow(
      new TypeError("[@svc/verify] createWebhookHandler's handler must return a Response, e.g. new Response(null, { status: 204 }); it returned undefined."),
    );
    await expect(handle(request(BODY, signed('whd_1')))).rejects.toThrow(/it returned null\.$/);
    expect((await handle(request(BODY, signed('whd_1')))).status).toBe(204);
    const plain = createWebhookHandler({ secret: SECRET }, () => 'ok' as unknown as Response);
    await expect(plain(request(BODY, signed('whd_2')))).rejects.toThrow(/it returned string\.$/);
  });

  it('with dedupe: a handler slower than svc\'s timeout keeps its id for the grace period after request.signal aborts: the retry meanwhile gets 409, the handler runs once', async () => {
    let answer: (response: Response) => void = () => {};
    let calls = 0;
    const handle = createWebhookHandler({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper() }, () => {
      calls += 1;
      return calls === 1 ? new Promise<Response>((resolve) => (answer = resolve)) : new Response(null, { status: 204 });
    });
    const svcGivesUp = new AbortController();
    const first = handle(withSignal(request(BODY, signed('whd_slow')), svcGivesUp.signal));
    await expect.poll(() => calls).toBe(1);
    svcGivesUp.abort();
    // svc's retry (5 s after its 10 s timeout) while the handler is still at work: not processed alongside it.
    const retry = await handle(request(BODY, signed('whd_slow')));
    expect([retry.status, retry.headers.get('retry-after')]).toEqual([409, '30']);
    answer(new Response(null, { status: 204 }));
    expect((await first).status).toBe(204);
    const later = await handle(request(BODY, signed('whd_slow')));
    expect([later.status, later.headers.get('svc-duplicate')]).toEqual([200, 'true']);
    expect(calls).toBe(1);
  });

  describe('with dedupe and a clock', () => {
    afterEach(() => void vi.useRealTimers());

    it('releases the id of a handler that never answers once the grace period after request.signal aborted has passed: the retry is processed, not answered 409 until the TTL', async () => {
      let calls = 0;
      const handle = createWebhookHandler({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper() }, () => {
        calls += 1;
        return calls === 1 ? new Promise<Response>(() => {}) : new Response(null, { status: 204 });
      });
      const svcGivesUp = new AbortController();
      void handle(withSignal(request(BODY, signed('whd_hung')), svcGivesUp.signal));
      await expect.poll(() => calls).toBe(1);
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      svcGivesUp.abort();
      await vi.advanceTimersByTimeAsync(59_999);
      expect((await handle(request(BODY, signed('whd_hung')))).status).toBe(409);
      await vi.advanceTimersByTimeAsync(1);
      expect((await handle(request(BODY, signed('whd_hung')))).status).toBe(204);
      expect((await handle(request(BODY, signed('whd_hung')))).headers.get('svc-duplicate')).toBe('true');
      expect(calls).toBe(2);
    });

    it('a request whose signal aborted before the claim keeps it for dropGraceMs, then releases it: the retry is processed, the late 2xx changes nothing', async () => {
      let answer: (response: Response) => void = () => {};
      let calls = 0;
      const handle = createWebhookHandler({ secret: SECRET, allowUntimestamped: true, dedupe: createDeduper(), dropGraceMs: 1_000 }, () => {
        calls += 1;
        return calls === 1 ? new Promise<Response>((resolve) => (answer = resolve)) : new Response(null, { status: 204 });
      });
      const gone = new AbortController();
      gone.abort();
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const first = handle(withSignal(request(BODY, signed('whd_gone')), gone.signal));
      await vi.waitFor(() => expect(calls).toBe(1));
      expect((await handle(request(BODY, signed('whd_gone')))).status).toBe(409);
      await vi.advanceTimersByTimeAsync(1_000);
      // Released: svc's retry is processed, not answered 409 while the first copy's handler is still at work.
      expect((await handle(request(BODY, signed('whd_gone')))).status).toBe(204);
      answer(new Response(null, { status: 204 }));
      expect((await first).status).toBe(204);
      const again = await handle(request(BODY, signed('whd_gone')));
      expect([again.status, again.headers.get('svc-duplicate')]).toEqual([200, 'true']);
      expect(calls).toBe(2);
    });
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, '60000'])('rejects dropGraceMs %s when created', (dropGraceMs) => {
    const create = () => createWebhookHandler({ secret: SECRET, dedupe: createDeduper(), dropGraceMs: dropGraceMs as number }, () => new Response());
    expect(create).toThrow(new TypeError('[@svc/verify] dropGraceMs must be a positive number of milliseconds.'));
  });

  it.each([
    ['an empty secret', { secret: '' }, () => new Response()],
    ['a bad tolerance', { secret: SECRET, toleranceSeconds: -1 }, () => new Response()],
    ['a dedupe that is not a deduper', { secret: SECRET, dedupe: {} }, () => new Response()],
    ['a zero limit', { secret: SECRET, limit: 0 }, () => new Response()],
    ['a fractional limit', { secret: SECRET, limit: 1.5 }, () => new Response()],
    ['no handler', { secret: SECRET }, undefined],
  ])('rejects %s when created', (_, options, handler) => {
    // @ts-expect-error misuse on purpose
    expect(() => createWebhookHandler(options, handler)).toThrow(TypeError);
  });
});

/** `req` with `signal` as its `request.signal` (runtimes abort it when the client goes). */
function withSignal(req: Request, signal: AbortSignal): Request {
  return new Request(req, { signal });
}

/** A streamed body of `total` bytes, made chunk by chunk as it is read; `pulled()` tells how much was made. */
function streamedRequest(total: number, headers: Record<string, string> = {}) {
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  let made = 0;
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (made >= total) return controller.close();
      const next = chunk.subarray(0, Math.min(chunk.length, total - made));
      made += next.length;
      controller.enqueue(next);
    },
    cancel() {
      cancelled = true;
    },
  }, { highWaterMark: 0 });
  const req = new Request('http://receiver.test/webhooks/svc', { method: 'POST', body, headers, duplex: 'half' } as RequestInit);
  return { req, pulled: () => made, cancelled: () => cancelled };
}

describe('body limit', () => {
  const handle = createWebhookHandler({ secret: SECRET, limit: 1024 * 1024, allowUntimestamped: true }, () => new Response(null, { status: 204 }));
  const tooLarge = { error: { message: 'Payload larger than 1048576 bytes.', type: 'invalid_request_error', code: 'payload_too_large', param: null } };

  it('stops reading a body past the limit and answers 413 in the adapters\' error shape, before checking the signature', async () => {
    // 400 MiB, unsigned: only about the limit is read.
    const { req, pulled, cancelled } = streamedRequest(400 * 1024 * 1024);
    const res = await handle(req);
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(tooLarge);
    expect(pulled()).toBeLessThanOrEqual(1024 * 1024 + 64 * 1024);
    expect(cancelled()).toBe(true);
  });

  it('refuses a declared content-length over the limit without reading the body', async () => {
    const { req, pulled } = streamedRequest(2 * 1024 * 1024, { 'content-length': String(2 * 1024 * 1024) });
    const res = await handle(req);
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(tooLarge);
    expect(pulled()).toBe(0);
  });

  it('accepts by default a 12 MiB delivery (a prompt near svc\'s 10 MiB request limit and its answer)', async () => {
    const big = BODY.padEnd(12 * 1024 * 1024, ' ');
    await expect(verifyRequest(request(big, { 'x-svc-signature': hmac(big) }), SECRET, { allowUntimestamped: true })).resolves.toBeDefined();
  });

  it('accepts a body of exactly the limit (the signature decides), streamed in chunks', async () => {
    // JSON may end in whitespace: the body padded to the limit is still the signed payload.
    const padded = BODY.padEnd(1024 * 1024, ' ');
    const res = await handle(request(padded, { 'x-svc-signature': hmac(padded) }));
    expect(res.status).toBe(204);
    expect((await handle(request(`${padded} `, { 'x-svc-signature': hmac(`${padded} `) }))).status).toBe(413);
  });

  it('verifyRequest takes the limit too (default 64 MiB) and rejects with a 413 WebhookVerificationError', async () => {
    const small = verifyRequest(request(BODY, { 'x-svc-signature': hmac(BODY) }), SECRET, { limit: 10 });
    await expect(small).rejects.toMatchObject({ name: 'WebhookVerificationError', code: 'payload_too_large', status: 413 });
    const err = await small.then(() => undefined, (reason: unknown) => reason);
    expect(err).toBeInstanceOf(WebhookVerificationError);
    expect(errorResponse(err as WebhookVerificationError).status).toBe(413);
    await expect(verifyRequest(streamedRequest(64 * 1024 * 1024 + 1).req, SECRET)).rejects.toMatchObject({ code: 'payload_too_large' });
    await expect(verifyRequest(request(BODY), SECRET, { limit: -1 })).rejects.toThrow('[@svc/verify] limit must be a positive whole number of bytes.');
  });
});
