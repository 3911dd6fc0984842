import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, type SqliteDialectConfig } from 'kysely';
import type PgModule from 'pg';
import type { Database } from './schema.js';
import { CheckpointThread } from './checkpoint-thread.js';
import { DatabaseFileError, fileIdentity, prepareSqliteFile } from './sqlite-file.js';
import { boundedPool, CONNECT_TIMEOUT_MS } from './postgres-pool.js';

export type Dialect = 'sqlite' | 'postgres';

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: Dialect;
  /** Directory of the SQLite file (where the embedded secret key lives); undefined for Postgres. */
  dataDir: string | undefined;
  /**
   * The better-sqlite3 connection under `db` (SQLite only), for the few hot statements the stores run
   * synchronously with cached prepared statements. Kysely shares it: check `inTransaction` before using it
   * directly (a kysely transaction may be open across event-loop turns).
   */
  sqlite?: SQLite.Database;
  /**
   * SQLite: why the database file is no longer the one opened (deleted or replaced under the running server,
   * where writes would go to a file nobody can open again), or undefined while it is. Always undefined for Postgres.
   */
  fileProblem(): string | undefined;
  /** SQLite: `listener` is told once, within FILE_CHECK_MS, when `fileProblem` first finds one. */
  onFileLost(listener: (problem: DatabaseFileError) => void): void;
  /**
   * SQLite: `listener` is told once, with the reason, when WAL checkpoints move from their own thread to the
   * writer's connection (the thread could not open the file, or died): they then take turns of the event loop.
   */
  onCheckpointFallback(listener: (reason: string) => void): void;
  close(): Promise<void>;
}

/** Postgres: the longest a statement waits for a lock another session holds (its `lock_timeout`). */
export const LOCK_TIMEOUT_MS = 10_000;

/**
 * Postgres: the longest a query waits for its answer before its connection is closed and it fails (503
 * `database_unavailable`), with the default lock_timeout. It is the lock_timeout in effect plus QUERY_MARGIN_MS, so
 * that a lock wait fails as itself (55P03, which names its cause) rather than as no answer; svc's statements
 * otherwise answer in milliseconds (the purge goes in batches).
 */
export const QUERY_WAIT_MS = LOCK_TIMEOUT_MS + 5_000;
const QUERY_MARGIN_MS = QUERY_WAIT_MS - LOCK_TIMEOUT_MS;

/** The query wait bound for `url`: QUERY_WAIT_MS, longer when `?lock_timeout=` on the URL (pg reads it there) is. */
export function queryWaitFor(url: string): number {
  let lockTimeout = Number.NaN;
  try {
    lockTimeout = Number.parseInt(new URL(url).searchParams.get('lock_timeout') ?? '', 10);
  } catch {
    // pg refuses the URL itself, with its own message.
  }
  return Math.max(LOCK_TIMEOUT_MS, Number.isFinite(lockTimeout) ? lockTimeout : 0) + QUERY_MARGIN_MS;
}


/**
 * Postgres: idle time after which TCP keepalive probes a pool connection, so that one whose peer went away (a
 * failover, a NAT or firewall that forgot it) fails while idle instead of at the next query.
 */
const KEEPALIVE_IDLE_MS = 10_000;

/** How often a running server checks that its SQLite file is still there. */
export const FILE_CHECK_MS = 2_000;

let pgModule: typeof PgModule | undefined;

/** `pg`, loaded on first use: a SQLite deployment does not pay its memory (~15 MB RSS). */
function loadPg(): typeof PgModule {
  if (!pgModule) {
    pgModule = createRequire(import.meta.url)('pg') as typeof PgModule;
    // BIGINT (int8) would otherwise come back as a string; our values (epoch ms, token counts) fit in a double.
    pgModule.types.setTypeParser(20, (value) => Number.parseInt(value, 10));
  }
  return pgModule;
}

/**
 * Opens `sqlite:PATH` (WAL, created if missing) or `postgres://…` (pooled; each query's wait for its answer
 * bounded by `queryWaitMs`, default `queryWaitFor(url)`, 0 for none).
 *
 * @example
 * const handle = openDatabase('sqlite:./data/svc.db');
 */
