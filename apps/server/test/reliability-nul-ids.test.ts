import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPostgres } from './support/databases.js';
import { startTestServer, type TestServer } from './support/test-server.js';

// A NUL in an id or a query value: svc makes no id with one, and Postgres refuses NUL in text, so a lookup of one
// there failed with a 500 internal_error (SQLSTATE 22021): every route reading an id from the URL, the ids a
// Responses request names in its body, and a dashboard sign-in's email.

const URLS: Array<[method: string, path: string]> = [
  ['GET', '/v1/webhooks/deliveries?request_id=chatcmpl-a%00b'],
  ['GET', '/v1/webhooks/deliveries/whd_%00'],
  ['POST', '/v1/webhooks/deliveries/whd_%00/redeliver'],
  ['GET', '/v1/responses/resp_%00'],
  ['GET', '/v1/responses/resp_%00/input_items'],
  ['POST', '/v1/responses/resp_%00/cancel'],
  ['DELETE', '/v1/responses/resp_%00'],
];

const postgres = await createTestPostgres('reliability-nul-ids');
const databases: Array<[name: string, env: () => Record<string, string>]> = [['SQLite', () => ({})]];
if (postgres) databases.push(['Postgres', () => ({ SVC_DATABASE_URL: postgres.url, SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') })]);

afterAll(async () => {
  await postgres?.drop();
});

describe.each(databases)('a NUL in the URL on %s', (_name, env) => {
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer({ env: env() });
    ({ token } = await server.createKey({ webhookUrl: 'https://example.com/hooks' }));
  });
  afterAll(async () => {
    await server.close();
  });

  it.each(URLS)('%s %s is a 400 invalid_request saying so', async (method, path) => {
    const res = await fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: {
        message: 'The request URL holds a NUL character (%00): no id or parameter of this API contains one.',
        type: 'invalid_request_error',
        code: 'invalid_request',
        param: null,
      },
    });
  });

  it.each([
    ['previous_response_id', { previous_response_id: 'resp_\u0000' }, "Previous response with id 'resp_\u0000' not found."],
    ['input[0]', { input: [{ type: 'item_reference', id: 'msg_\u0000' }] }, "Item with id 'msg_\u0000' not found."],
  ])('a Responses request naming an id with a NUL in %s is a 404 not_found, as any unknown id', async (param, fields, message) => {
    const res = await fetch(`${server.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', input: 'hello', ...fields }),
    });
    expect(res.status).toBe(404);
    const { error } = (await res.json()) as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: 'not_found', param });
    expect(error.message).toContain(message);
  });

  it('a dashboard sign-in with a NUL in its email is a 400 naming the email', async () => {
    const res = await fetch(`${server.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: server.url },
      body: JSON.stringify({ email: 'owner\u0000@example.com', password: 'correct horse battery staple' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_value', param: 'email' });
  });

  it.each([true, false])('a bulk redelivery naming a request id with a NUL (dry_run %s) is a 400 naming request_id', async (dryRun) => {
    const res = await fetch(`${server.url}/v1/webhooks/deliveries/redeliver`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ request_id: 'chatcmpl-a\u0000b', dry_run: dryRun }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toEqual({
      message: "Invalid 'request_id': it holds a NUL character (\\u0000), which no request id contains.",
      type: 'invalid_request_error',
      code: 'invalid_value',
      param: 'request_id',
    });
  });

  it('still answers the same route without it', async () => {
    const res = await fetch(`${server.url}/v1/webhooks/deliveries?request_id=chatcmpl-ab`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: unknown[] }).data).toEqual([]);
  });
});
