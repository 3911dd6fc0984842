import { randomBytes } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPostgres, startTcpRelay, testRedis } from './support/databases.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { giveBackFreePages } from '../src/storage/sqlite-free-pages.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';

const TOKEN = 'metrics-token-for-tests';
const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889.';
const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'svc01',
  messages: [{ role: 'system', content: DOC }, { role: 'user', content: 'Where is the Eiffel Tower?' }],
  ...extra,
});

let upstream: FakeUpstream;
let receiver: Receiver;
let server: TestServer;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'The Eiffel Tower is in Paris.' });
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_METRICS_TOKEN: TOKEN } });
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

async function post(path: string, token: string | undefined, body?: unknown): Promise<Response> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res;
}

async function scrape(url = server.url, token: string | undefined = TOKEN): Promise<string> {
  const res = await fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

/** The value of one series (labels in any order), or undefined when it is not exposed. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(match[3]);
  }
  return undefined;
}

describe('GET /metrics', () => {
  it('needs the metrics token when SVC_METRICS_TOKEN is set', async () => {
    expect((await fetch(`${server.url}/metrics`)).status).toBe(401);
    const wrong = await fetch(`${server.url}/metrics`, { headers: { authorization: 'Bearer not-the-token' } });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    // An API key is not a metrics token.
    const { token } = await server.createKey();
    expect((await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
  });

  it('counts requests, latency, time to first token, upstream, grounding, rate limits, webhooks and the outbox', async () => {
    const { token } = await server.createKey({ webhookUrl: receiver.url });
    const limited = await server.createKey({ rateLimitRpm: 1 });
    const plain = await server.createKey();

    // A test delivery the receiver refuses: one failed attempt, no retries, the delivery is `failed`.
    receiver.queue.push({ status: 500 });
    expect((await post('/v1/webhooks/test', token)).status).toBe(200);

    expect((await post('/v1/chat/completions', token, chat())).status).toBe(200);
    expect((await post('/v1/chat/completions', limited.token, chat({ stream: true }))).status).toBe(200);
    upstream.nextBehavior({ status: 500 });
    expect((await post('/v1/chat/completions', plain.token, chat())).status).toBe(502);
    expect((await post('/v1/chat/completions', limited.token, chat())).status).toBe(429);
    expect((await post('/v1/chat/completions', undefined, chat())).status).toBe(401);

    await receiver.waitFor((received) => received.length >= 2);
    const text = await eventually(async () => {
      const t = await scrape();
      return sample(t, 'svc_webhook_attempts_total', { outcome: 'success' }) === 1 ? t : undefined;
    });

    const chatRoute = { method: 'POST', route: '/v1/chat/completions' };
    expect(sample(text, 'svc_http_requests_total', { ...chatRoute, status: '200' })).toBe(2);
    expect(sample(text, 'svc_http_requests_total', { ...chatRoute, status: '502' })).toBe(1);
    expect(sample(text, 'svc_http_requests_total', { ...chatRoute, status: '429' })).toBe(1);
    expect(sample(text, 'svc_http_requests_total', { ...chatRoute, status: '401' })).toBe(1);
    expect(sample(text, 'svc_http_requests_total', { method: 'POST', route: '/v1/webhooks/test', status: '200' })).toBe(1);
    expect(sample(text, 'svc_http_request_duration_seconds_count', { ...chatRoute, status: '200' })).toBe(2);
    expect(sample(text, 'svc_http_request_duration_seconds_bucket', { ...chatRoute, status: '200', le: '+Inf' })).toBe(2);

    expect(sample(text, 'svc_chat_time_to_first_token_seconds_count')).toBe(1);
    expect(sample(text, 'svc_upstream_request_duration_seconds_count', { mode: 'complete', outcome: 'ok' })).toBe(1);
    expect(sample(text, 'svc_upstream_request_duration_seconds_count', { mode: 'stream', outcome: 'ok' })).toBe(1);
    expect(sample(text, 'svc_upstream_request_duration_seconds_count', { mode: 'complete', outcome: 'error' })).toBe(1);
    expect(sample(text, 'svc_upstream_errors_total', { code: 'upstream_error' })).toBe(1);

    expect(sample(text, 'svc_grounding_check_duration_seconds_count')).toBe(2);
    const verdicts = ['grounded', 'ungrounded', 'not_checked'].map((verdict) => sample(text, 'svc_grounding_checks_total', { verdict }) ?? 0);
    expect(verdicts.reduce((a, b) => a + b)).toBe(2);
    expect(verdicts[0]).toBeGreaterThan(0);

    expect(sample(text, 'svc_rate_limit_rejections_total')).toBe(1);
    expect(sample(text, 'svc_webhook_attempts_total', { outcome: 'success' })).toBe(1);
    expect(sample(text, 'svc_webhook_attempts_total', { outcome: 'failure' })).toBe(1);
    expect(sample(text, 'svc_webhook_delivery_latency_seconds_count')).toBe(1);
    expect(sample(text, 'svc_webhook_outbox_deliveries', { state: 'failed' })).toBe(1);
    expect(sample(text, 'svc_webhook_outbox_deliveries', { state: 'pending' })).toBe(0);
    expect(sample(text, 'svc_webhook_outbox_deliveries', { state: 'due' })).toBe(0);

    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
  });
});

describe('the route label', () => {
  // The Responses API and /v1/models/{model} were all counted as `unmatched`, beside scanners' paths: their traffic,
  // errors and latency could not be told apart on a dashboard.
  it('is the template of every public route, the Responses API and a model by id included; other paths are unmatched', async () => {
    const { token } = await server.createKey();
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: () => JSON.parse(text) as { id: string } };
    };
    const created = await call('POST', '/v1/responses', { model: 'svc01', input: 'Where is the Eiffel Tower?', instructions: DOC });
    expect(created.status).toBe(200);
    const id = created.json().id;
    const calls: Array<[method: string, path: string, route: string, status: number, body?: unknown]> = [
      ['GET', `/v1/responses/${id}`, '/v1/responses/:id', 200],
      ['GET', `/v1/responses/${id}/input_items`, '/v1/responses/:id/input_items', 200],
      ['POST', `/v1/responses/${id}/cancel`, '/v1/responses/:id/cancel', 400],
      ['DELETE', `/v1/responses/${id}`, '/v1/responses/:id', 200],
      ['GET', '/v1/models/svc01', '/v1/models/:model', 200],
      ['GET', '/v1/models/gpt-4o', '/v1/models/:model', 404],
      ['POST', '/v1/webhooks/deliveries/redeliver', '/v1/webhooks/deliveries/redeliver', 200, { dry_run: true }],
      ['POST', '/v1/webhooks/deliveries/whd_00000000000000000000000000000000/cancel', '/v1/webhooks/deliveries/:id/cancel', 404],
      ['GET', '/v1/no-such-route', 'unmatched', 404],
    ];
    for (const [method, path, , status, body] of calls) expect([path, (await call(method, path, body)).status]).toEqual([path, status]);

    const text = await scrape();
    expect(sample(text, 'svc_http_requests_total', { method: 'POST', route: '/v1/responses', status: '200' })).toBe(1);
    for (const [method, path, route, status] of calls) {
      expect([path, sample(text, 'svc_http_requests_total', { method, route, status: String(status) })]).toEqual([path, expect.any(Number)]);
    }
  });
});

describe('GET /metrics without SVC_METRICS_TOKEN', () => {
  it('answers loopback clients and is a 404 for everyone else', async () => {
    const open = await startTestServer({ env: { SVC_HOST: '0.0.0.0', SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
    try {
      const port = new URL(open.url).port;
      expect(await scrape(`http://127.0.0.1:${port}`, undefined)).toContain('svc_http_requests_total');
      const external = Object.values(networkInterfaces())
        .flat()
        .find((i) => i && !i.internal && i.family === 'IPv4');
      if (external) {
        const res = await fetch(`http://${external.address}:${port}/metrics`);
        expect(res.status).toBe(404);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
        // Everything else on that address still answers.
        expect((await fetch(`http://${external.address}:${port}/healthz`)).status).toBe(200);
      }
    } finally {
      await open.close();
    }
  });
});

describe('GET /metrics without SVC_METRICS_TOKEN behind a reverse proxy on the same host', () => {
  it('a forwarded request is not a loopback client (404), whether SVC_TRUST_PROXY names the proxy or not; a local scrape still answers', async () => {
    for (const env of [{}, { SVC_TRUST_PROXY: 'loopback' }] as Array<Record<string, string>>) {
      const srv = await startTestServer({ env });
      try {
        for (const headers of [{ 'x-forwarded-for': '203.0.113.9' }, { forwarded: 'for=203.0.113.9;proto=https' }, { 'x-real-ip': '203.0.113.9' }, { 'x-forwarded-proto': 'https' }] as Array<Record<string, string>>) {
          const res = await fetch(`${srv.url}/metrics`, { headers });
          expect(res.status, `${JSON.stringify(env)} ${JSON.stringify(headers)}`).toBe(404);
          expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
        }
        expect(await scrape(srv.url, undefined)).toContain('svc_http_requests_total');
      } finally {
        await srv.close();
      }
    }
  });
});

describe('GET /metrics while the database takes no writes (a full disk, a read-only file system)', () => {
  it('svc_database_up is 0, though reads still work; 1 again once it takes writes', async () => {
    const sqlite = server.running.store.handle.sqlite!;
    expect(sample(await scrape(), 'svc_database_up')).toBe(1);
    sqlite.pragma('query_only = ON');
    try {
      const text = await scrape();
      // Was 1: the scrape only read, while /readyz (a write) answered 503.
      expect(sample(text, 'svc_database_up')).toBe(0);
      expect(sample(text, 'svc_webhook_outbox_deliveries', { state: 'pending' })).toBe(0);
    } finally {
      sqlite.pragma('query_only = OFF');
    }
    expect(sample(await scrape(), 'svc_database_up')).toBe(1);
  });
});

describe('GET /metrics: the SQLite file\'s free space', () => {
  it('svc_database_free_bytes counts the pages deleted rows left, and is 0 once they are given back', async () => {
    const sqlite = server.running.store.handle.sqlite!;
    await giveBackFreePages(sqlite);
    expect(sample(await scrape(), 'svc_database_free_bytes', { reclaimable: '1' })).toBe(0);
    const insert = sqlite.prepare("insert into svc_meta (key, value) values (?, ?)");
    for (let i = 0; i < 100; i++) insert.run(`metrics_free_${i}`, 'x'.repeat(30_000));
    sqlite.prepare("delete from svc_meta where key like 'metrics_free_%'").run();
    expect(sample(await scrape(), 'svc_database_free_bytes', { reclaimable: '1' })).toBeGreaterThan(2_000_000);
    await giveBackFreePages(sqlite);
    expect(sample(await scrape(), 'svc_database_free_bytes', { reclaimable: '1' })).toBe(0);
  });
});

const pgDb = await createTestPostgres('metrics');

describe.skipIf(!pgDb)('GET /metrics while Postgres is unreachable', () => {
  it('still answers, with svc_database_up 0 and no outbox counts, and 1 again once it is back', async () => {
    const relay = await startTcpRelay(pgDb!.url);
    const svc = await startTestServer({
      env: { SVC_DATABASE_URL: relay.url, SVC_SECRET_KEY: randomBytes(32).toString('base64'), SVC_METRICS_TOKEN: TOKEN },
    });
    try {
      let text = await scrape(svc.url);
      expect(sample(text, 'svc_database_up')).toBe(1);
      expect(sample(text, 'svc_webhook_outbox_deliveries', { state: 'pending' })).toBe(0);

      await relay.cut();
      // Was a 500: the outbox gauge's failed read failed the whole scrape, so an outage had no metrics at all.
      text = await scrape(svc.url);
      expect(sample(text, 'svc_database_up')).toBe(0);
      expect(sample(text, 'svc_webhook_outbox_deliveries', { state: 'pending' })).toBeUndefined();
      expect(sample(text, 'svc_http_requests_total', { method: 'GET', route: '/metrics', status: '200' })).toBeGreaterThan(0);
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(503);

      await relay.restore();
      await eventually(async () => expect(sample(await scrape(svc.url), 'svc_database_up')).toBe(1));
    } finally {
      await relay.restore();
      await svc.close();
      await relay.close();
      await pgDb!.drop();
    }
  });
});

const redis = await testRedis('metrics');

describe.skipIf(!redis)('Redis lost and back', () => {
  it('svc_redis_up follows it, and the log says so once each way (not at every reconnection attempt)', async () => {
    const relay = await startTcpRelay(redis!.url);
    const svc = await startTestServer({ env: { SVC_REDIS_URL: relay.url, SVC_METRICS_TOKEN: TOKEN } });
    const lines = (msg: string) => svc.logs.filter((line) => (JSON.parse(line) as { msg: string }).msg.startsWith(msg));
    try {
      expect(sample(await scrape(svc.url), 'svc_redis_up')).toBe(1);
      await relay.cut();
      await eventually(async () => sample(await scrape(svc.url), 'svc_redis_up') === 0);
      // ioredis reconnects every 50 ms to 2 s for as long as it is down, each a connection refused: each was a warn line.
      await eventually(() => svc.logs.filter((line) => line.includes('ECONNREFUSED')).length >= 1);
      await relay.restore();
      await eventually(async () => sample(await scrape(svc.url), 'svc_redis_up') === 1);
      expect(lines('redis unavailable')).toHaveLength(1);
      expect(lines('redis reachable again')).toHaveLength(1);
    } finally {
      await relay.restore();
      await svc.close();
      await relay.close();
    }
  });
});
