import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { startTestServer, type TestServer } from './support/test-server.js';

/**
 * Issue #26: client mistakes that were 500s logged as errors with stacks (one with the absolute build path).
 * Each is now the right 4xx in the OpenAI error shape (a plain 404 for a missing asset), and nothing is logged
 * above info: no stack, no file-system path.
 */

const PASSWORD = 'correct horse battery staple';
const MALFORMED = '%E0%A4%A';

let server: TestServer;
let token: string;
let email: string;
let keyId: string;
let session: string;

beforeAll(async () => {
  server = await startTestServer();
  const created = await server.createKey({ name: 'mistakes' });
  ({ token } = created);
  email = created.user.email;
  keyId = created.key.id;
  const login = await fetch(`${server.url}/dashboard/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: PASSWORD }),
  });
  expect(login.status).toBe(200);
  session = (login.headers.get('set-cookie') ?? '').split(';')[0]!;
});

afterAll(async () => {
  await server?.close();
});

const CASES: Array<{ what: string; path: () => string; headers?: () => Record<string, string>; status: number; code?: string }> = [
  { what: 'a delivery id', path: () => `/v1/webhooks/deliveries/${MALFORMED}`, headers: () => ({ authorization: `Bearer ${token}` }), status: 400, code: 'invalid_request' },
  { what: 'a redelivery', path: () => `/v1/webhooks/deliveries/${MALFORMED}/redeliver`, headers: () => ({ authorization: `Bearer ${token}` }), status: 400, code: 'invalid_request' },
  { what: 'a dashboard page', path: () => `/dashboard/${MALFORMED}`, status: 400, code: 'invalid_request' },
  { what: "a key's deliveries (signed in)", path: () => `/dashboard/api/keys/${MALFORMED}/deliveries`, headers: () => ({ cookie: session }), status: 400, code: 'invalid_request' },
  { what: 'the session cookie', path: () => '/dashboard/api/keys', headers: () => ({ cookie: `svc_session=${MALFORMED}` }), status: 401, code: 'not_signed_in' },
  { what: 'a missing asset', path: () => '/dashboard/assets/index-0000000.js', status: 404 },
  { what: 'a malformed asset name', path: () => `/dashboard/assets/${MALFORMED}.js`, status: 404 },
];

describe('malformed percent-encoding and missing files', () => {
  for (const c of CASES) {
    it(`${c.what}: ${c.status}`, async () => {
      const before = server.logs.length;
      const method = c.what === 'a redelivery' ? 'POST' : 'GET';
      const res = await fetch(`${server.url}${c.path()}`, { method, headers: c.headers?.() });
      expect(res.status).toBe(c.status);
      const text = await res.text();
      if (c.code) {
        expect(JSON.parse(text)).toEqual({ error: { message: expect.any(String), type: expect.any(String), code: c.code, param: null } });
      } else {
        expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
        expect(text).toBe('Not found\n');
      }
      const logged = server.logs.slice(before).map((line) => JSON.parse(line) as { level: number });
      expect(logged.filter((line) => line.level > 30)).toEqual([]);
      const all = server.logs.slice(before).join('\n');
      expect(all).not.toContain('stack');
      expect(all).not.toContain(process.cwd());
      expect(text).not.toContain(process.cwd());
    });
  }

  it('a well-formed id still reaches the routes (404 not_found for an unknown delivery, 200 for own key)', async () => {
    const res = await fetch(`${server.url}/v1/webhooks/deliveries/whd_unknown`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error.code).toBe('not_found');
    const own = await fetch(`${server.url}/dashboard/api/keys/${keyId}/deliveries`, { headers: { cookie: session } });
    expect(own.status).toBe(200);
  });
});

describe('a body over the dashboard parser\'s limit', () => {
  it('is a 413 that names that limit (100 KiB), not the chat route\'s 10 MiB', async () => {
    const res = await fetch(`${server.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'x'.repeat(200 * 1024) }),
    });
    expect(res.status).toBe(413);
    const body = (await res.json()) as { error: { message: string; code: string; type: string } };
    expect(body.error).toMatchObject({ code: 'request_too_large', type: 'invalid_request_error' });
    expect(body.error.message).toBe('The request body is larger than the 100 KiB limit.');
  });

  it('the chat route still names its own 10 MiB', async () => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'x'.repeat(10 * 1024 * 1024) }] }),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe('The request body is larger than the 10 MiB limit.');
  });
});

