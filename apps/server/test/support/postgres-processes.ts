import type pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { createTestPostgres, queryPostgres } from './databases.js';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.js';
import type { ServerProcess } from './processes.js';

/**
 * What a file of server-process tests on Postgres sets up: a database of its own (undefined without Postgres: the file
 * skips), a fake upstream started before its tests, and the servers its tests push to `servers`, killed after them
 * with the upstream stopped and the database dropped. Called at the top of a test file (`await`).
 *
 * @example
 * const suite = await postgresProcesses('shutdown-stalled-database');
 * await stallingPostgresServer(suite.pgDb!.url, suite.upstream.url, 'stall');
 */
export async function postgresProcesses(label: string) {
  const pgDb = await createTestPostgres(label);
  let upstream: FakeUpstream | undefined;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await upstream?.close();
    await pgDb?.drop();
  });
  return {
    pgDb,
    servers,
    get upstream(): FakeUpstream {
      if (!upstream) throw new Error('the fake upstream starts in beforeAll');
      return upstream;
    },
    query<R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> {
      return queryPostgres<R>(pgDb!.url, text, params);
    },
  };
}
