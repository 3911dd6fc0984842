import { createHmac } from 'node:crypto';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
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

  it.each([
    ['an empty secret', { secret: '' }, () => new Response()],
    ['a bad tolerance', { secret: SECRET, toleranceSeconds: -1 }, () => new Response()],
    ['a dedupe that is not a deduper', { secret: SECRET, dedupe: {} }, () => new Response()],
    ['no handler', { secret: SECRET }, undefined],
  ])('rejects %s when created', (_, options, handler) => {
    // @ts-expect-error misuse on purpose
    expect(() => createWebhookHandler(options, handler)).toThrow(TypeError);
  });
});