describe('a dashboard body that is not UTF-8', () => {
  it("is a 400 as on the API, not a key name saved with U+FFFD in it; a UTF-16 label is refused, not decoded", async () => {
    const login = await fetch(`${server.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    const { csrf_token: csrf } = (await login.json()) as { csrf_token: string };
    const headers = { cookie: (login.headers.get('set-cookie') ?? '').split(';')[0]!, 'x-csrf-token': csrf };
    const rename = (body: Buffer, contentType: string) =>
      fetch(`${server.url}/dashboard/api/keys/${keyId}`, { method: 'PATCH', headers: { ...headers, 'content-type': contentType }, body: new Uint8Array(body) });
    const json = JSON.stringify({ name: 'Caf\u00e9' });
    const cases = [
      { body: Buffer.from(json, 'latin1'), type: 'application/json', message: 'The request body must be UTF-8 encoded JSON.' },
      { body: Buffer.from(json, 'utf16le'), type: 'application/json; charset=utf-16le', message: 'The request body must be UTF-8 encoded JSON; its Content-Type says charset=utf-16le.' },
    ];
    for (const { body, type, message } of cases) {
      const res = await rename(body, type);
      expect(res.status, type).toBe(400);
      expect(await res.json()).toEqual({ error: { message, type: 'invalid_request_error', code: 'invalid_request', param: null } });
    }
    const key = (await (await fetch(`${server.url}/dashboard/api/keys/${keyId}`, { headers })).json()) as { name: string };
    expect(key.name).toBe('mistakes');
    // The same name in UTF-8 is saved, labelled by any of UTF-8's names as the API reads them (body-parser took `utf-…` only).
    for (const type of ['application/json', 'application/json; charset=utf8', 'application/json; charset="UTF8"', 'application/json;charset=unicode-1-1-utf-8']) {
      await rename(Buffer.from(JSON.stringify({ name: 'mistakes' })), 'application/json');
      expect((await rename(Buffer.from(json, 'utf8'), type)).status, type).toBe(200);
      const renamed = (await (await fetch(`${server.url}/dashboard/api/keys/${keyId}`, { headers })).json()) as { name: string };
      expect(renamed.name, type).toBe('Caf\u00e9');
    }
    await rename(Buffer.from(JSON.stringify({ name: 'mistakes' })), 'application/json');
  });
});

describe('a body that is not what its Content-Encoding says', () => {
  // The dashboard reads bodies with express.json(), the webhooks routes with svc's own reader: one answer from both.
  const routes = [
    { what: 'a dashboard sign-in', path: '/dashboard/api/login', headers: () => ({}) },
    { what: 'a test webhook', path: '/v1/webhooks/test', headers: () => ({ authorization: `Bearer ${token}` }) },
  ];
  const cases = [
    { what: 'plain JSON', encoding: 'gzip', body: () => JSON.stringify({ email, password: PASSWORD }), message: 'The request body could not be inflated: it is not valid for its Content-Encoding.' },
    { what: 'plain JSON', encoding: 'br', body: () => JSON.stringify({ email, password: PASSWORD }), message: 'The request body could not be inflated: it is not valid for its Content-Encoding.' },
    { what: 'a cut-off stream', encoding: 'gzip', body: () => gzipSync('{"sample":"ok"}').subarray(0, 12), message: 'The request body could not be inflated: it is not valid for its Content-Encoding.' },
    { what: 'JSON', encoding: 'compress', body: () => '{}', message: 'Unsupported content encoding "compress".' },
  ];
  for (const route of routes) {
    it.each(cases)(`${route.what}: $what sent as $encoding is a 400 saying so`, async ({ encoding, body, message }) => {
      const res = await fetch(`${server.url}${route.path}`, {
        method: 'POST',
        headers: { ...route.headers(), 'content-type': 'application/json', 'content-encoding': encoding },
        body: body(),
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: { message, type: 'invalid_request_error', code: 'invalid_request', param: null } });
    });
  }
});

describe('JSON nested deeper than 256 levels', () => {
  const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
  it.each([
    ['in a field svc does not know', (d: number) => `{"model":"svc01","messages":[{"role":"user","content":"Hi"}],"x_extra":${nested(d)}}`, '/v1/chat/completions'],
    ['in a tool\'s parameters', (d: number) => `{"model":"svc01","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","x":${nested(d)}}}}]}`, '/v1/chat/completions'],
    ['in a Responses input', (d: number) => `{"model":"svc01","input":"Hi","metadata":{"k":"v"},"x_extra":${nested(d)}}`, '/v1/responses'],
  ])('%s is a 400 naming the limit, at 10,000 and 1,000,000 levels (deep enough to overflow the stack of a recursive step)', async (_where, body, path) => {
    for (const depth of [10_000, 1_000_000]) {
      const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body(depth) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string; type: string } }).error).toMatchObject({
        type: 'invalid_request_error',
        message: 'The request body nests arrays and objects more than 256 levels deep.',
      });
    }
  });

  it('256 levels, and brackets inside strings, are read as usual', async () => {
    const body = `{"model":"svc01","messages":[{"role":"user","content":"Say [[[[[ and \\\\\\"{{{{"}],"x_extra":${nested(250)}}`;
    const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
    expect(res.status).toBe(200);
  });
});

// V8 parses an object of many distinct keys in time that grows faster than its size: 200,000 keys (2 MB) held the
// event loop 0.4–0.7 s for every other request, and a 10 MiB body fits five times as many.
describe('an object with more than 10,000 keys', () => {
  const keys = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":1`).join(',')}}`;
  it.each([
    ['metadata', 'metadata', (n: number) => `{"model":"svc01","messages":[{"role":"user","content":"Hi"}],"metadata":${keys(n)}}`, '/v1/chat/completions'],
    ["a tool's properties", 'tools', (n: number) => `{"model":"svc01","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":${keys(n)}}}}]}`, '/v1/chat/completions'],
    ['a Responses request', 'x_extra', (n: number) => `{"model":"svc01","input":"Hi","x_extra":${keys(n)}}`, '/v1/responses'],
  ])('in %s is a 400 naming the limit and the field, before it is parsed', async (_where, field, body, path) => {
    const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body(200_000) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string; type: string } }).error).toMatchObject({
      type: 'invalid_request_error',
      message: `The request body has an object with more than 10,000 keys (in '${field}').`,
      param: field,
    });
  });

  it("under a megabyte-long field name: the name is quoted cut, as ids and names are, not sent back whole", async () => {
    const field = 'f'.repeat(1_000_000);
    const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: `{"model":"svc01","messages":[{"role":"user","content":"Hi"}],"${field}":${keys(10_001)}}` });
    expect(res.status).toBe(400);
    const cut = `${'f'.repeat(128)}…`;
    expect(((await res.json()) as { error: { message: string; type: string } }).error).toMatchObject({
      type: 'invalid_request_error',
      message: `The request body has an object with more than 10,000 keys (in '${cut}').`,
      param: cut,
    });
  });

  it('an array of 200,000 items and an object of 10,000 keys are read as usual', async () => {
    const items = `[${Array.from({ length: 200_000 }, (_, i) => `{"k":${i}}`).join(',')}]`;
    for (const extra of [items, keys(10_000)]) {
      const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: `{"model":"svc01","messages":[{"role":"user","content":"Hi"}],"x_extra":${extra}}` });
      expect(res.status).toBe(200);
    }
  });
});

