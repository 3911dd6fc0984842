import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDeduper, type AuditPayload } from '@svc/verify';
import { verifyMiddleware } from '@svc/verify/express';
import express from 'express';
import { Redis } from 'ioredis';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisDedupeStore } from '../../../docs/receivers/redis-dedupe-store.js';
import { generateSigningSecret } from '../src/crypto/secret-box.js';
import { testRedis } from './support/databases.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';

// docs/webhooks.md's Redis recipe for createDeduper, against the real Redis and real svc deliveries.
const target = await testRedis('receiver-dedupe-redis');

describe.skipIf(!target)('redisDedupeStore (docs/receivers/redis-dedupe-store.ts)', () => {
  let redis: Redis;
  let upstream: FakeUpstream;
  let server: TestServer;
  const receivers: Server[] = [];

  beforeAll(async () => {
    redis = new Redis(target!.url);
    upstream = await startFakeUpstream({ answer: 'Paris.' });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_RETRY_SCHEDULE: '1s' } });
  });

  afterAll(async () => {
    for (const r of receivers) r.close();
    await server?.close();
    await upstream?.close();
    const keys = await redis.keys(`${target!.prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  const store = () => redisDedupeStore(redis, `${target!.prefix}:`);

  it('claims an id once across receiver processes, however many deliveries race, for ttlSeconds; release frees it', async () => {
    // Two dedupers on one Redis: two receiver processes.
    const a = createDeduper({ store: store(), ttlSeconds: 60 });
    const b = createDeduper({ store: store(), ttlSeconds: 60 });
    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).claim('whd_race')));
    expect(claims.filter(Boolean)).toHaveLength(1);
    const ttl = await redis.ttl(`${target!.prefix}:whd_race`);
    expect(ttl).toBeGreaterThan(55);
    expect(ttl).toBeLessThanOrEqual(60);
    await b.release('whd_race');
    expect(await a.claim('whd_race')).toBe(true);
  });

  it('processes a real delivery once with an Express receiver: the failed attempt is retried, a redelivery is answered svc-duplicate: true', async () => {
    const secret = generateSigningSecret();
    const processed: AuditPayload[] = [];
    let failNext = true;
    const app = express();
    app.post('/webhooks/svc', verifyMiddleware({ secret, dedupe: createDeduper({ store: store() }) }), (req, res) => {
      if (failNext) {
        failNext = false;
        return void res.sendStatus(503);
      }
      processed.push(req.svcEvent!);
      res.sendStatus(204);
    });
    const receiver = createServer(app).listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    receivers.push(receiver);

    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/svc`;
    const { token } = await server.createKey({ webhookUrl: url, signingSecret: secret });
    const api = async <T>(method: string, path: string): Promise<T> => {
      const res = await fetch(`${server.url}/v1${path}`, { method, headers: { authorization: `Bearer ${token}` } });
      return (await res.json()) as T;
    };
    type Detail = { status: string; attempt_log: Array<{ status_code: number | null; response_body: string | null }> };
    const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
    const { id: requestId } = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Where?' }] });

    // The first attempt gets 503, which releases the id: svc's retry is processed.
    await expect.poll(() => processed.length, { timeout: 30_000 }).toBe(1);
    expect(processed[0]!.request_id).toBe(requestId);
    const [delivery] = (await api<{ data: Array<{ id: string }> }>('GET', '/webhooks/deliveries')).data;
    const detail = () => api<Detail>('GET', `/webhooks/deliveries/${delivery!.id}`);
    await expect.poll(async () => (await detail()).status, { timeout: 30_000 }).toBe('delivered');

    // A redelivery (same id) is acknowledged without being processed again.
    await api('POST', `/webhooks/deliveries/${delivery!.id}/redeliver`);
    const log = async () => (await detail()).attempt_log;
    await expect.poll(async () => (await log()).length, { timeout: 30_000 }).toBe(3);
    expect((await log()).map((a) => [a.status_code, a.response_body])).toEqual(
      expect.arrayContaining([[503, expect.anything()], [204, expect.anything()], [200, '{"duplicate":true}']]),
    );
    expect(processed).toHaveLength(1);
  });
});