export function openDatabase(url: string, options: { poolSize?: number; queryWaitMs?: number } = {}): DatabaseHandle {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    const file = path === ':memory:' ? ':memory:' : resolve(path);
    if (file !== ':memory:') prepareSqliteFile(file);
    const sqlite = new SQLite(file);
    // No memory-mapped I/O (SQLite's default, made explicit): a file truncated or gone under a mapping would
    // end the process with SIGBUS instead of an error.
    sqlite.pragma('mmap_size = 0');
    // Takes effect on a new database only (before its first table); an existing one keeps its page size.
    sqlite.pragma(`page_size = ${PAGE_SIZE}`);
    // Also for a new database only: pages freed by the retention purge can be given back to the file system
    // (`giveBackFreePages`); with SQLite's default (NONE) the file never shrinks without a VACUUM, which needs svc
    // stopped. An existing database keeps its setting (`svc-server backup` writes a copy that has this one).
    sqlite.pragma('auto_vacuum = INCREMENTAL');
    sqlite.pragma('journal_mode = WAL');
    // NORMAL in WAL mode survives a process crash (SIGKILL); only an OS crash can lose the last commits.
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
    const fallbackListeners: Array<(reason: string) => void> = [];
    const stopCheckpoints = checkpointOnTimer(sqlite, (reason) => {
      for (const listener of fallbackListeners) listener(reason);
    });
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
    const watch = watchFile(file);
    return {
      db,
      dialect: 'sqlite',
      sqlite,
      dataDir: file === ':memory:' ? undefined : dirname(file),
      fileProblem: watch.problem,
      onFileLost: watch.onLost,
      onCheckpointFallback: (listener) => fallbackListeners.push(listener),
      close: async () => {
        watch.stop();
        await stopCheckpoints();
        return db.destroy();
      },
    };
  }
  const pg = loadPg();
  // lock_timeout: a statement waits at most this long for a lock another session holds (an operator's LOCK TABLE,
  // ALTER TABLE or VACUUM FULL): the request then fails (503) and says why, where it waited without end and took
  // a pool connection with it. `?lock_timeout=…` on the URL overrides it.
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 20,
    lock_timeout: LOCK_TIMEOUT_MS,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
  });
  // A lost connection (Postgres restarted or failed over, a proxy cut it) must not crash the process. pg emits
  // it as an 'error' event on the client besides failing its query; the pool listens only while the client is
  // idle, so a client in use (a query in flight) had none: an uncaught exception. The query still fails to its
  // caller (a 500, a /readyz 503) and the pool replaces the client.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const queryWaitMs = options.queryWaitMs ?? queryWaitFor(url);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: queryWaitMs > 0 ? boundedPool(pool, queryWaitMs) : pool }) });
  return { db, dialect: 'postgres', dataDir: undefined, fileProblem: () => undefined, onFileLost: () => {}, onCheckpointFallback: () => {}, close: () => db.destroy() };
}

/** Notices the SQLite file being deleted or replaced (a check every FILE_CHECK_MS once someone listens). */
function watchFile(file: string) {
  const opened = file === ':memory:' ? undefined : fileIdentity(file);
  const listeners: Array<(problem: DatabaseFileError) => void> = [];
  let timer: NodeJS.Timeout | undefined;
  let reported = false;
  const problem = (): string | undefined => {
    if (opened === undefined) return undefined;
    const now = fileIdentity(file);
    if (now === opened) return undefined;
    return now === undefined
      ? `the database file ${file} was deleted while svc was running; writes from now on would be lost`
      : `the database file ${file} was replaced by another file while svc was running; writes would go to the old one`;
  };
  const check = () => {
    const found = problem();
    if (found === undefined || reported) return;
    reported = true;
    clearInterval(timer);
    for (const listener of listeners) listener(new DatabaseFileError(found));
  };
  return {
    problem,
    onLost(listener: (problem: DatabaseFileError) => void) {
      listeners.push(listener);
      if (opened !== undefined && timer === undefined && !reported) timer = setInterval(check, FILE_CHECK_MS).unref();
    },
    stop() {
      clearInterval(timer);
    },
  };
}

