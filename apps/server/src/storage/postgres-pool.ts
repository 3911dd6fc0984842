import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type PgModule from 'pg';
import { connectionLost } from './storage-fault.js';

/**
 * Postgres: the longest opening a connection (TCP, TLS, authentication) or waiting for a free one of the pool may
 * take. Either takes milliseconds when Postgres is well; an address that drops packets would take minutes.
 */
export const CONNECT_TIMEOUT_MS = 5_000;

/**
 * A query Postgres did not answer within the wait bound: the network to it drops packets (a partition, a
 * failed-over database whose old address no longer answers) or it is stalled. The connection it waited on is
 * closed, so the pool opens a fresh one for the next query.
 */
export class QueryWaitError extends Error {
  readonly code = 'SVC_DATABASE_NO_ANSWER';

  constructor(readonly waitedMs: number) {
    super(`Postgres did not answer a query within ${waitedMs / 1000} s`);
    this.name = 'QueryWaitError';
  }
}

/**
 * `pool` for kysely's PostgresDialect, with every query's wait for its answer bounded by `queryWaitMs`.
 *
 * Without a bound a query whose packets are dropped waits until TCP gives up (~15 min on Linux), and holds its
 * request and its pool connection that long. pg's own `query_timeout` fails the query but leaves it active on
 * its connection, which goes back to the pool and hangs every later query sent on it. Here the connection whose
 * query timed out refuses further queries (kysely's `rollback` after a failed statement in a transaction would
 * wait too) and is released with the error, which makes the pool close it.
 *
 * @example
 * new PostgresDialect({ pool: boundedPool(new pg.Pool({ connectionString }), 15_000) });
 */
export function boundedPool(pool: PgModule.Pool, queryWaitMs: number): PostgresPool {
  return {
    connect: async () => boundedClient(await pool.connect(), queryWaitMs),
    end: () => pool.end(),
  };
}

function boundedClient(client: PgModule.PoolClient, queryWaitMs: number): PostgresPoolClient {
  let timedOut: QueryWaitError | undefined;
  // A connection Postgres ended (pg_terminate_backend: its FATAL arrives before the socket's close) is released with
  // that error, so the pool closes it: handed back as idle, it went to the next query — a caller's second try
  // included — and failed that one too ('Connection terminated unexpectedly').
  let lost: unknown;
  const query = (text: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<unknown>> => {
    if (timedOut) return Promise.reject(timedOut);
    const answer = client.query(text, [...parameters]) as unknown as Promise<PostgresQueryResult<unknown>>;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        timedOut = new QueryWaitError(queryWaitMs);
        reject(timedOut);
      }, queryWaitMs);
      // A late answer (or the 'Connection terminated' of the close) settles nothing more: already rejected.
      answer.then(
        (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        (err: unknown) => {
          clearTimeout(timer);
          if (connectionLost(err)) lost = err;
          reject(err);
        },
      );
    });
  };
  return {
    query: ((textOrCursor: string | PostgresCursor<unknown>, parameters: ReadonlyArray<unknown> = []) =>
      // Cursors (kysely's `stream()`) are not used by svc; one would pass through unbounded.
      typeof textOrCursor === 'string' ? query(textOrCursor, parameters) : client.query(textOrCursor as never)) as PostgresPoolClient['query'],
    release: () => client.release(timedOut ?? (lost as Error | undefined)),
  };
}
