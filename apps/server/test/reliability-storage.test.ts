import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startServer } from '../src/server.js';
import { openStore } from '../src/storage/store.js';
import { DATA_DIR_MARKER, DatabaseFileError } from '../src/storage/sqlite-file.js';
import { LOCK_TIMEOUT_MS, openDatabase, QUERY_WAIT_MS, WAL_SIZE_LIMIT_BYTES } from '../src/storage/database.js';
import { createTestPostgres, startTcpRelay } from './support/databases.js';
import { adminCommand, serverEnv, startServerProcess } from './support/processes.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver } from './support/webhooks.js';

/** One chat completion to the offline model through `url` with `token`: "hi", or `content`. */
function chatCompletion(url: string, token: string, { content = 'hi', signal }: { content?: string; signal?: AbortSignal } = {}): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content }] }),
    signal,
  });
}

/**
 * Storage faults told the truth, and local files and routes kept to their owner (issue #26 §9, §11): /readyz
 * probes a write; a database file deleted under a running server stops it with a clear log; a start never
 * silently creates an empty database where one is expected; svc.db and its WAL/SHM are 0600, a data
 * directory svc creates 0700; the dashboard and /metrics answer only to the server's own host names.
 */

const servers: TestServer[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-storage-'));
  dirs.push(dir);
  return dir;
}

async function server(env: Record<string, string> = {}) {
  const s = await startTestServer({ env });
  servers.push(s);
  return s;
}

/** A GET with a chosen Host header (fetch does not let one set it). */
function get(url: string, path: string, host: string): Promise<{ status: number; body: any }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, headers: { host } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text.startsWith('{') ? JSON.parse(text) : text }));
    });
    req.on('error', reject);
    req.end();
  });
}

const mode = (path: string) => statSync(path).mode & 0o777;

describe('file modes', () => {
  it('svc.db, its WAL and SHM files are 0600; a data directory svc creates is 0700', async () => {
    const base = tempDir();
    const dataDir = join(base, 'new', 'data');
    const srv = await server({ SVC_DATABASE_URL: `sqlite:${join(dataDir, 'svc.db')}` });
    await srv.createKey();
    for (const file of ['svc.db', 'svc.db-wal', 'svc.db-shm']) expect(mode(join(dataDir, file)), file).toBe(0o600);
    expect(mode(dataDir)).toBe(0o700);
    expect(mode(join(base, 'new'))).toBe(0o700);
  });

  it('an existing database left world-readable is tightened to 0600 on open, and memory-mapped I/O is off', async () => {
    const dir = tempDir();
    const file = join(dir, 'svc.db');
    (await openStore(`sqlite:${file}`)).close();
    const store = await openStore(`sqlite:${file}`);
    await store.close();
    writeFileSync(join(dir, 'unrelated.txt'), 'x');
    const { chmodSync } = await import('node:fs');
    chmodSync(file, 0o644);
    const again = await openStore(`sqlite:${file}`);
    try {
      expect(mode(file)).toBe(0o600);
      expect(again.handle.sqlite!.pragma('mmap_size', { simple: true })).toBe(0);
    } finally {
      await again.close();
    }
  });
});

