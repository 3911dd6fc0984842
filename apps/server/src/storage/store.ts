import type { Logger } from 'pino';
import { type DatabaseHandle, openDatabase } from './database.js';
import { migrate } from './migrations.js';
import { KeysStore } from './keys-store.js';
import { UsersStore } from './users-store.js';
import { UsageStore } from './usage-store.js';
import type { OutboxStore } from './outbox-store.js';
import { type LeaseClock, PostgresOutboxStore } from './postgres-outbox-store.js';
import { SqliteOutboxStore } from './sqlite-outbox-store.js';
import { SessionsStore } from './sessions-store.js';
import { ResponsesStore } from './responses-store.js';
import { ResponseEventsStore } from './response-events-store.js';
import { SqliteStatements } from './sqlite-statements.js';
import { boundedProbe, READY_WAIT_MS, sqliteWriteProbe } from './ready-probe.js';
import { holdServerLock, SqliteServerRunningError, type ServerLock } from './sqlite-server-lock.js';

/**
 * Every table behind one object; the same code runs on SQLite and Postgres.
 *
 * @example
 * const store = await openStore('sqlite:./data/svc.db');
 * const key = await store.keys.byHash(hash);
 */
export interface Store {
  handle: DatabaseHandle;
  users: UsersStore;
  keys: KeysStore;
  usage: UsageStore;
  /** The webhook outbox: deliveries and their attempts. */
  deliveries: OutboxStore;
  sessions: SessionsStore;
  responses: ResponsesStore;
  /** The kept events of background streams, read again by GET /v1/responses/{id}?stream=true. */
  responseEvents: ResponseEventsStore;
  /** The migrations this open applied, oldest first (none with `migrate: false` or a schema already up to date). */
  migrated: string[];
  /**
   * Null when the database takes a write now (a one-row write, and on SQLite the file is still the one opened);
   * else why it does not. Answers within READY_WAIT_MS: a write still waiting then is the reason.
   */
  unready(): Promise<string | null>;
  close(): Promise<void>;
}

/**
 * Opens the database at `url` and brings its schema up to date (unless `migrate: false`). A failure says which
 * database it was (without its password): "connect ECONNREFUSED 127.0.0.1:5432" alone does not.
 *
 * `serverLock: true` (a server's start) holds the SQLite file's server lock (`holdServerLock`) until `close`, taken
 * before the migrations: a start refused because another server serves the file must not have changed its schema
 * under that server first (a new release started beside the old one). Throws SqliteServerRunningError then.
 */
export async function openStore(
  url: string,
  options: { migrate?: boolean; poolSize?: number; leaseClock?: LeaseClock; readyWaitMs?: number; serverLock?: boolean } = {},
): Promise<Store> {
  let handle: DatabaseHandle | undefined;
  let lock: ServerLock | undefined;
  let migrated: string[] = [];
  try {
    handle = openDatabase(url, { poolSize: options.poolSize });
    if (options.serverLock) lock = holdServerLock(handle);
    if (options.migrate !== false) migrated = await migrateWithoutWaitBound(url, handle);
  } catch (err) {
    lock?.release();
    await handle?.close();
    if (err instanceof SqliteServerRunningError) throw err;
    throw new Error(`could not open the database ${withoutPassword(url)} (SVC_DATABASE_URL): ${(err as Error).message ?? String(err)}`, { cause: err });
  }
  const { db } = handle;
  const statements = handle.sqlite ? new SqliteStatements(handle.sqlite) : undefined;
  const sqliteProbe = handle.sqlite && sqliteWriteProbe(handle.sqlite);
  const writeProbe = async (): Promise<string | null> => {
    const onSqlite = sqliteProbe?.();
    if (onSqlite !== undefined) return onSqlite;
    try {
      // A write, not a read: a full disk, a read-only file system or a lost write lock fail it.
      const value = String(Date.now());
      await db
        .insertInto('svc_meta')
        .values({ key: 'readyz_write_probe', value })
        .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
        .execute();
      return null;
    } catch (err) {
      return `a write failed: ${(err as Error).message ?? String(err)}`;
    }
  };
  const boundedWrite = boundedProbe(writeProbe, options.readyWaitMs ?? READY_WAIT_MS);
  const unready = async (): Promise<string | null> => handle.fileProblem() ?? boundedWrite();
  return {
    handle,
    users: new UsersStore(db),
    keys: new KeysStore(db, statements),
    usage: new UsageStore(db),
    deliveries: statements ? new SqliteOutboxStore(statements, db) : new PostgresOutboxStore(db, options.leaseClock),
    sessions: new SessionsStore(db),
    responses: new ResponsesStore(db, handle.dialect),
    responseEvents: new ResponseEventsStore(db, handle.dialect),
    migrated,
    unready,
    close: async () => {
      try {
        await handle.close();
      } finally {
        lock?.release();
      }
    },
  };
}

/**
 * Migrates `handle`'s database. On Postgres on a connection of its own without the queries' wait bound
 * (QUERY_WAIT_MS): it waits for another instance's migration (an advisory lock), and a migration may build an
 * index on a large outbox for minutes. Opening it still has CONNECT_TIMEOUT_MS.
 */
async function migrateWithoutWaitBound(url: string, handle: DatabaseHandle): Promise<string[]> {
  if (handle.dialect !== 'postgres') return migrate(handle.db, handle.dialect);
  const unbounded = openDatabase(url, { poolSize: 1, queryWaitMs: 0 });
  try {
    return await migrate(unbounded.db, unbounded.dialect);
  } finally {
    await unbounded.close();
  }
}

/** Logs, once, that WAL checkpoints left their thread for the writer's connection (`onCheckpointFallback`). */
export function warnOnCheckpointFallback(store: Store, logger: Pick<Logger, 'warn'>): void {
  store.handle.onCheckpointFallback((reason) => {
    logger.warn({ reason }, 'WAL checkpoints fell back to the writer connection (their thread failed): they now take turns of its event loop');
  });
}

/** A database URL fit for a message: its password replaced by `***`. */
export function withoutPassword(url: string): string {
  if (!/^postgres(ql)?:/.test(url)) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.href;
  } catch {
    return 'postgres://…';
  }
}