// An array is one block of memory V8 fills in one step: 5,000,000 zeros (a 10 MB body) held the event loop 0.3–0.9 s.
describe('an array with more than 500,000 items', () => {
  const zeros = (n: number) => `[${new Array<number>(n).fill(0).join(',')}]`;
  it.each([
    ['a small body', 500_001],
    ['a 10 MB body', 5_000_000],
  ])('in %s is a 400 naming the limit and the field, before it is parsed; 500,000 are read as usual', async (_what, n) => {
    const post = (items: number) =>
      fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: `{"model":"svc01","messages":[{"role":"user","content":"Hi"}],"x_extra":${zeros(items)}}` });
    const res = await post(n);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string; type: string } }).error).toMatchObject({
      type: 'invalid_request_error',
      message: "The request body has an array with more than 500,000 items (in 'x_extra').",
      param: 'x_extra',
    });
    expect((await post(500_000)).status).toBe(200);
  });
});

describe("requests Node's HTTP parser refuses", () => {
  /** Sends `raw` on a new connection; the whole answer once the server closes it. */
  const rawExchange = (raw: string) =>
    new Promise<string>((resolve, reject) => {
      const url = new URL(server.url);
      const socket = connect({ host: url.hostname, port: Number(url.port) }, () => socket.end(raw));
      let answer = '';
      socket.setEncoding('utf8').on('data', (d: string) => (answer += d)).on('close', () => resolve(answer)).on('error', reject);
    });
  const parse = (answer: string) => {
    const [head, body] = answer.split('\r\n\r\n');
    return { status: Number(head!.split(' ')[1]), contentType: /content-type: ([^\r]+)/i.exec(head!)?.[1], body: JSON.parse(body!) as { error: Record<string, unknown> } };
  };

  it.each([
    ['headers over 16 KiB', `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'k'.repeat(100_000)}\r\n\r\n`, 431, 'invalid_request'],
    ['a request line that is not HTTP', 'HELLO THERE\r\n\r\n', 400, 'invalid_request'],
    ['Content-Length and Transfer-Encoding together', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'invalid_request'],
    ['a negative Content-Length', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n', 400, 'invalid_request'],
    // Node answers these itself: an empty 417, and a connection closed without a word.
    ['an Expect other than 100-continue', 'POST /v1/webhooks/test HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}', 417, 'invalid_request'],
    ['CONNECT, as to a proxy', 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n', 400, 'invalid_request'],
    ['an HTTP/1.1 request without Host', 'GET /healthz HTTP/1.1\r\n\r\n', 400, 'invalid_request'],
    ['an HTTP/1.1 chat request without Host', 'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}', 400, 'invalid_request'],
  ])('%s: %i in the OpenAI error shape', async (_what, raw, status, code) => {
    const answer = parse(await rawExchange(raw));
    expect(answer.status).toBe(status);
    expect(answer.contentType).toMatch(/^application\/json\b/);
    expect(answer.body.error).toMatchObject({ type: 'invalid_request_error', param: null, code, message: expect.any(String) });
  });
});

describe('a request of many short headers (under the 16 KiB limit)', () => {
  it('is read with every header: 1,500 lines before the key and the Content-Length still get the request served', async () => {
    const body = JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }] });
    const filler = Array.from({ length: 1500 }, (_, i) => `x${i}:\r\n`).join('');
    const raw = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${filler}Authorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const answer = await new Promise<string>((resolve, reject) => {
      const url = new URL(server.url);
      const socket = connect({ host: url.hostname, port: Number(url.port) }, () => socket.write(raw));
      let text = '';
      socket.setEncoding('utf8').on('data', (d: string) => (text += d)).on('close', () => resolve(text)).on('error', reject);
    });
    const [head, json] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(json!)).toMatchObject({ object: 'chat.completion', model: 'svc01' });
  });
});