describe('Host header (DNS rebinding)', () => {
  it('the dashboard and /metrics answer 421 to a foreign name; IPs, localhost and SVC_ALLOWED_HOSTS pass; the API is unaffected', async () => {
    const srv = await server({ SVC_ALLOWED_HOSTS: 'svc.example.com, .corp.example' });
    const port = new URL(srv.url).port;
    for (const path of ['/dashboard/api/me', '/dashboard/', '/metrics']) {
      const res = await get(srv.url, path, `rebind.attacker.example:${port}`);
      expect(res.status, path).toBe(421);
      expect(res.body.error).toMatchObject({ code: 'misdirected_request', message: expect.stringContaining('SVC_ALLOWED_HOSTS') });
    }
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'svc.example.com', 'a.corp.example', 'corp.example']) {
      expect((await get(srv.url, '/dashboard/api/me', host)).status, host).toBe(401);
    }
    expect((await get(srv.url, '/metrics', `localhost:${port}`)).status).toBe(200);
    expect((await get(srv.url, '/v1/models', 'rebind.attacker.example')).status).toBe(401);
    expect((await get(srv.url, '/healthz', 'rebind.attacker.example')).status).toBe(200);
  });

  it('two Host headers are a 400, and a request target in absolute form is judged by its own host (RFC 9112 §3.2)', async () => {
    const srv = await server();
    const { port } = new URL(srv.url);
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1');
        let answer = '';
        socket.on('data', (chunk) => {
          answer += String(chunk);
          if (answer.includes('\r\n\r\n')) socket.destroy();
        });
        socket.on('close', () => resolve(answer.split('\r\n')[0] ?? ''));
        socket.on('error', reject);
        socket.write(text);
      });
    // Node goes by the first Host; a proxy that routes by the last would pass the rebinding name through.
    expect(await raw(`GET /dashboard/api/me HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nHost: rebind.attacker.example\r\n\r\n`)).toBe('HTTP/1.1 400 Bad Request');
    expect(await raw(`GET http://rebind.attacker.example/dashboard/api/me HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)).toBe(
      'HTTP/1.1 421 Misdirected Request',
    );
    expect(await raw(`GET http://user@localhost:${port}/dashboard/api/me HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)).toBe('HTTP/1.1 401 Unauthorized');
    expect(await raw(`GET /dashboard/api/me HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)).toBe('HTTP/1.1 401 Unauthorized');
  });

  it('/metrics behind SVC_METRICS_TOKEN answers any Host (a scraper may use any name; the token is the guard)', async () => {
    const token = 'metrics-token-0123456789';
    const srv = await server({ SVC_METRICS_TOKEN: token });
    const { hostname, port } = new URL(srv.url);
    const status = await new Promise<number>((resolve, reject) => {
      request({ hostname, port, path: '/metrics', headers: { host: 'svc.monitoring.svc.cluster.local', authorization: `Bearer ${token}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(200);
    expect((await get(srv.url, '/dashboard/api/me', 'svc.monitoring.svc.cluster.local')).status).toBe(421);
  });
});

