import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startReceiver, type Receiver, type ReceiverReply } from '../../support/webhooks.js';
import { createSender, RESPONSE_BODY_LIMIT, USER_AGENT, type AttemptOutcome, type Sender } from '../../../src/webhooks/sender.js';
import { signBody, signStandard } from '../../../src/webhooks/signer.js';

const TIMEOUT_MS = 300;
const BODY = '{"event":"llm.request.completed","request_id":"chatcmpl-1","note":"é"}';
const SECRET = 'whsec_sender-test-secret';
const TIMESTAMP = 1_767_225_600;

let receiver: Receiver;
let sender: Sender;
let guarded: Sender;

beforeAll(async () => {
  receiver = await startReceiver();
  sender = createSender({ timeoutMs: TIMEOUT_MS, allowPrivate: true });
  guarded = createSender({ timeoutMs: TIMEOUT_MS, allowPrivate: false });
});

afterAll(async () => {
  await sender?.close();
  await guarded?.close();
  await receiver?.close();
});

const send = (url = receiver.url, secret: string | null = SECRET, via = sender) =>
  via.send({ url, body: BODY, event: 'llm.request.completed', deliveryId: 'whd_0123', secret, timestamp: TIMESTAMP });

describe('sender', () => {
  it('posts the exact bytes with the event, delivery id, user agent and signature headers', async () => {
    const before = receiver.received.length;
    const outcome = await send();
    expect(outcome).toEqual({ ok: true, statusCode: 200, durationMs: expect.any(Number), error: null, responseBody: 'ok', requestHeaders: expect.any(Object) });
    const [got] = receiver.received.slice(before);
    // The outcome carries the headers as sent (for the attempt log).
    for (const [name, value] of Object.entries(outcome.requestHeaders!)) expect(got!.headers[name]).toBe(value);
    expect(got!.raw.toString('utf8')).toBe(BODY);
    expect(got!.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'x-svc-event': 'llm.request.completed',
      'x-svc-delivery': 'whd_0123',
      'x-svc-signature': signBody(BODY, SECRET),
      'webhook-id': 'whd_0123',
      'webhook-timestamp': String(TIMESTAMP),
      'webhook-signature': signStandard(BODY, 'whd_0123', TIMESTAMP, SECRET),
    });
    await send(receiver.url, null);
    expect(receiver.received.at(-1)!.headers['x-svc-signature']).toBeUndefined();
    expect(receiver.received.at(-1)!.headers['webhook-signature']).toBeUndefined();
    expect(receiver.received.at(-1)!.headers['webhook-id']).toBe('whd_0123');
  });

  const replies: Array<[string, ReceiverReply, Partial<AttemptOutcome>]> = [
    ['204, no body', { status: 204, body: '' }, { ok: true, statusCode: 204, error: null, responseBody: '' }],
    ['500', { status: 500, body: 'boom' }, { ok: false, statusCode: 500, error: 'HTTP 500', responseBody: 'boom' }],
    ['302 (not followed)', { status: 302, headers: { location: 'http://127.0.0.1:1/' }, body: '' }, { ok: false, statusCode: 302, error: 'HTTP 302 (redirects are not followed: it points to http://127.0.0.1:1/)' }],
    ['503 with Retry-After', { status: 503, headers: { 'retry-after': '7' }, body: 'later' }, { ok: false, statusCode: 503, retryAfterMs: 7000, responseBody: 'later' }],
    ['a 100 KB body: the first 2 KB kept', { status: 200, body: 'é'.repeat(50_000) }, { ok: true, statusCode: 200, responseBody: Buffer.from('é'.repeat(50_000)).subarray(0, RESPONSE_BODY_LIMIT).toString('utf8') }],
    ['a reset connection', { reset: true }, { ok: false, statusCode: null, responseBody: null }],
    ['no answer within the timeout', { hang: true }, { ok: false, statusCode: null, error: `timed out after ${TIMEOUT_MS} ms`, responseBody: null }],
  ];

  it.each(replies)('reports %s as an outcome, and the next attempt works', async (_name, reply, expected) => {
    receiver.queue.push(reply);
    const outcome = await send();
    expect(outcome).toMatchObject(expected);
    if (!outcome.ok) expect(outcome.error).toEqual(expect.any(String));
    if (expected.error?.startsWith('timed out')) expect(outcome.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(await send()).toMatchObject({ ok: true, responseBody: 'ok' });
  });

  it('times out each of several overlapping hung attempts, while the others complete', async () => {
    const pending: Array<Promise<AttemptOutcome>> = [];
    for (let i = 0; i < 6; i++) {
      receiver.queue.push(i % 2 === 0 ? { hang: true } : {});
      pending.push(send());
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const outcomes = await Promise.all(pending);
    expect(outcomes.map((o) => o.error)).toEqual([0, 1, 2, 3, 4, 5].map((i) => (i % 2 === 0 ? `timed out after ${TIMEOUT_MS} ms` : null)));
    // The shared deadline timer is re-armed for later attempts.
    receiver.queue.push({ hang: true });
    expect(await send()).toMatchObject({ error: `timed out after ${TIMEOUT_MS} ms` });
  });

  it('times out a response that keeps trickling (the timeout is for the whole attempt) and drops its connection', async () => {
    const sockets: Socket[] = [];
    const trickle = createServer((socket) => {
      sockets.push(socket);
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n');
        const timer = setInterval(() => socket.write('1\r\n.\r\n'), 20);
        socket.on('close', () => clearInterval(timer));
        socket.on('error', () => clearInterval(timer));
      });
    });
    await new Promise<void>((resolve) => trickle.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = trickle.address() as AddressInfo;
      // What it did say is kept: the status and the body so far.
      const outcome = await send(`http://127.0.0.1:${port}/hooks`);
      expect(outcome).toMatchObject({ ok: false, kind: 'timeout', statusCode: 200, error: `answered 200, then its body timed out after ${TIMEOUT_MS} ms` });
      expect(outcome.responseBody).toMatch(/^\.+$/);
      // (undici may open a second, idle connection meanwhile; the request's own is the first.)
      await eventually(() => sockets[0]!.destroyed);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => trickle.close(resolve));
    }
  });

  it('reports a refused connection', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    expect(await send(`http://127.0.0.1:${port}/hooks`)).toMatchObject({ ok: false, statusCode: null, error: expect.stringContaining('ECONNREFUSED') });
  });

  const refusals: Array<[string, (port: string) => string, string]> = [
    ['a loopback literal', (port) => `http://127.0.0.1:${port}/hooks`, "refused to connect to 127.0.0.1: loopback address (SVC_WEBHOOK_ALLOW_PRIVATE is false on this server; its operator can set loopback or true to allow it)"],
    ['a name resolving to loopback', (port) => `http://localhost:${port}/hooks`, 'refused to connect to localhost: it resolves to'],
    ['credentials', (port) => `http://user:pw@127.0.0.1:${port}/hooks`, 'URL carries credentials'],
    ['another scheme', () => 'ftp://example.com/hooks', 'unsupported URL scheme ftp:'],
    ['no URL at all', () => 'not a url', 'Invalid URL'],
  ];

  it.each(refusals)('without allowPrivate, refuses %s on every attempt (nothing reaches the receiver)', async (_name, url, error) => {
    const before = receiver.received.length;
    const port = new URL(receiver.url).port;
    for (let i = 0; i < 2; i++) {
      expect(await send(url(port), SECRET, guarded)).toMatchObject({ ok: false, statusCode: null, responseBody: null, error: expect.stringContaining(error) });
    }
    expect(receiver.received.length).toBe(before);
  });

  it('types every failure: kind and a stable code beside the message', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const cases: Array<[string, () => Promise<AttemptOutcome>, Partial<AttemptOutcome>]> = [
      ['a 500', () => (receiver.queue.push({ status: 500 }), send()), { kind: 'http', code: 'SVC_WEBHOOK_HTTP_STATUS', statusCode: 500 }],
      ['a 302', () => (receiver.queue.push({ status: 302, headers: { location: '/' } }), send()), { kind: 'http', code: 'SVC_WEBHOOK_HTTP_STATUS', statusCode: 302 }],
      ['no answer', () => (receiver.queue.push({ hang: true }), send()), { kind: 'timeout', code: 'SVC_WEBHOOK_TIMEOUT' }],
      ['a closed port', () => send(`http://127.0.0.1:${port}/hooks`), { kind: 'network', code: 'ECONNREFUSED' }],
      ['a loopback address, guarded', () => send(receiver.url, SECRET, guarded), { kind: 'refused', code: 'SVC_WEBHOOK_ADDRESS_REFUSED' }],
      ['another scheme', () => send('ftp://example.com/hooks'), { kind: 'refused', code: 'SVC_WEBHOOK_URL_REFUSED', error: 'unsupported URL scheme ftp:' }],
      ['no URL at all', () => send('not a url'), { kind: 'refused', code: 'SVC_WEBHOOK_URL_REFUSED' }],
    ];
    for (const [name, attempt, expected] of cases) expect(await attempt(), name).toMatchObject({ ok: false, ...expected });
  });
});
