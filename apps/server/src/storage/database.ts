import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: Dialect;
  /** Directory of the SQLite file (where the embedded secret key lives); undefined for Postgres. */
  dataDir: string | undefined;
  close(): Promise<void>;
}

// BIGINT (int8) would otherwise come back as a string; our values (epoch ms, token counts) fit in a double.
pg.types.setTypeParser(20, (value) => Number.parseInt(value, 10));

/**
 * Opens `sqlite:PATH` (WAL, created if missing) or `postgres://…` (pooled).
 *
 * @example
 * const handle = openDatabase('sqlite:./data/svc.db');
 */
export function openDatabase(url: string, options: { poolSize?: number } = {}): DatabaseHandle {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    const file = path === ':memory:' ? ':memory:' : resolve(path);
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    const sqlite = new SQLite(file);
    sqlite.pragma('journal_mode = WAL');
    // NORMAL in WAL mode survives a process crash (SIGKILL); only an OS crash can lose the last commits.
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    return {
      db,
      dialect: 'sqlite',
      dataDir: file === ':memory:' ? undefined : dirname(file),
      close: () => db.destroy(),
    };
  }
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 20 });
  // An idle client error (server restart) must not crash the process; the pool replaces the client.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', dataDir: undefined, close: () => db.destroy() };
}
