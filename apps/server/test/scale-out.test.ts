import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPostgres, startTcpRelay, testRedis } from './support/databases.js';
import { Agent, request } from 'undici';
import { adminCommand, adminCommandAsync, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';
import { eventually, startReceiver } from './support/webhooks.js';

const pgDb = await createTestPostgres('scale-out');
const redis = await testRedis('scale-out');
const enabled = Boolean(pgDb && redis);
if (!enabled) console.warn('[scale-out] SKIPPED: needs both Postgres and Redis');

const env = serverEnv({
  SVC_DATABASE_URL: pgDb?.url ?? '',
  SVC_REDIS_URL: redis?.url ?? '',
  SVC_SECRET_KEY: randomBytes(32).toString('base64'),
  SVC_WEBHOOK_TIMEOUT_MS: '2000',
  SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,400ms,800ms,1s,1s,1s,1s,1s',
  SVC_RATE_LIMIT_RPM: '100000',
});
const servers: ServerProcess[] = [];

beforeAll(async () => {
  if (!enabled) return;
  adminCommand(['migrate'], env);
  adminCommand(['users', 'create', '--email', 'ops@example.com', '--password', 'long-enough-pw'], env);
  servers.push(await startServerProcess(env), await startServerProcess(env));
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop('SIGKILL')));
  await pgDb?.drop();
});

function createKey(extra: string[] = []): { id: string; key: string } {
  return JSON.parse(adminCommand(['keys', 'create', '--email', 'ops@example.com', '--json', ...extra], env));
}

const models = (url: string, key: string) => fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });

describe.skipIf(!enabled)('two instances on one Postgres and one Redis', () => {
  it('share one rate limit: 100/min, 300 requests alternating between instances → exactly 100 succeed', async () => {
    const { key } = createKey(['--rate-limit-rpm', '100']);
    const statuses: number[] = [];
    for (let i = 0; i < 300; i += 10) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, (_, j) => models(servers[(i + j) % 2]!.url, key).then((r) => r.status)),
      );
      statuses.push(...batch);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.filter((s) => s === 429)).toHaveLength(200);
  });

  it('share the dashboard sign-in limits: 6 wrong passwords alternating between instances → the 6th is refused', async () => {
    // Redis outlives a run: an email of its own, so an earlier run's counts do not show.
    const email = `signin-${randomBytes(4).toString('hex')}@example.test`;
    adminCommand(['users', 'create', '--email', email, '--password', 'long-enough-pw'], env);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${servers[i % 2]!.url}/dashboard/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: `wrong ${i}` }),
      });
      await res.body?.cancel();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
  });

  it('a key revoked through one instance’s database is refused by the other within 2 s', async () => {
    const { id, key } = createKey();
    const [a, b] = servers as [ServerProcess, ServerProcess];
    // warm both caches with the valid key
    expect((await models(a.url, key)).status).toBe(200);
    expect((await models(b.url, key)).status).toBe(200);
    adminCommand(['keys', 'revoke', id], env);
    // Both refuse it by 2 s after the revocation (asked again until then: each cache holds a key for 1 s).
    await expect
      .poll(async () => Promise.all([a, b].map(async (s) => (await models(s.url, key)).status)), { timeout: 2000, interval: 100 })
      .toEqual([401, 401]);
  });

  it('both instances serve completions on the shared database', async () => {
    const { key } = createKey();
    for (const server of servers) {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'system', content: 'Cats sleep a lot.' }, { role: 'user', content: 'Do cats sleep?' }] }),
      });
      expect(res.status).toBe(200);
    }
  });
});

