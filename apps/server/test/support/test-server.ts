import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig, type Config } from '../../src/config.js';
import { startServer, type RunningServer, type StartOptions } from '../../src/server.js';
import { createLogger } from '../../src/logging/logger.js';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { hashPassword } from '../../src/auth/passwords.js';
import type { ApiKeyRecord } from '../../src/storage/keys-store.js';
import type { UserRecord } from '../../src/storage/users-store.js';
import { SecretBox } from '../../src/crypto/secret-box.js';
import { resolveSecretKey } from '../../src/crypto/embedded-key.js';
import { LOCAL_USER_EMAIL } from '../../src/auth/first-run.js';
import { openStore } from '../../src/storage/store.js';
import { eventually } from './webhooks.js';

/** Every test user's password hash: made once, since scrypt at OWASP's cost takes a while. */
let passwordHash: Promise<string> | undefined;

export interface TestServer {
  url: string;
  running: RunningServer;
  config: Config;
  /** Every log line the server wrote (JSON strings). */
  logs: string[];
  dataDir: string;
  /** A user with a key; webhook options are stored as the admin command stores them. */
  createKey(options?: {
    userId?: string;
    webhookUrl?: string | null;
    signingSecret?: string | null;
    rateLimitRpm?: number | null;
    name?: string;
  }): Promise<{ token: string; key: ApiKeyRecord; user: UserRecord }>;
  close(): Promise<void>;
}

/**
 * What the first start of an empty embedded database makes (src/auth/first-run.ts: its owner, admin@localhost, and
 * a key), made beforehand with the shared test hash: hashing the owner's generated password at OWASP's cost is most
 * of a test server's start (~0.3 s of CPU of ~0.35 s), and a suite starts hundreds. The server finds a user and
 * makes none.
 */
async function ownerMadeAlready(databaseUrl: string): Promise<void> {
  const store = await openStore(databaseUrl);
  try {
    if ((await store.users.count()) > 0) return;
    const now = Date.now();
    const user = await store.users.create({ email: LOCAL_USER_EMAIL, passwordHash: await (passwordHash ??= hashPassword('correct horse battery staple')), now });
    const key = generateApiKey();
    await store.keys.create({ userId: user.id, name: 'default', prefix: key.prefix, keyHash: key.hash, now });
  } finally {
    await store.close();
  }
}

/**
 * A real server on 127.0.0.1:0 over a fresh SQLite file (or `env.SVC_DATABASE_URL`), logs captured.
 *
 * @example
 * const srv = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: fake.url } });
 * const { token } = await srv.createKey({ webhookUrl: receiver.url });
 */
export async function startTestServer(
  options: { env?: Record<string, string>; upstream?: StartOptions['upstream']; clock?: () => number; backgroundLeaseMs?: number } = {},
): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const config = loadConfig({
    SVC_HOST: '127.0.0.1',
    SVC_PORT: '0',
    SVC_DATABASE_URL: `sqlite:${join(dataDir, 'svc.db')}`,
    SVC_LOG_LEVEL: 'info',
    ...options.env,
  });
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n')) if (line) logs.push(line);
      cb();
    },
  });
  const logger = createLogger(config.logLevel, sink);
  if (config.databaseUrl.startsWith('sqlite:')) await ownerMadeAlready(config.databaseUrl);
  const running = await startServer(config, { logger, upstream: options.upstream, clock: options.clock, backgroundLeaseMs: options.backgroundLeaseMs });
  const box = new SecretBox(resolveSecretKey(config.secretKey, running.store.handle.dataDir));
  let users = 0;
  return {
    url: running.url,
    running,
    config,
    logs,
    dataDir,
    async createKey(opts = {}) {
      const now = Date.now();
      const user =
        (opts.userId ? await running.store.users.byId(opts.userId) : undefined) ??
        (await running.store.users.create({
          email: `user${++users}-${now}@example.test`,
          passwordHash: await (passwordHash ??= hashPassword('correct horse battery staple')),
          now,
        }));
      const generated = generateApiKey();
      const key = await running.store.keys.create({
        userId: user.id,
        name: opts.name ?? 'test',
        prefix: generated.prefix,
        keyHash: generated.hash,
        now,
        rateLimitRpm: opts.rateLimitRpm ?? null,
        webhookUrl: opts.webhookUrl ?? null,
        signingSecretEnc: opts.signingSecret ? box.seal(opts.signingSecret) : null,
        signingSecretLast4: opts.signingSecret ? opts.signingSecret.slice(-4) : null,
      });
      return { token: generated.token, key, user };
    },
    async close() {
      await running.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The Usage view's counts of key `keyId` today once every count the servers had taken is written: each server then
 * answers a request of a key of its own, and the counts are read once that request's count is written (a server writes
 * all it counted so far at once, in order), so that a count taken late is not missed for not being written yet.
 *
 * @example
 * expect(await countedUsage([srv], keyId)).toMatchObject({ requests: 1 });
 */
export async function countedUsage(servers: readonly TestServer[], keyId: string): Promise<Record<string, unknown> | undefined> {
  const day = new Date().toISOString().slice(0, 10);
  for (const srv of servers) {
    const marker = await srv.createKey({ name: 'usage-marker' });
    const answered = await fetch(`${srv.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${marker.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'Hi.' }] }),
    });
    if (!answered.ok) throw new Error(`countedUsage: the marker request was answered ${answered.status}`);
    await answered.arrayBuffer();
    const store = srv.running.store;
    await eventually(async () => ((await store.usage.byDay(marker.user.id, day, marker.key.id)).length > 0 ? true : undefined), 30_000);
  }
  const { user_id: userId } = (await servers[0]!.running.store.keys.byId(keyId))!;
  const [usage] = await servers[0]!.running.store.usage.byDay(userId, day, keyId);
  return usage as Record<string, unknown> | undefined;
}
