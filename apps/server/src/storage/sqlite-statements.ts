import type SQLite from 'better-sqlite3';

/**
 * Hand-written, prepared-once SQL for the few statements on the request and webhook hot paths (SQLite only).
 * They run synchronously on the connection kysely also uses, so each one is atomic with respect to the
 * event loop; `usable` is false while a kysely transaction is open on that connection (it spans event-loop
 * turns), and the stores then wait for it (`SqliteOutboxStore`) or take their kysely path, which waits too.
 */
export class SqliteStatements {
  private readonly cache = new Map<string, SQLite.Statement>();

  constructor(readonly db: SQLite.Database) {}

  /** No transaction open on the shared connection: direct statements commit on their own. */
  get usable(): boolean {
    return this.db.open && !this.db.inTransaction;
  }

  get(sql: string): SQLite.Statement {
    let stmt = this.cache.get(sql);
    if (stmt === undefined) {
      stmt = this.db.prepare(sql);
      this.cache.set(sql, stmt);
    }
    return stmt;
  }
}