describe('the database file', () => {
  it('/readyz probes a write: a database that takes no writes is not ready', async () => {
    const srv = await server();
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(200);
    srv.running.store.handle.sqlite!.pragma('query_only = ON');
    const res = await fetch(`${srv.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'database unreachable or not writable' });
    // The answer is for anyone and says no more; the log says why, once while it lasts.
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(503);
    const notReady = srv.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'not ready: the database takes no writes');
    expect(notReady).toHaveLength(1);
    expect(notReady[0].problem).toMatch(/^a write failed: .*readonly/i);
    srv.running.store.handle.sqlite!.pragma('query_only = OFF');
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(200);
    expect(srv.logs.filter((l) => l.includes('ready again: the database takes writes'))).toHaveLength(1);
  });

  it('full (SQLITE_FULL): a request whose delivery cannot be recorded is a 503 database_unavailable, logged as what to do without a stack; served again once there is room, without a restart', async () => {
    const receiver = await startReceiver();
    const srv = await server({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' });
    try {
      const { token } = await srv.createKey({ webhookUrl: receiver.url });
      const chat = () => chatCompletion(srv.url, token, { content: `hello ${'x'.repeat(20_000)}` });
      expect((await chat()).status).toBe(200);
      // The file may not grow: what a full disk does to SQLite, without needing one.
      const sqlite = srv.running.store.handle.sqlite!;
      sqlite.pragma(`max_page_count = ${sqlite.pragma('page_count', { simple: true }) as number}`);
      let res = await chat();
      // Free pages inside the file take the first rows.
      for (let i = 0; i < 50 && res.status === 200; i++) res = await chat();
      // Was a 500 internal_error, and an 'unhandled error' log line with the stack of better-sqlite3's transaction.
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(await res.json()).toEqual({
        error: { message: "The server's database is unavailable right now. Please retry shortly.", type: 'server_error', code: 'database_unavailable', param: null },
      });
      const line = srv.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'database unavailable: request answered 503');
      expect(line.fault).toMatch(/^SQLITE_FULL: the disk holding the database file is full .*; free space on it and writes resume, without a restart$/);
      expect(srv.logs.filter((l) => l.includes('SQLITE_FULL') && l.includes('"stack"'))).toEqual([]);
      sqlite.pragma('max_page_count = 4294967294');
      expect((await chat()).status).toBe(200);
    } finally {
      await receiver.close();
    }
  });

  it("/readyz answers within a load balancer's check timeout while another process holds the write lock (it held the event loop, /healthz too, for the 5 s busy timeout)", async () => {
    const dir = tempDir();
    const svc = await startServerProcess(serverEnv({ SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}` }));
    // As a load balancer's health check: it gives up after 4 s and marks the instance dead.
    const check = (path: string) => fetch(`${svc.url}${path}`, { signal: AbortSignal.timeout(4_000) });
    const holder = new Database(join(dir, 'svc.db'));
    try {
      expect((await check('/readyz')).status).toBe(200);
      // An operator's sqlite3 session in a write transaction, or another process mid-write.
      holder.exec('begin immediate');
      const [ready, health] = await Promise.all([check('/readyz'), check('/healthz')]);
      expect(ready.status).toBe(503);
      expect(health.status).toBe(200);
      holder.exec('rollback');
      expect((await check('/readyz')).status).toBe(200);
      await eventually(() => svc.stderr().includes('"problem":"a write failed: database is locked"'));
    } finally {
      holder.close();
      await svc.stop();
    }
  });

  it('an outage is logged once per kind of fault, not once per request and worker retry, and its end is logged with the counts', async () => {
    const receiver = await startReceiver();
    const srv = await server({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' });
    try {
      const { token } = await srv.createKey({ webhookUrl: receiver.url });
      expect((await chatCompletion(srv.url, token)).status).toBe(200);
      const sqlite = srv.running.store.handle.sqlite!;
      // Takes no writes, as a read-only remount would: SQLITE_READONLY.
      sqlite.pragma('query_only = ON');
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await chatCompletion(srv.url, token)).status);
      expect(statuses).toEqual(Array(20).fill(503));
      const lines = () => srv.logs.map((l) => JSON.parse(l) as Record<string, unknown>);
      // Was one error line per request (20 here), and one per second from the delivery worker.
      const faultLines = lines().filter((l) => l.msg === 'database unavailable: request answered 503');
      expect(faultLines).toHaveLength(1);
      expect(faultLines[0]!.fault).toMatch(/^SQLITE_READONLY: the database file takes no writes/);
      // Each request still has its request line, with its status and error code.
      expect(lines().filter((l) => l.msg === 'request' && l.status === 503 && l.error === 'database_unavailable')).toHaveLength(20);
      sqlite.pragma('query_only = OFF');
      const back = await eventually(() => lines().find((l) => l.msg === 'database available again'));
      expect(back.kinds).toEqual(['SQLITE_READONLY']);
      expect((back.lines as Record<string, number>)['database unavailable: request answered 503']).toBe(20);
      expect((await chatCompletion(srv.url, token)).status).toBe(200);
    } finally {
      await receiver.close();
    }
  });

  it('deleted under a running server: /readyz fails at once, the server stops with a clear error log, the next start refuses', async () => {
    const dir = tempDir();
    const file = join(dir, 'svc.db');
    const env = { SVC_DATABASE_URL: `sqlite:${file}` };
    const srv = await server(env);
    await srv.createKey();
    for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) unlinkSync(f);
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(503);
    const reason = await srv.running.failed;
    expect(reason).toBeInstanceOf(DatabaseFileError);
    expect(reason.message).toMatch(/was deleted while svc was running/);
    const fatal = srv.logs.map((l) => JSON.parse(l) as { level: number; msg: string }).find((l) => l.level === 60);
    expect(fatal?.msg).toMatch(/^stopping: the database file .*svc\.db was deleted while svc was running.*Restore the file from a backup/);
    await expect(fetch(`${srv.url}/healthz`)).rejects.toThrow();

    // The next start does not quietly begin again with an empty database.
    const config = loadConfig({ SVC_HOST: '127.0.0.1', SVC_PORT: '0', SVC_LOG_LEVEL: 'silent', ...env });
    await expect(startServer(config)).rejects.toThrow(/svc\.db is missing, but .* was set up by svc \(\.svc-data-dir is there\).*Restore it .*point SVC_DATABASE_URL at a new directory/);
    expect(existsSync(file)).toBe(false);
    // Starting over is a deliberate step: an emptied directory.
    for (const name of readdirSync(dir)) unlinkSync(join(dir, name));
    const fresh = await startServer(config);
    await fresh.close();
    expect(existsSync(file)).toBe(true);
  });

  it('a new database is created only in a new or empty directory', async () => {
    const busy = tempDir();
    writeFileSync(join(busy, 'notes.txt'), 'not svc data');
    await expect(openStore(`sqlite:${join(busy, 'svc.db')}`)).rejects.toThrow(/Refusing to create a new database .* already holds other files/);
    const empty = tempDir();
    mkdirSync(join(empty, 'd'));
    const store = await openStore(`sqlite:${join(empty, 'd', 'svc.db')}`);
    await store.close();
    expect(existsSync(join(empty, 'd', DATA_DIR_MARKER))).toBe(true);
  });
});

