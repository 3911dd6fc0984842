import type SQLite from 'better-sqlite3';

/**
 * The longest `/readyz` (and a `/metrics` scrape's `svc_database_up`) waits for the database's answer. Load
 * balancers give a health check 2–5 s (AWS ALB's default 5 s, Kubernetes' `timeoutSeconds` 1 s by default, often
 * raised to 2–3): a probe that waited for Postgres's lock_timeout (10 s) or a query's wait bound (15 s) timed out
 * there, and the instance was marked dead with no reason given.
 */
export const READY_WAIT_MS = 2_000;

/**
 * SQLite: the longest the write probe waits for another connection's write lock (another process's transaction,
 * an operator's `sqlite3` session). A SQLite statement runs on the event loop: with the connection's busy timeout
 * (5 s) the probe held every request, `/healthz` too, for 5 s past a load balancer's check timeout.
 */
export const SQLITE_READY_BUSY_MS = 1_000;

/**
 * `probe` bounded by `waitMs` and shared: while one started less than `waitMs` ago is still waiting for the database
 * (a lock another session holds, a partition, a pool with no free connection), later calls wait on the same one
 * instead of taking another connection each, so health checks never pile up on a stalled database (one new probe
 * per `waitMs` at most). A call that
 * waited `waitMs` answers why; the probe it waited on goes on to its own end.
 *
 * @example
 * const unready = boundedProbe(() => writeProbe(db), READY_WAIT_MS);
 * await unready(); // null, or 'the database did not answer a write within 2 s …'
 */
/**
 * SQLite: the write probe on the connection itself, waiting at most SQLITE_READY_BUSY_MS for another connection's
 * write lock; undefined while a transaction of this connection is open (then the caller's own probe runs).
 *
 * @example
 * const probe = sqliteWriteProbe(handle.sqlite);
 * await (probe() ?? kyselyProbe());
 */
export function sqliteWriteProbe(sqlite: SQLite.Database): () => Promise<string | null> | undefined {
  let upsert: SQLite.Statement | undefined;
  return () => {
    // A kysely transaction spans event-loop turns on this connection: the caller's own probe waits for it.
    if (sqlite.inTransaction) return undefined;
    const busy = sqlite.pragma('busy_timeout', { simple: true }) as number;
    sqlite.pragma(`busy_timeout = ${SQLITE_READY_BUSY_MS}`);
    try {
      upsert ??= sqlite.prepare("insert into svc_meta (key, value) values ('readyz_write_probe', ?) on conflict (key) do update set value = excluded.value");
      upsert.run(String(Date.now()));
      return Promise.resolve(null);
    } catch (err) {
      return Promise.resolve(`a write failed: ${(err as Error).message ?? String(err)}`);
    } finally {
      sqlite.pragma(`busy_timeout = ${busy}`);
    }
  };
}

export function boundedProbe(probe: () => Promise<string | null>, waitMs: number): () => Promise<string | null> {
  let running: Promise<string | null> | undefined;
  let startedAt = 0;
  return () => {
    // A probe older than the bound may wait on a connection that died with the outage (it fails at the query's own
    // bound, 15 s): a check after the database came back then starts a fresh one rather than report the old wait.
    if (running === undefined || performance.now() - startedAt >= waitMs) {
      const started = probe().catch((err: unknown) => `a write failed: ${(err as Error).message ?? String(err)}`);
      running = started;
      startedAt = performance.now();
      void started.finally(() => {
        if (running === started) running = undefined;
      });
    }
    const answer = running;
    return new Promise<string | null>((resolve) => {
      const timer = setTimeout(
        () =>
          resolve(
            `the database did not answer a write within ${waitMs / 1000} s: a lock another session holds, a network that drops packets, a stalled database or no free pool connection`,
          ),
        waitMs,
      );
      void answer.then((problem) => {
        clearTimeout(timer);
        resolve(problem);
      });
    });
  };
}
