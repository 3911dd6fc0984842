import pg from 'pg';
import { expect } from 'vitest';
import { createTestPostgres, queryPostgres } from './databases.js';

/**
 * A Postgres database for tests that make a deadlock between a statement under test and another session (see
 * `otherSession`), or undefined where Postgres is absent (as `createTestPostgres`).
 *
 * Postgres looks for a deadlock once, in the session whose wait passes its deadlock_timeout, and fails that session.
 * The statement under test waits first; were its one look to come before the other session waits too (with the 1 s
 * default, a loaded host's poll of pg_stat_activity can take that long), the other session's look would find the cycle
 * and fail that session instead, and the statement's retry would go untested. So this database's sessions look after 3 s.
 */
export async function deadlockTestPostgres(label: string): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const db = await createTestPostgres(label);
  if (db) await queryPostgres(db.url, `alter database "${new URL(db.url).pathname.slice(1)}" set deadlock_timeout = '3s'`);
  return db;
}

/** A second session that never looks for a deadlock first (60 s), so that the statement under test is the one failed. */
export async function otherSession(url: string): Promise<pg.Client> {
  const other = new pg.Client({ connectionString: url });
  await other.connect();
  await other.query("set deadlock_timeout = '60s'");
  return other;
}

/** Until one statement like `pattern` waits for a lock. */
export async function waitingForLock(url: string, pattern: string): Promise<void> {
  const waiting = "select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like $1";
  await expect.poll(async () => Number((await queryPostgres<{ n: string | number }>(url, waiting, [pattern]))[0]?.n)).toBe(1);
}