describe.skipIf(!enabled)('test sends over two instances', () => {
  it('at most 4 of a key wait on its receiver at once, whichever instances they were sent to', async () => {
    // Was per process: 4 on each instance, 8 here, 4 × N behind a load balancer.
    const receiver = await startReceiver();
    let release!: () => void;
    receiver.fallback = { until: new Promise<void>((resolve) => (release = resolve)) };
    const { key } = createKey(['--webhook-url', `${receiver.url}/hook`]);
    const test = (url: string) => fetch(`${url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
    try {
      const waiting = servers.flatMap((s) => [test(s.url), test(s.url)]);
      await receiver.waitFor((r) => r.length === 4, 30_000);
      const refused = await Promise.all(servers.map((s) => test(s.url)));
      expect(refused.map((r) => r.status)).toEqual([429, 429]);
      expect(refused.every((r) => Number(r.headers.get('retry-after')) > 0)).toBe(true);
      release();
      expect((await Promise.all(waiting)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
      receiver.fallback = {};
      expect(((await (await test(servers[1]!.url)).json()) as { success: boolean }).success).toBe(true);
      expect(receiver.received).toHaveLength(5);
    } finally {
      release();
      await receiver.close();
    }
  });
});

const CHAT = JSON.stringify({
  model: 'svc01',
  messages: [{ role: 'system', content: 'Owls hunt at night.' }, { role: 'user', content: 'When do owls hunt?' }],
});

/** Sends `count` chat requests spread over `targets` (10 at a time); returns the completion ids. */
async function chatBurst(targets: string[], key: string, count: number): Promise<string[]> {
  const dispatcher = new Agent({ connections: 10 });
  const ids: string[] = [];
  try {
    for (let i = 0; i < count; i += 10) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(10, count - i) }, async (_, j) => {
          const res = await request(`${targets[(i + j) % targets.length]}/v1/chat/completions`, {
            method: 'POST',
            dispatcher,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: CHAT,
          });
          const body = (await res.body.json()) as { id: string };
          expect(res.statusCode).toBe(200);
          return body.id;
        }),
      );
      ids.push(...batch);
    }
  } finally {
    await dispatcher.close();
  }
  return ids;
}

const requestIdOf = (raw: Buffer) => (JSON.parse(raw.toString('utf8')) as { request_id: string }).request_id;

describe.skipIf(!enabled)('two instances sharing one delivery queue', () => {
  it('1,000 requests over both instances: 1,000 distinct deliveries, none sent twice', async () => {
    const receiver = await startReceiver();
    try {
      const { key } = createKey(['--webhook-url', `${receiver.url}/hook`, '--signing-secret', 'whsec_scale_out_test']);
      const ids = await chatBurst(servers.map((s) => s.url), key, 1000);
      expect(new Set(ids).size).toBe(1000);
      await receiver.waitFor((r) => new Set(r.map((d) => d.headers['x-svc-delivery'])).size >= 1000, 120_000);
      // give a duplicate the chance to show up before counting
      await new Promise((r) => setTimeout(r, 1000));
      const deliveryIds = receiver.received.map((d) => String(d.headers['x-svc-delivery']));
      expect(new Set(deliveryIds).size).toBe(1000);
      expect(deliveryIds).toHaveLength(1000);
      expect(new Set(receiver.received.map((d) => requestIdOf(d.raw)))).toEqual(new Set(ids));
      // both instances took part in sending
      expect(servers.every((s) => s.child.exitCode === null)).toBe(true);
    } finally {
      await receiver.close();
    }
  }, 240_000);

  it('an instance SIGKILLed while holding claims: the other delivers everything after the lease lapses', async () => {
    // Slow receiver: instance A's attempts are in flight (claimed) when it is killed.
    const receiver = await startReceiver({ delayMs: 1500 });
    const spare = await startServerProcess(env);
    try {
      const { key } = createKey(['--webhook-url', `${receiver.url}/hook`]);
      const ids = await chatBurst([spare.url], key, 60);
      await receiver.waitFor((r) => r.length >= 5, 30_000);
      await spare.stop('SIGKILL');
      receiver.fallback = {};
      await receiver.waitFor((r) => ids.every((id) => r.some((d) => requestIdOf(d.raw) === id)), 90_000);
      const byRequest = new Map<string, Set<string>>();
      for (const d of receiver.received) {
        const set = byRequest.get(requestIdOf(d.raw)) ?? new Set();
        set.add(String(d.headers['x-svc-delivery']));
        byRequest.set(requestIdOf(d.raw), set);
      }
      // every request's delivery arrived, under one delivery id (retries reuse it)
      for (const id of ids) expect(byRequest.get(id)?.size).toBe(1);
    } finally {
      await spare.stop('SIGKILL');
      await receiver.close();
    }
  }, 150_000);
});

describe.skipIf(!enabled)('Redis that stops answering mid-run (frozen, or a partition without a reset)', () => {
  it('both instances keep answering, each counting alone; once Redis answers again the limit is shared again', { timeout: 150_000 }, async () => {
    const relay = await startTcpRelay(redis!.url);
    const pair = await Promise.all([startServerProcess({ ...env, SVC_REDIS_URL: relay.url }), startServerProcess({ ...env, SVC_REDIS_URL: relay.url })]);
    // A hang shows as an abort; 20 s is far past any wait svc itself allows.
    const status = (url: string, key: string) => fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(20_000) }).then((r) => r.status);
    const redisUp = async (url: string) => /^svc_redis_up 1$/m.test(await (await fetch(`${url}/metrics`)).text());
    try {
      const { key } = createKey();
      expect(await Promise.all(pair.map((s) => status(s.url, key)))).toEqual([200, 200]);
      relay.hold();
      const held: number[] = [];
      for (let i = 0; i < 20; i += 1) held.push(await status(pair[i % 2]!.url, key));
      expect(held).toEqual(Array(20).fill(200));
      // The silent connection has been dropped (the relay threw its answers away: that connection is no use after).
      for (const s of pair) await eventually(async () => !(await redisUp(s.url)), 30_000);
      await relay.restore();
      // Shared again: a fresh 5/min key gets exactly 5 of 10 requests alternating between the instances (each
      // counting alone would let 10 through). Each round a new key, until both count in Redis.
      await eventually(async () => {
        if (!(await redisUp(pair[0]!.url)) || !(await redisUp(pair[1]!.url))) return false;
        // Not createKey: a synchronous command would freeze the relay, which lives in this process, past the watchdog's ping.
        const limited = JSON.parse(await adminCommandAsync(['keys', 'create', '--email', 'ops@example.com', '--json', '--rate-limit-rpm', '5'], env)).key;
        const statuses: number[] = [];
        for (let i = 0; i < 10; i += 1) statuses.push(await status(pair[i % 2]!.url, limited));
        // Shared: 5 pass. Counting alone, each instance sees 5 and all 10 pass, so any refusal shows the count is
        // shared. A loaded host can time out a Redis command now and then (500 ms), which counts that one request
        // on its instance alone: a few more than 5 may pass.
        const passed = statuses.filter((s) => s === 200).length;
        return passed >= 5 && passed < 10;
      }, 60_000);
    } finally {
      await Promise.all(pair.map((s) => s.stop('SIGKILL')));
      await relay.close();
    }
  });
});
