import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as delay } from 'node:timers/promises';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver } from './support/webhooks.js';
import { createTestPostgres } from './support/databases.js';

/**
 * What a receiver answers is kept in the attempt log, whatever its bytes. A NUL in it (`ok\0done`) could not be
 * stored in Postgres text: the attempt went unrecorded, and the delivery was sent again at every lease lapse,
 * its attempt count never rising (found by a review). On both databases it is recorded once, delivered.
 */

let upstream: FakeUpstream;
const pgDb = await createTestPostgres('webhooks-receiver-text');
const variants = [{ name: 'sqlite', url: undefined }, ...(pgDb ? [{ name: 'postgres', url: pgDb.url }] : [])];

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Hello.' });
});
afterAll(async () => {
  await upstream?.close();
  await pgDb?.drop();
});

describe.each(variants)('a receiver answering text a database cannot hold as it is ($name)', ({ url }) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      env: { SVC_UPSTREAM_BASE_URL: upstream.url, ...(url ? { SVC_DATABASE_URL: url, SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') } : {}) },
    });
  });
  afterAll(async () => server?.close());

  it('a NUL in the 200 body: delivered after one attempt, the answer kept with U+FFFD in its place', async () => {
    const receiver = await startReceiver({ status: 200, body: 'ok\u0000done' });
    try {
      const { token } = await server.createKey({ webhookUrl: receiver.url });
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      const get = async (path: string) => (await (await fetch(`${server.url}/v1${path}`, { headers: { authorization: `Bearer ${token}` } })).json()) as any;
      await expect.poll(async () => (await get('/webhooks/deliveries')).data[0]?.status, { timeout: 30_000 }).toBe('delivered');
      const [delivery] = (await get('/webhooks/deliveries')).data;
      expect(delivery.attempts).toBe(1);
      const detail = await get(`/webhooks/deliveries/${delivery.id}`);
      expect(JSON.stringify(detail)).toContain('ok\ufffddone');
      // Sent once: no lease lapse re-sends it.
      await delay(500);
      expect(receiver.received).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });
});
