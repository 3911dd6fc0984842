import { chmodSync, realpathSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { DatabaseHandle } from './database.js';

/**
 * A second server started on a SQLite file another one is serving (not through `SVC_PROCESSES`). It is refused:
 * each process would count rate limits in its own memory (a key would get its limit once per process, silently),
 * and a start releases the webhook leases it finds as a previous run's, so each start re-sent what the other had
 * in flight.
 */
export class SqliteServerRunningError extends Error {
  readonly code = 'SVC_SQLITE_IN_USE';

  constructor(databaseFile: string, lockFile: string) {
    super(
      `another svc server is already running on ${databaseFile} (it holds ${lockFile}). Two servers started separately on one SQLite ` +
        `file would each count rate limits in memory — a key would get its limit once per server — and each start would re-send the ` +
        `webhooks the other has in flight. Stop the other server first. For several processes on this machine start one server ` +
        `with SVC_PROCESSES=<n> (or --processes <n>); for several instances use Postgres (SVC_DATABASE_URL=postgres://…) and ` +
        `Redis (SVC_REDIS_URL), as docs/scaling.md describes.`,
    );
    this.name = 'SqliteServerRunningError';
  }
}

/** Held while a server (or a multi-process server's primary) runs on a SQLite file: `release` at its stop. */
export interface ServerLock {
  release(): void;
}

/**
 * Takes the server lock of the SQLite file under `handle`: an exclusive lock on `<file>.server-lock`, held by an
 * open SQLite transaction in locking_mode EXCLUSIVE. The kernel drops it when the process ends however it ends
 * (SIGKILL, OOM), so a supervisor's restart after a crash is never refused, as a pid file or a heartbeat row
 * would be (a pid is reused; a heartbeat is fresh for a while). Nothing for Postgres or `sqlite::memory:`.
 * Throws SqliteServerRunningError when another process holds it.
 *
 * @example
 * const lock = holdServerLock(store.handle); … lock.release();
 */
export function holdServerLock(handle: DatabaseHandle): ServerLock {
  const file = handle.sqlite?.name;
  if (file === undefined || handle.sqlite?.memory) return { release: () => {} };
  // Beside the file a link names: SQLite follows the link, so a server started by it and one started by the real path
  // serve one database and must meet at one lock.
  const lockFile = `${realpathSync(file)}.server-lock`;
  const lock = new Database(lockFile, { timeout: 0 });
  try {
    // Empty, but beside svc.db and kept as its files are (0600).
    chmodSync(lockFile, 0o600);
    lock.pragma('locking_mode = exclusive');
    // The transaction writes nothing: no journal file beside it.
    lock.pragma('journal_mode = memory');
    lock.exec('begin exclusive');
  } catch (err) {
    lock.close();
    if ((err as { code?: unknown }).code === 'SQLITE_BUSY') throw new SqliteServerRunningError(file, lockFile);
    throw err;
  }
  return { release: () => lock.close() };
}
