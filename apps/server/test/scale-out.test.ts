import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPostgres, testRedis } from '../src/test-support/databases.js';
import { adminCommand, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';

const pgDb = await createTestPostgres('scale-out');
const redis = await testRedis('scale-out');
const enabled = Boolean(pgDb && redis);
if (!enabled) console.warn('[scale-out] SKIPPED: needs both Postgres and Redis');

const env = serverEnv({
  SVC_DATABASE_URL: pgDb?.url ?? '',
  SVC_REDIS_URL: redis?.url ?? '',
  SVC_SECRET_KEY: randomBytes(32).toString('base64'),
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

  it('a key revoked through one instance’s database is refused by the other within 2 s', async () => {
    const { id, key } = createKey();
    const [a, b] = servers as [ServerProcess, ServerProcess];
    // warm both caches with the valid key
    expect((await models(a.url, key)).status).toBe(200);
    expect((await models(b.url, key)).status).toBe(200);
    adminCommand(['keys', 'revoke', id], env);
    await new Promise((r) => setTimeout(r, 2000));
    expect((await models(a.url, key)).status).toBe(401);
    expect((await models(b.url, key)).status).toBe(401);
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
