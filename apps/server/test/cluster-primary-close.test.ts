// The primary's own last part of a stop of a multi-process server (SVC_PROCESSES=2), after its workers': here its end
// of a killed process's background response, then its usage counters and its database close.
// - On a database that does not answer that work, the stop waited for it without a bound (a statement waiting on a lock
//   an operator holds, here with a lock_timeout of 10 min, or a stalled Postgres), and svc-server stayed up long after
//   SIGTERM. It now waits for it within the stop's bound, says so, and exits.
// - That bound ran from the stop's start: workers that drained for the whole SVC_SHUTDOWN_TIMEOUT_MS (a stream held to
//   its end) had spent it by the time they stopped, and the primary left its work undone however quick. It now counts
//   from when they stopped.
import { setTimeout as delay } from 'node:timers/promises';
import OpenAI from 'openai';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresProcesses } from './support/postgres-processes.js';
import { childrenOf, stallingPostgresServer, startServerProcess, type ServerProcess } from './support/processes.js';
import { postChat } from './support/reliability-http.js';
import { eventually } from './support/webhooks.js';

const suite = await postgresProcesses('cluster-primary-close');
const { pgDb, servers, query } = suite;

/**
 * A `--processes 2` server on Postgres (`stallingPostgresServer`: SVC_SHUTDOWN_TIMEOUT_MS 2 s, statements wait 10 min
 * for a lock) with a background response running until its process dies, and that process's pid.
 */
async function serverRunningABackgroundResponse(emailPrefix: string): Promise<{ server: ServerProcess; token: string; responseId: string; runner: number }> {
  const { env, token } = await stallingPostgresServer(pgDb!.url, suite.upstream.url, emailPrefix);
  const server = await startServerProcess(env, ['--processes', '2']);
  servers.push(server);
  const asked = suite.upstream.requests.length;
  suite.upstream.nextBehavior({ hang: true });
  const created = await new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 }).responses.create({ model: 'svc01', input: 'Write a long novel.', background: true });
  const [run] = await eventually(async () => {
    const rows = await query<{ owner: string | null }>('select background_owner as owner from responses where id = $1', [created.id]);
    return rows[0]?.owner ? rows : undefined;
  });
  // Its upstream call is under way (and took the hanging answer, which the next request would take otherwise).
  await eventually(() => suite.upstream.requests.length > asked || undefined);
  // `worker-<pid>-<random>`: the process running it.
  return { server, token, responseId: created.id, runner: Number(/^worker-(\d+)-/.exec(run!.owner!)![1]) };
}

/**
 * Holds the response's row, then SIGKILLs the process running it: resolves once the primary's end of it (an update
 * of that row) waits. `release` lets the row go.
 */
async function killWithRowHeld(responseId: string, runner: number): Promise<{ release: () => Promise<void> }> {
  const holder = new pg.Client({ connectionString: pgDb!.url });
  await holder.connect();
  let released: Promise<void> | undefined;
  const release = () =>
    (released ??= (async () => {
      await holder.query('rollback').catch(() => {});
      await holder.end();
    })());
  try {
    await holder.query('begin');
    await holder.query('select id from responses where id = $1 for update', [responseId]);
    process.kill(runner, 'SIGKILL');
    await eventually(async () => {
      const waiting = await query(`select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'update "responses"%'`);
      return waiting.length > 0 || undefined;
    }, 30_000);
  } catch (err) {
    await release();
    throw err;
  }
  return { release };
}

/** The log lines saying what a stop left undone (`left`), any process's. */
const leftLines = (server: ServerProcess) => server.stderr().split('\n').filter((line) => line.includes('did not finish within SVC_SHUTDOWN_TIMEOUT_MS'));

describe.skipIf(!pgDb)('svc-server start --processes 2 on Postgres, stopped while the primary ends a killed process’s background response', () => {
  it('exits although that end waits on a lock, and says what it left', async () => {
    const { server, responseId, runner } = await serverRunningABackgroundResponse('close');
    const row = await killWithRowHeld(responseId, runner);
    try {
      const stopped = server.stop('SIGTERM');
      // Far beyond its bound (2 s, then 10 s): what counts is that it exits while the lock is still held (it is
      // released below).
      const outcome = await Promise.race([stopped.then((code) => ({ code })), delay(60_000, 'still running' as const)]);
      expect(outcome, server.stderr().slice(-6000)).toEqual({ code: expect.any(Number) });
      expect(server.stderr()).toMatch(/did not finish within SVC_SHUTDOWN_TIMEOUT_MS/);
    } finally {
      await row.release();
    }
  }, 180_000);

  it('with a stream held until SVC_SHUTDOWN_TIMEOUT_MS cuts it: the primary still ends and counts it once its workers stopped', async () => {
    const { server, token, responseId, runner } = await serverRunningABackgroundResponse('held');
    const row = await killWithRowHeld(responseId, runner);
    try {
      // A stream whose upstream sends its first frames, then nothing: the worker serving it holds it until it cuts it.
      suite.upstream.nextBehavior({ hangMidStream: true });
      // Held until the stop cuts it, which a loaded host may take longer to come to than postChat's 20 s guard.
      const res = await postChat(server.url, token, { stream: true, content: 'Tell me a long story.', signal: AbortSignal.timeout(120_000) });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read();

      const stopped = server.stop('SIGTERM');
      // Held for the whole SVC_SHUTDOWN_TIMEOUT_MS, then cut: the client sees it end, without [DONE].
      let rest = '';
      try {
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
      } catch {
        // Cut: the connection closed before the chunked body's end.
      }
      expect(rest).not.toContain('[DONE]');
      // Every worker has stopped: the primary's own part has begun, its end of the response still waiting on the row.
      await eventually(() => childrenOf(server.child.pid!).length === 0 || undefined, 60_000);
      await row.release();

      const outcome = await Promise.race([stopped.then((code) => ({ code })), delay(60_000, 'still running' as const)]);
      expect(outcome, server.stderr().slice(-6000)).toEqual({ code: 0 });
      expect(server.stderr()).toContain('cutting the requests still open after SVC_SHUTDOWN_TIMEOUT_MS');
      // Nothing left, by the workers or by the primary (which left `dead processes’ cleanup` and `database close`).
      expect(leftLines(server)).toEqual([]);
      const [ended] = await query<{ response: string }>('select response from responses where id = $1', [responseId]);
      expect(JSON.parse(ended!.response)).toMatchObject({ status: 'failed' });
      // Its audit counted in the Usage view, by the primary: the one 5xx of this key (the cut stream is a 499).
      const [usage] = await query<{ errors: string }>('select coalesce(sum(errors_5xx), 0) as errors from usage_daily where key_id = (select key_id from responses where id = $1)', [responseId]);
      expect(Number(usage!.errors)).toBe(1);
    } finally {
      await row.release();
    }
  }, 180_000);
});