/**
 * SQLite's page cache, KiB: SQLite's own default (2 MB). better-sqlite3 builds SQLite with 16 MB
 * (`SQLITE_DEFAULT_CACHE_SIZE=-16000`), which the outbox fills within a minute of load and keeps (half of the
 * process's malloc heap under load). The hot pages are few — the right edges of the outbox's B-trees and the
 * rows the worker updates moments after their insert — and the OS page cache holds the file anyway, so a larger
 * cache costs memory without making a delivery's statements faster (`node bench/outbox-sqlite.bench.mjs
 * --cache-kib N` compares sizes).
 */
const PAGE_CACHE_KIB = 2048;

/**
 * Bytes per page of a new database: 8 KiB, not SQLite's 4 KiB. An outbox row (~2.5 KB: the audit payload)
 * takes a 4 KiB page of its own, and each page is written to the WAL at the row's insert, again at its
 * attempt record, and once more by the checkpoint; with 8 KiB pages the rows of a batch share pages, so
 * fewer pages are written per delivery, and a delivery costs less CPU (`node bench/outbox-sqlite.bench.mjs
 * --page-size 4096|8192` compares them).
 */
const PAGE_SIZE = 8192;

/**
 * When the WAL is copied back into the database file: at least once a second, and sooner once this
 * connection has changed CHECKPOINT_CHANGES rows since the last copy (looked at every CHECKPOINT_TICK_MS).
 * The WAL size (pages) that forces a checkpoint inside a commit is the bound under any load.
 */
const CHECKPOINT_INTERVAL_MS = 1000;
const CHECKPOINT_TICK_MS = 100;
const CHECKPOINT_CHANGES = 1500;
const AUTOCHECKPOINT_PAGES = 10_000;

/**
 * The size the WAL file is cut back to once a checkpoint has copied all of it (`journal_size_limit`). SQLite
 * reuses the WAL from its start and never shrinks the file by itself: one burst (80 MB at the autocheckpoint
 * bound, more while a reader held a checkpoint back) stayed on disk for the life of the process.
 */
export const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024;

export interface WalCheckpointOptions {
  intervalMs: number;
  changes: number;
  /** Time in ms (performance.now()). */
  now?: () => number;
  /**
   * Starts a checkpoint elsewhere (`CheckpointThread.request`); false when it could not start now (one still
   * running), and a later tick asks again. Without it the checkpoint runs on this connection, in the tick.
   */
  checkpoint?: () => boolean;
}

/**
 * WAL checkpoints between requests instead of inside a commit. SQLite's default checkpoints in the commit
 * that passes 1,000 WAL pages: that commit (a request's outbox insert) then copies the pages and waits for two
 * fsyncs, and the request that made it waits with it — that wait is what sets the tail latency. From a timer
 * a checkpoint delays only what arrives while it runs, and pages written several times in between are
 * copied once.
 *
 * Run on this connection, a checkpoint holds the event loop while it copies and while the two fsyncs wait
 * for the disk; the server runs them on a `CheckpointThread` instead. Either way each one's size is bounded by
 * the rows changed, not only by time: under a high delivery rate a one-second checkpoint would grow with the
 * rate, and so would the WAL. Checkpointing every CHECKPOINT_CHANGES changed rows keeps each one small at any
 * rate; at a low rate the one-second rhythm is what applies.
 *
 * @example
 * const checkpoints = new WalCheckpointer(sqlite, { intervalMs: 1000, changes: 1500, checkpoint: () => thread.request() });
 * const timer = setInterval(() => checkpoints.tick(), 100);
 */
export class WalCheckpointer {
  private readonly totalChanges: SQLite.Statement;
  private readonly now: () => number;
  private changesAt: number;
  private checkpointedAt: number;

  constructor(
    private readonly sqlite: SQLite.Database,
    private readonly options: WalCheckpointOptions,
  ) {
    this.now = options.now ?? (() => performance.now());
    this.totalChanges = sqlite.prepare('select total_changes()').pluck();
    this.changesAt = this.changes();
    this.checkpointedAt = this.now();
  }

  /** Checkpoints when due (see the class); true when it did. */
  tick(): boolean {
    // A kysely transaction spans event-loop turns on this connection: leave the checkpoint to a later tick.
    if (!this.sqlite.open || this.sqlite.inTransaction) return false;
    const now = this.now();
    const changes = this.changes();
    if (changes - this.changesAt < this.options.changes && now - this.checkpointedAt < this.options.intervalMs) return false;
    const started = this.options.checkpoint ? this.options.checkpoint() : checkpointHere(this.sqlite);
    if (!started) return false;
    this.changesAt = changes;
    this.checkpointedAt = now;
    return true;
  }

