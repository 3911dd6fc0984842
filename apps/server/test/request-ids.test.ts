// x-request-id names the request in a form that fits its route: a chat completion's `chatcmpl-…` (its body's `id`)
// only on the chat route; `req_…` elsewhere. /v1/models and /v1/responses answered with `chatcmpl-…`, an id of a
// chat completion that never existed, which the dashboard's and the CLI's delivery search then showed beside it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let token: string;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Paris is the capital of France.' });
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
  ({ token } = await server.createKey({ webhookUrl: receiver.url }));
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

const call = (path: string, body?: object) =>
  fetch(`${server.url}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });

describe('x-request-id', () => {
  it('is the chat completion’s own id on the chat route, in each spelling Express routes there', async () => {
    for (const path of ['/v1/chat/completions', '/V1/Chat/Completions/', '/v1/chat/completions?x=1']) {
      const res = await call(path, { model: 'svc01', messages: [{ role: 'user', content: 'Capital of France?' }] });
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      expect(id).toMatch(/^chatcmpl-/);
      expect(res.headers.get('x-request-id')).toBe(id);
    }
  });

  it('is req_… on /v1/models, on an unknown route and on /v1/responses, whose delivery carries it as request_id', async () => {
    // A GET of the chat route too: no completion is made there.
    for (const path of ['/v1/models', '/v1/models/svc01', '/v1/nothing-here', '/v1/chat/completions']) {
      expect((await call(path)).headers.get('x-request-id')).toMatch(/^req_[\w-]{24}$/);
    }
    const res = await call('/v1/responses', { model: 'svc01', input: 'Capital of France?' });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id');
    expect(requestId).toMatch(/^req_[\w-]{24}$/);
    expect(((await res.json()) as { id: string }).id).toMatch(/^resp_/);
    const [delivery] = await receiver.waitFor((got) => got.some((d) => JSON.parse(d.raw.toString()).request_id === requestId));
    expect(delivery).toBeDefined();
  });
});