describe('metadata past 16 pairs', () => {
  it.each([
    ['/v1/chat/completions', { model: 'svc01', messages: [{ role: 'user', content: 'Hi' }], store: true }],
    ['/v1/responses', { model: 'svc01', input: 'Hi' }],
  ])('%s: 17 pairs, or 100,000, are a 400 naming metadata; 16 are served', async (path, base) => {
    const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `v${i}`]));
    for (const n of [17, 100_000]) {
      const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...base, metadata: pairs(n) }) });
      expect(res.status).toBe(400);
      // 100,000 pairs are refused before the body is parsed (an object of more than 10,000 keys), still naming metadata.
      expect(((await res.json()) as { error: { param: string; message: string } }).error).toMatchObject({ param: 'metadata', message: expect.stringContaining(n === 17 ? '16 key-value pairs' : '10,000 keys') });
    }
    const ok = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...base, metadata: pairs(16) }) });
    expect(ok.status).toBe(200);
  });
});

describe('logit_bias past 300 entries', () => {
  it('301 entries, or 300,000, are a 400 naming logit_bias (OpenAI\'s limit), counted before any is read; 300 are served', async () => {
    // The 301st entry is not a number: one schema pass would answer that first, having read every entry.
    const biases = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i), n > 300 && i === n - 1 ? 'x' : -1]));
    const post = (n: number) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }], logit_bias: biases(n) }),
      });
    for (const n of [301, 300_000]) {
      const res = await post(n);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { param: string; message: string } }).error).toMatchObject({ param: 'logit_bias', message: expect.stringContaining(n === 301 ? '300 entries' : '10,000 keys') });
    }
    expect((await post(300)).status).toBe(200);
  });
});