  private changes(): number {
    return this.totalChanges.get() as number;
  }
}

/** A PASSIVE checkpoint on `sqlite`'s own connection, in this turn; always true (it is never left for later). */
function checkpointHere(sqlite: SQLite.Database): boolean {
  // PASSIVE never waits: while another process checkpoints, SQLite answers busy (a result row, not an
  // error). Anything else (a full disk) must not escape a timer and end the process: a later tick retries,
  // and the commits' autocheckpoint bounds the WAL meanwhile.
  try {
    sqlite.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Retried at a later tick.
  }
  return true;
}

/**
 * The checkpoint action: a request to the thread, or, once the thread has failed, a checkpoint on `sqlite`'s
 * own connection rather than waiting for the autocheckpoint (10,000 pages, inside some request's commit).
 * `onFallback` is told the thread's error once, at the first checkpoint that falls back.
 */
export function checkpointOnThreadOrHere(thread: CheckpointThread, sqlite: SQLite.Database, onFallback: (reason: string) => void): () => boolean {
  let told = false;
  return () => {
    if (!thread.failed) return thread.request();
    if (!told) {
      told = true;
      onFallback(thread.lastError ?? 'the checkpoint thread ended');
    }
    return checkpointHere(sqlite);
  };
}

function checkpointOnTimer(sqlite: SQLite.Database, onFallback: (reason: string) => void): () => Promise<void> {
  if (sqlite.memory) return async () => {};
  sqlite.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
  // The writer restarts the WAL at its first commit after a whole checkpoint, and cuts the file back then.
  sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  const thread = new CheckpointThread(sqlite.name);
  const checkpoints = new WalCheckpointer(sqlite, {
    intervalMs: CHECKPOINT_INTERVAL_MS,
    changes: CHECKPOINT_CHANGES,
    checkpoint: checkpointOnThreadOrHere(thread, sqlite, onFallback),
  });
  const timer = setInterval(() => checkpoints.tick(), CHECKPOINT_TICK_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    return thread.close();
  };
}

/** What kysely runs as `rollback` when SQLite has already rolled the transaction back: nothing. */
const NOTHING_TO_ROLL_BACK = { reader: false, run: () => ({ changes: 0, lastInsertRowid: 0 }) } as unknown as SQLite.Statement;

/** Prepared statements kept per SQL text; kysely's SQLite driver would otherwise prepare every query anew. */
const STATEMENT_CACHE_MAX = 500;

/**
 * The subset of better-sqlite3's `Database` kysely's SqliteDialect uses, with `prepare` answered from a
 * bounded cache and transactions begun IMMEDIATE (kysely's SQL strings are stable per query shape; parameters are bound at run time).
 * Safe because kysely runs one query at a time on the single connection (its mutex) and never leaves a
 * statement mid-iteration when it releases the connection.
 */
function withStatementCache(sqlite: SQLite.Database): SqliteDialectConfig['database'] {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      // SQLite itself rolls a transaction back on some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY); kysely's
      // `rollback` after them then failed with "cannot rollback - no transaction is active", and that error
      // replaced the one that said why (a full disk) in every caller and log.
      if (sql === 'rollback' && !sqlite.inTransaction) return NOTHING_TO_ROLL_BACK;
      let stmt = cache.get(sql);
      if (stmt === undefined || stmt.busy) {
        // kysely's SqliteDriver begins every transaction with a plain (deferred) `begin`: one that reads, then
        // writes fails with SQLITE_BUSY_SNAPSHOT, without the busy timeout waiting, when another process
        // committed in between. IMMEDIATE takes the write lock at BEGIN, where the busy timeout applies.
        stmt = sqlite.prepare(sql === 'begin' ? 'begin immediate' : sql);
        if (cache.size >= STATEMENT_CACHE_MAX) cache.clear();
        cache.set(sql, stmt);
      }
      return stmt;
    },
  } as SqliteDialectConfig['database'];
}
