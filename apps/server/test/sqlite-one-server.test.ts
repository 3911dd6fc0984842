// Two servers started separately on one SQLite file (not through SVC_PROCESSES): each counted rate limits in its own
// memory, so a key got its limit once per server, silently; and each start released the webhook leases it found,
// re-sending what the other had in flight. The second start is now refused, naming what to use instead.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logging/logger.js';
import { startServer } from '../src/server.js';
import { openStore } from '../src/storage/store.js';
import { holdServerLock, SqliteServerRunningError } from '../src/storage/sqlite-server-lock.js';
import { SERVER_BIN, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';
import { startTestServer, type TestServer } from './support/test-server.js';

const servers: TestServer[] = [];
const processes: ServerProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await Promise.all(processes.splice(0).map((p) => p.stop()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function server(env: Record<string, string> = {}): Promise<TestServer> {
  const s = await startTestServer({ env });
  servers.push(s);
  return s;
}

/** `svc-server start` with `env` to its exit: the exit code and what it wrote to stderr. */
function startToExit(env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SERVER_BIN, 'start'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    // 'close': after the last of stderr (node emits 'exit' before it).
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('one server per SQLite file', () => {
  it('a second server on a file another serves is refused, saying why and naming SVC_PROCESSES, Postgres and Redis; once the first stopped it starts', async () => {
    const first = await server();
    const err = await startTestServer({ env: { SVC_DATABASE_URL: first.config.databaseUrl } }).then(
      (s) => (servers.push(s), undefined),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SqliteServerRunningError);
    expect((err as Error).message).toMatch(/another svc server is already running on .*svc\.db/);
    expect((err as Error).message).toContain('once per server');
    expect((err as Error).message).toContain('SVC_PROCESSES=<n>');
    expect((err as Error).message).toContain('SVC_REDIS_URL');
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    await first.running.close();
    const again = await server({ SVC_DATABASE_URL: first.config.databaseUrl });
    expect((await fetch(`${again.url}/healthz`)).status).toBe(200);
  });

  it("a start refused beside a serving server leaves the file's schema as that server has it (a new release started beside the old one)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-one-server-'));
    dirs.push(dir);
    const url = `sqlite:${join(dir, 'svc.db')}`;
    // The release before 017 serving its database: its table and its row gone (released migrations are never edited).
    const serving = await openStore(url);
    serving.handle.sqlite!.exec("drop table webhook_payloads; delete from kysely_migration where name = '017_delivery_payloads'");
    const lock = holdServerLock(serving.handle);
    try {
      const config = loadConfig({ SVC_HOST: '127.0.0.1', SVC_PORT: '0', SVC_DATABASE_URL: url, SVC_LOG_LEVEL: 'silent' });
      const err = await startServer(config, { logger: createLogger('silent') }).then(
        (running) => running.close(),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SqliteServerRunningError);
      // Was migrated before the refusal: the serving release then met a schema it does not know.
      const schema = new Database(join(dir, 'svc.db'), { readonly: true });
      try {
        expect(schema.prepare("select name from kysely_migration where name = '017_delivery_payloads'").all()).toEqual([]);
        expect(schema.prepare("select name from sqlite_master where name = 'webhook_payloads'").all()).toEqual([]);
      } finally {
        schema.close();
      }
    } finally {
      lock.release();
      await serving.close();
    }
  });

  it('a server started by a link to the database file meets the lock of one started by its real path', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-one-server-'));
    dirs.push(dir);
    const serving = await openStore(`sqlite:${join(dir, 'svc.db')}`);
    const lock = holdServerLock(serving.handle);
    // Another directory whose svc.db is a link to that file (SQLite follows it: one database, one WAL).
    mkdirSync(join(dir, 'elsewhere'));
    symlinkSync(join(dir, 'svc.db'), join(dir, 'elsewhere', 'svc.db'));
    const viaLink = await openStore(`sqlite:${join(dir, 'elsewhere', 'svc.db')}`, { migrate: false });
    try {
      expect(() => holdServerLock(viaLink.handle).release()).toThrow(SqliteServerRunningError);
    } finally {
      await viaLink.close();
      lock.release();
      await serving.close();
    }
  });

  it('svc-server start beside one started with --processes 2 exits 1 with the reason; after a SIGKILL of that one the next start is not refused', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-one-server-'));
    dirs.push(dir);
    const env = serverEnv({ SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}` });
    // A start takes 20 s and more on a loaded CI host (three processes here).
    const first = await startServerProcess(env, ['--processes', '2']);
    processes.push(first);
    const second = await startToExit(env);
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(/^error: another svc server is already running on .*svc\.db .*SVC_PROCESSES=<n>/m);
    // The lock goes with the process however it ends: a supervisor's restart after a crash is not refused.
    await first.stop('SIGKILL');
    const after = await startServerProcess(env, []);
    processes.push(after);
    expect((await fetch(`${after.url}/healthz`)).status).toBe(200);
  }, 240_000);
});
