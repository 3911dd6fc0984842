/**
 * The longest `/readyz` (and a `/metrics` scrape's `svc_database_up`) waits for the database's answer. Load
 * balancers give a health check 2–5 s (AWS ALB's default 5 s, Kubernetes' `timeoutSeconds` 1 s by default, often
 * raised to 2–3): a probe that waited for Postgres's lock_timeout (10 s) or a query's wait bound (15 s) timed out
 * there, and the instance was marked dead with no reason given.
 */
export const READY_WAIT_MS = 2_000;

/**
 * `probe` bounded by `waitMs` and run once at a time: while one is still waiting for the database (a lock another
 * session holds, a partition, a pool with no free connection), later calls wait on the same one instead of
 * taking another connection each, so health checks every second never pile up on a stalled database. A call that
 * waited `waitMs` answers why; the probe it waited on goes on to its own end.
 *
 * @example
 * const unready = boundedProbe(() => writeProbe(db), READY_WAIT_MS);
 * await unready(); // null, or 'the database did not answer a write within 2 s …'
 */
export function boundedProbe(probe: () => Promise<string | null>, waitMs: number): () => Promise<string | null> {
  let running: Promise<string | null> | undefined;
  return () => {
    if (running === undefined) {
      const started = probe().catch((err: unknown) => `a write failed: ${(err as Error).message ?? String(err)}`);
      running = started;
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
