import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';

const DEFAULT_POSTGRES = 'postgres://postgres@127.0.0.1:5432/test';
const DEFAULT_REDIS = 'redis://127.0.0.1:6379';

async function reachable(check: () => Promise<unknown>): Promise<boolean> {
  try {
    await check();
    return true;
  } catch {
    return false;
  }
}

/** One statement on a connection of its own (opened and closed around it): a test's look into the database. */
export async function queryPostgres<R extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}

/**
 * A fresh Postgres database for one test file, or undefined (with a console note) when Postgres is not
 * reachable and SVC_TEST_POSTGRES_URL is unset. With SVC_TEST_POSTGRES_URL set (CI), unreachable is an error.
 */
export async function createTestPostgres(label: string): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const required = process.env.SVC_TEST_POSTGRES_URL;
  const adminUrl = required ?? DEFAULT_POSTGRES;
  // Required (CI), a slow connect on a loaded host is waited for; otherwise an absent Postgres is skipped quickly.
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: required ? 15_000 : 2000 });
  if (!(await reachable(() => admin.connect()))) {
    if (required) throw new Error(`SVC_TEST_POSTGRES_URL=${required} is set but Postgres is not reachable`);
    console.warn(`[${label}] SKIPPED the Postgres variant: no Postgres at ${adminUrl} (set SVC_TEST_POSTGRES_URL to require it)`);
    return undefined;
  }
  const name = `svc_test_${randomBytes(6).toString('hex')}`;
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      await again.query(`drop database if exists ${name} with (force)`);
      await again.end();
    },
  };
}

/** A Redis URL and a key prefix unique to this run, or undefined (with a console note) as for Postgres. */
export async function testRedis(label: string): Promise<{ url: string; prefix: string } | undefined> {
  const required = process.env.SVC_TEST_REDIS_URL;
  const url = required ?? DEFAULT_REDIS;
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2000, retryStrategy: () => null });
  client.on('error', () => {});
  const ok = await reachable(async () => {
    await client.connect();
    await client.ping();
  });
  client.disconnect();
  if (!ok) {
    if (required) throw new Error(`SVC_TEST_REDIS_URL=${required} is set but Redis is not reachable`);
    console.warn(`[${label}] SKIPPED the Redis variant: no Redis at ${url} (set SVC_TEST_REDIS_URL to require it)`);
    return undefined;
  }
  return { url, prefix: `svc-test-${randomBytes(4).toString('hex')}` };
}

export interface TcpRelay {
  /** The target URL through the relay. */
  url: string;
  /** Stops passing the target's answers on: every request sent from now on stays in flight. */
  hold(): void;
  /** Bytes sent towards the target since `hold()` (a request is in flight once this is above 0). */
  heldBytes(): number;
  /**
   * A network partition as both ends see it: from now on no byte passes in either direction, on open connections
   * and new ones alike, and no socket is closed (as when packets are dropped: no RST, no FIN). TCP would
   * retransmit what was sent meanwhile, so it is kept and passed on at `heal()` on connections still open.
   */
  partition(): void;
  /** Ends the partition: what was kept is passed on, and bytes flow again. */
  heal(): void;
  /**
   * Ends the partition as a failover does for a client that follows the database's name: the connections open now
   * stay silent for good (the old address drops packets), new connections reach the target.
   */
  failover(): void;
  /** Drops every connection and refuses new ones (connection refused), as a restart or failover does. */
  cut(): Promise<void>;
  /** Accepts and relays connections again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** A TCP relay in front of a Postgres or Redis URL, to take the service away from a running server. */
export async function startTcpRelay(target: string): Promise<TcpRelay> {
  const targetUrl = new URL(target);
  const sockets = new Set<Socket>();
  let holding = false;
  let held = 0;
  let partitioned = false;
  /** What each socket is owed while partitioned, in order. */
  const kept = new Map<Socket, Buffer[]>();
  /** Sockets silent for good (`failover()`). */
  const silenced = new Set<Socket>();
  const pass = (to: Socket, chunk: Buffer) => {
    if (silenced.has(to)) return;
    if (!partitioned) to.write(chunk);
    else kept.set(to, [...(kept.get(to) ?? []), chunk]);
  };
  const relay = createServer((client) => {
    const server = connect(Number(targetUrl.port), targetUrl.hostname);
    sockets.add(client).add(server);
    client.on('data', (chunk: Buffer) => {
      if (holding) held += chunk.length;
      pass(server, chunk);
    });
    server.on('data', (chunk: Buffer) => {
      if (!holding) pass(client, chunk);
    });
    for (const [a, b] of [[client, server], [server, client]] as const) {
      a.on('error', () => b.destroy());
      a.on('close', () => {
        sockets.delete(a);
        kept.delete(a);
        kept.delete(b);
        silenced.delete(a);
        b.destroy();
      });
    }
  });
  const listen = (port: number) => new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve));
  const stop = () => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => relay.close(() => resolve()));
  };
  await listen(0);
  const port = (relay.address() as AddressInfo).port;
  const url = new URL(targetUrl);
  url.host = `127.0.0.1:${port}`;
  return {
    url: url.toString(),
    hold() {
      holding = true;
      held = 0;
    },
    heldBytes: () => held,
    partition() {
      partitioned = true;
    },
    heal() {
      partitioned = false;
      for (const [socket, chunks] of kept) for (const chunk of chunks) socket.write(chunk);
      kept.clear();
    },
    failover() {
      for (const socket of sockets) silenced.add(socket);
      kept.clear();
      partitioned = false;
    },
    cut: stop,
    async restore() {
      holding = false;
      if (!relay.listening) await listen(port);
    },
    close: () => (relay.listening ? stop() : Promise.resolve()),
  };
}

/**
 * The databases a storage suite runs on, as `[name, SVC_DATABASE_URL]` for `describe.each`: a SQLite file in a fresh
 * directory, and a fresh Postgres database when one is reachable (see `createTestPostgres`); both removed after the
 * file's tests. Called at the top of a test file (`await`).
 *
 * @example
 * describe.each(await storeVariants('responses store'))('responses on %s', (_name, url) => { … });
 */
export async function storeVariants(label: string): Promise<Array<[string, string]>> {
  const dir = mkdtempSync(join(tmpdir(), `svc-${label.replace(/[^a-z0-9]+/gi, '-')}-`));
  const pgDb = await createTestPostgres(label);
  afterAll(async () => {
    await pgDb?.drop();
    rmSync(dir, { recursive: true, force: true });
  });
  const variants: Array<[string, string]> = [['sqlite', `sqlite:${join(dir, 'svc.db')}`]];
  if (pgDb) variants.push(['postgres', pgDb.url]);
  return variants;
}