const pgDb = await createTestPostgres('reliability-storage');

afterAll(() => pgDb?.drop());
/** One key for the database: a second one would not open the signing secrets the first sealed. */
const PG_SECRET_KEY = randomBytes(32).toString('base64');

describe.skipIf(!pgDb)('Postgres faults under a running server', () => {
  it('a connection dropped with a query in flight fails that request (503), not the process; served again once it is back', async () => {
    const relay = await startTcpRelay(pgDb!.url);
    // The admin commands (spawnSync: this process's relay would not run meanwhile) go to Postgres directly.
    const direct = serverEnv({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: PG_SECRET_KEY });
    adminCommand(['migrate'], direct);
    adminCommand(['users', 'create', '--email', 'ops@example.test', '--password', 'correct horse battery'], direct);
    const { key } = JSON.parse(adminCommand(['keys', 'create', '--email', 'ops@example.test', '--name', 'ops', '--json'], direct)) as { key: string };
    const svc = await startServerProcess({ ...direct, SVC_DATABASE_URL: relay.url });
    const chat = () => chatCompletion(svc.url, key);
    try {
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(200);
      relay.hold();
      const pending = chat();
      // The key lookup is sent to Postgres and its answer held back: a client of the pool is in use.
      await eventually(() => relay.heldBytes() > 0);
      await relay.cut();
      // Was an uncaught 'error' event of the pg client: the process died with every request in flight.
      const res = await pending;
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
      expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(503);
      await relay.restore();
      await eventually(async () => (await chat()).status === 200);
      expect(svc.child.exitCode).toBeNull();
    } finally {
      await relay.restore();
      await svc.stop();
      await relay.close();
    }
  });

  it('a network partition (packets dropped, no socket closed): requests and /readyz answer 503 within the wait bound and the log names it; once it heals every accepted request is delivered', async () => {
    const receiver = await startReceiver();
    const relay = await startTcpRelay(pgDb!.url);
    const direct = serverEnv({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: PG_SECRET_KEY, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' });
    adminCommand(['migrate'], direct);
    adminCommand(['users', 'create', '--email', 'partition@example.test', '--password', 'correct horse battery'], direct);
    const created = adminCommand(['keys', 'create', '--email', 'partition@example.test', '--webhook-url', receiver.url, '--json'], direct);
    const { key } = JSON.parse(created) as { key: string };
    const svc = await startServerProcess({ ...direct, SVC_DATABASE_URL: relay.url });
    // Without the bound each of these waited until TCP gave up (~15 min): here, until the signal.
    const signal = () => AbortSignal.timeout(QUERY_WAIT_MS * 3);
    const chat = () => chatCompletion(svc.url, key, { signal: signal() });
    const accepted: string[] = [];
    const chatAccepted = async () => {
      const res = await chat();
      if (res.status === 200) accepted.push(res.headers.get('x-request-id')!);
      return res;
    };
    const logLines = () =>
      svc
        .stderr()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    try {
      expect((await chatAccepted()).status).toBe(200);
      relay.partition();
      const [during, ready] = await Promise.all([chat(), fetch(`${svc.url}/readyz`, { signal: signal() })]);
      expect(during.status).toBe(503);
      expect(during.headers.get('retry-after')).toBe('5');
      expect(((await during.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
      expect(ready.status).toBe(503);
      // The connection that got no answer was closed: a later request opens a new one and fails on its own.
      const next = await chat();
      expect(next.status).toBe(503);
      // A query sent on an open connection gets no answer; a new connection gets no handshake.
      // Log lines go out in batches every 100 ms.
      const faults = await eventually(() => {
        const found = logLines().filter((l) => l.msg === 'database unavailable: request answered 503');
        return found.length === 2 && found.map((l) => l.fault);
      }, QUERY_WAIT_MS * 2);
      for (const fault of faults) expect(fault).toMatch(/^Postgres did not (answer a query within 15 s|accept a connection within 5 s): the network to it drops packets/);
      // /readyz answers within its own bound (2 s), before the query's (15 s) or the connection's (5 s).
      expect(logLines().find((l) => l.msg === 'not ready: the database takes no writes')?.problem).toMatch(/^the database did not answer a write within 2 s: /);
      expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);

      relay.heal();
      await eventually(async () => (await chatAccepted()).status === 200, QUERY_WAIT_MS * 2);
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(200);
      for (let i = 0; i < 5; i++) expect((await chatAccepted()).status).toBe(200);
      // Nothing accepted is lost: every request answered 200, before or after the partition, has its delivery.
      const requestIds = (received: typeof receiver.received) =>
        new Set(received.map((d) => (JSON.parse(d.raw.toString('utf8')) as { request_id: string }).request_id));
      await receiver.waitFor((received) => accepted.every((id) => requestIds(received).has(id)), QUERY_WAIT_MS * 2);

      // A failover behind the database's name: the connections open at the partition never answer again. The
      // ones a query waited on are closed, the others fail when next used; svc serves on new ones.
      relay.partition();
      expect((await chat()).status).toBe(503);
      relay.failover();
      await eventually(async () => (await chatAccepted()).status === 200, QUERY_WAIT_MS * 4);
      for (let i = 0; i < 5; i++) expect((await chatAccepted()).status).toBe(200);
      // A probe sent at the partition (the outage log's, every 5 s) may still wait on a dead connection: the next
      // check past the 2 s bound sends a fresh one.
      await eventually(async () => (await fetch(`${svc.url}/readyz`)).status === 200);
      await receiver.waitFor((received) => accepted.every((id) => requestIds(received).has(id)), QUERY_WAIT_MS * 2);
      expect(svc.child.exitCode).toBeNull();
    } finally {
      relay.heal();
      await svc.stop();
      await relay.close();
      await receiver.close();
    }
  }, QUERY_WAIT_MS * 12);

  it('SVC_DATABASE_POOL_SIZE bounds the connections a process opens (instances × processes × it must fit max_connections)', async () => {
    const receiver = await startReceiver();
    const srv = await server({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: PG_SECRET_KEY, SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_DATABASE_POOL_SIZE: '2' });
    const operator = new pg.Client({ connectionString: pgDb!.url });
    await operator.connect();
    try {
      const { token } = await srv.createKey({ webhookUrl: receiver.url });
      const chat = () => chatCompletion(srv.url, token);
      const statuses = await Promise.all(Array.from({ length: 30 }, async () => (await chat()).status));
      expect(statuses).toEqual(Array(30).fill(200));
      // The pool keeps its connections open a while after use: the ones it opened are still there.
      const { rows } = await operator.query('select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
      expect(rows[0].n).toBeLessThanOrEqual(2);
    } finally {
      await operator.end();
      await receiver.close();
    }
  });

  /** The pid of the one backend of this database waiting on a lock (a statement svc sent behind the operator's LOCK). */
  async function lockWaiter(operator: pg.Client): Promise<number> {
    return eventually(async () => {
      const { rows } = await operator.query(
        "select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()",
      );
      return rows.length === 1 ? (rows[0].pid as number) : undefined;
    });
  }

  it("an API key's lookup whose connection an operator ends (pg_terminate_backend) is read again on another: the request is answered, not 503", async () => {
    const srv = await server({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: PG_SECRET_KEY });
    const operator = new pg.Client({ connectionString: pgDb!.url });
    await operator.connect();
    try {
      const { token } = await srv.createKey();
      // The lookup is held behind the lock, so it is the statement in flight when its connection is ended.
      await operator.query('begin');
      await operator.query('lock table api_keys in access exclusive mode');
      const pending = chatCompletion(srv.url, token);
      const pid = await lockWaiter(operator);
      await operator.query('select pg_terminate_backend($1)', [pid]);
      await operator.query('rollback');
      const res = await pending;
      expect(await res.json()).toMatchObject({ object: 'chat.completion' });
      expect(res.status).toBe(200);
    } finally {
      await operator.end();
    }
  });

  it("an attempt whose record loses its connection (pg_terminate_backend) is recorded on another in the same lease: the receiver gets the delivery once, and the log has its answer", async () => {
    const receiver = await startReceiver();
    // Lease: the attempt's timeout + 15 s. Without the record's second try the row stayed leased, was sent again
    // once the lease lapsed, and the first attempt (a 200) was never logged.
    const srv = await server({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: PG_SECRET_KEY, SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_TIMEOUT_MS: '1000' });
    const operator = new pg.Client({ connectionString: pgDb!.url });
    await operator.connect();
    try {
      const { token, key } = await srv.createKey({ webhookUrl: receiver.url });
      // The record's insert of the attempt row waits behind the lock: it is the statement in flight when its
      // connection is ended, after the delivery's row was updated in the same transaction.
      await operator.query('begin');
      await operator.query('lock table webhook_attempts in access exclusive mode');
      expect((await chatCompletion(srv.url, token)).status).toBe(200);
      await receiver.waitFor((got) => got.length === 1);
      const pid = await lockWaiter(operator);
      await operator.query('select pg_terminate_backend($1)', [pid]);
      await operator.query('rollback');
      const delivered = await eventually(async () => {
        const { rows } = await srv.running.store.deliveries.list(key.id, { limit: 10 });
        return rows.length === 1 && rows[0]!.status === 'delivered' ? rows[0] : undefined;
      }, 40_000);
      const detail = await srv.running.store.deliveries.get(key.id, delivered!.id);
      expect(detail!.attempts.map((a) => [Number(a.attempt), a.outcome, a.status_code])).toEqual([[1, 'success', 200]]);
      expect(receiver.received).toHaveLength(1);
    } finally {
      await operator.end();
      await receiver.close();
    }
  });

  it("/readyz answers within a load balancer's check timeout while a lock holds its write (it waited lock_timeout, 10 s), says why, and does not take a connection per check", async () => {
    const srv = await server({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: PG_SECRET_KEY });
    const operator = new pg.Client({ connectionString: pgDb!.url });
    await operator.connect();
    // As a load balancer's health check: it gives up after 5 s and marks the instance dead.
    const check = () => fetch(`${srv.url}/readyz`, { signal: AbortSignal.timeout(5_000) });
    try {
      expect((await check()).status).toBe(200);
      await operator.query('begin');
      await operator.query('lock table svc_meta in access exclusive mode');
      const answers = await Promise.all(Array.from({ length: 5 }, check));
      expect(answers.map((res) => res.status)).toEqual(Array(5).fill(503));
      expect((await check()).status).toBe(503);
      const line = srv.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'not ready: the database takes no writes');
      expect(line.problem).toMatch(/^the database did not answer a write within 2 s: a lock another session holds/);
      // Six checks, each of which waited on the lock before: one probe shared by the five at once, one more for
      // the check that came once it was older than the 2 s bound.
      const { rows } = await operator.query(
        "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
      );
      expect(rows[0].n).toBeLessThanOrEqual(2);
      await operator.query('rollback');
      await eventually(async () => (await check()).status === 200);
    } finally {
      await operator.end();
    }
  });

  it("an operator's LOCK TABLE on the outbox: a request waits at most lock_timeout, then is a 503 that names the fault; served again once the lock is gone", async () => {
    const receiver = await startReceiver();
    const srv = await server({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: PG_SECRET_KEY, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' });
    const operator = new pg.Client({ connectionString: pgDb!.url });
    await operator.connect();
    try {
      const { token } = await srv.createKey({ webhookUrl: receiver.url });
      // Without a lock_timeout the request waited as long as the lock was held: here, until this gave up.
      const chat = () => chatCompletion(srv.url, token, { signal: AbortSignal.timeout(LOCK_TIMEOUT_MS * 4) });
      expect((await chat()).status).toBe(200);
      await operator.query('begin');
      await operator.query('lock table webhook_deliveries in access exclusive mode');
      const res = await chat();
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
      const line = srv.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'database unavailable: request answered 503');
      expect(line.fault).toMatch(/^Postgres 55P03: a statement waited past lock_timeout for a lock another session holds .*pg_locks and pg_stat_activity name it$/);
      await operator.query('rollback');
      expect((await chat()).status).toBe(200);
    } finally {
      await operator.end();
      await receiver.close();
    }
  });
});

describe('the SQLite WAL file', () => {
  it('is cut back to WAL_SIZE_LIMIT_BYTES once checkpointed, after a burst made it larger', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-wal-'));
    const handle = openDatabase(`sqlite:${join(dir, 'svc.db')}`);
    const wal = () => statSync(join(dir, 'svc.db-wal')).size;
    try {
      const sqlite = handle.sqlite!;
      sqlite.exec('create table burst (id integer primary key, blob blob)');
      // One transaction of 40 MB: the WAL holds all of it until the commit.
      const insert = sqlite.prepare('insert into burst (blob) values (?)');
      sqlite.transaction(() => {
        for (let i = 0; i < 5000; i++) insert.run(randomBytes(8000));
      })();
      expect(wal()).toBeGreaterThan(WAL_SIZE_LIMIT_BYTES);
      // Small writes go on while the checkpoint thread copies the WAL back; the first commit after a whole
      // copy restarts the WAL (and, with the limit, cuts the file back).
      await eventually(() => {
        sqlite.prepare('insert into burst (blob) values (?)').run(Buffer.alloc(10));
        return wal() <= WAL_SIZE_LIMIT_BYTES;
      }, 20_000);
      expect(wal()).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
    } finally {
      await handle.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
