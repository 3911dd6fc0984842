// A stop (SIGTERM) on a database that does not answer the last usage counters' write: the write waited on a lock an
// operator holds (here with a lock_timeout of 10 min, as a stalled Postgres would hold it), and svc-server stayed up
// as long, past any supervisor's grace, in one process and in the primary of several. The last part of the stop is
// now bounded by SVC_SHUTDOWN_TIMEOUT_MS: it exits while the lock is still held and says what it left uncounted.
import { setTimeout as delay } from 'node:timers/promises';
import OpenAI from 'openai';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresProcesses } from './support/postgres-processes.js';
import { stallingPostgresServer, startServerProcess, type ServerProcess } from './support/processes.js';
import { eventually } from './support/webhooks.js';

const suite = await postgresProcesses('shutdown-stalled-database');
const { pgDb, servers, query } = suite;

/** Holds the usage counters' table against writes (reads go on) until `release`; resolves once a write waits on it. */
async function holdUsageTable(): Promise<{ waiting: () => Promise<void>; release: () => Promise<void> }> {
  const holder = new pg.Client({ connectionString: pgDb!.url });
  await holder.connect();
  await holder.query('begin');
  await holder.query('lock table usage_daily in exclusive mode');
  return {
    waiting: () =>
      eventually(async () => {
        const rows = await query(`select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'insert into "usage_daily"%'`);
        return rows.length > 0 || undefined;
      }, 30_000).then(() => undefined),
    release: async () => {
      await holder.query('rollback').catch(() => {});
      await holder.end();
    },
  };
}

/** SIGTERM, then how it ended within a minute (far beyond the 2 s: what counts is that it exits while the lock is held). */
async function stopWithin(server: ServerProcess): Promise<{ code: number | null } | 'still running'> {
  return Promise.race([server.stop('SIGTERM').then((code) => ({ code })), delay(60_000, 'still running' as const)]);
}

/** SIGTERM: it exits 0 while the lock is held, its log naming what it left and the one request it did not count. */
async function expectStoppedLeavingOneUncounted(server: ServerProcess): Promise<void> {
  expect(await stopWithin(server), server.stderr().slice(-6000)).toEqual({ code: 0 });
  const left = server.stderr().split('\n').find((line) => line.includes('did not finish within SVC_SHUTDOWN_TIMEOUT_MS'));
  expect(left, server.stderr().slice(-6000)).toBeDefined();
  expect(JSON.parse(left!)).toMatchObject({ left: ['usage counters', 'database close'], uncounted_requests: 1 });
}

describe.skipIf(!pgDb)('svc-server stopped while the usage counters’ write waits on a lock', () => {
  it('one process exits after SVC_SHUTDOWN_TIMEOUT_MS and says the request it left uncounted', async () => {
    const { env, token } = await stallingPostgresServer(pgDb!.url, suite.upstream.url, 'stall');
    const server = await startServerProcess(env, []);
    servers.push(server);
    const lock = await holdUsageTable();
    try {
      const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
      await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Say hi.' }] });
      await lock.waiting();

      await expectStoppedLeavingOneUncounted(server);
    } finally {
      await lock.release();
    }
  }, 180_000);

  it('the primary of --processes 2 exits after SVC_SHUTDOWN_TIMEOUT_MS and says what it left uncounted', async () => {
    const { env, token } = await stallingPostgresServer(pgDb!.url, suite.upstream.url, 'stall');
    const server = await startServerProcess(env, ['--processes', '2']);
    servers.push(server);
    // A background response that runs until its process dies; the primary ends it `failed` and counts it.
    suite.upstream.nextBehavior({ hang: true });
    const created = await new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 }).responses.create({ model: 'svc01', input: 'Write a long novel.', background: true });
    const [run] = await eventually(async () => {
      const rows = await query<{ owner: string | null }>('select background_owner as owner from responses where id = $1', [created.id]);
      return rows[0]?.owner ? rows : undefined;
    });
    const pid = Number(/^worker-(\d+)-/.exec(run!.owner!)![1]);
    const lock = await holdUsageTable();
    try {
      process.kill(pid, 'SIGKILL');
      // The primary ended it and writes its count.
      await lock.waiting();

      await expectStoppedLeavingOneUncounted(server);
    } finally {
      await lock.release();
    }
  }, 180_000);
});
