// A background response's runner killed (SIGKILL) after it stored the response's end and before it finished recording
// its audit: the end was written and the run with it, so nobody looked at the response again and its audit was never
// recorded. The end and the audit to record are now written in one statement and the run stays open until the audit
// is recorded: whoever finds the run nobody's records that audit, once, and leaves the response as it ended.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import pg from 'pg';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';
import { createTestPostgres, queryPostgres } from './support/databases.js';
import { DashboardClient } from './support/dashboard-client.js';
import { startTestServer } from './support/test-server.js';
import { pendingResponse } from '../src/responses/translate.js';
import { adminCommandAsync, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';

const pgDb = await createTestPostgres('responses-background-killed');
const ANSWER = 'The library opens at 9 am.';
/**
 * The lease of the survivor and of the runners the tests wait out (BACKGROUND_LEASE_MS, 20 s, in production): the
 * survivor looks every quarter of it. Still longer than a runner's steps, held on a test's lock, take between its last
 * renewal and its kill on a loaded host.
 */
const LEASE_MS = 8_000;

let upstream: FakeUpstream;
let receiver: Receiver;
let env: NodeJS.ProcessEnv;
/** The instance that finds the killed runner's response once its lease lapsed. */
let survivor: ServerProcess | undefined;
const started: ServerProcess[] = [];

beforeAll(async () => {
  upstream = await startFakeUpstream();
  upstream.setBehavior({ answer: ANSWER });
  receiver = await startReceiver();
  if (!pgDb) return;
  env = serverEnv({
    SVC_DATABASE_URL: pgDb.url,
    SVC_SECRET_KEY: randomBytes(32).toString('base64'),
    SVC_UPSTREAM_BASE_URL: upstream.url,
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
  });
  await adminCommandAsync(['migrate'], env);
  survivor = await startServerProcess(env, [], { startOptions: { backgroundLeaseMs: LEASE_MS } });
  started.push(survivor);
});
afterAll(async () => {
  await Promise.all(started.map((s) => s.stop('SIGKILL')));
  await upstream?.close();
  await receiver?.close();
  await pgDb?.drop();
});

const sdk = (url: string, token: string) => new OpenAI({ apiKey: token, baseURL: `${url}/v1`, maxRetries: 0 });

async function newKey(): Promise<string> {
  const email = `killed-${randomBytes(4).toString('hex')}@example.test`;
  await adminCommandAsync(['users', 'create', '--email', email, '--password', 'long-enough-pw'], env);
  return (JSON.parse(await adminCommandAsync(['keys', 'create', '--email', email, '--webhook-url', receiver.url, '--json'], env)) as { key: string }).key;
}

/** A connection of the test's own, holding a lock in a transaction until `release`. */
async function holdLock(statement: string, params: unknown[] = []): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: pgDb!.url });
  await client.connect();
  await client.query('begin');
  await client.query(statement, params);
  return {
    async release() {
      await client.query('rollback');
      await client.end();
    },
  };
}

/** Resolves once a statement starting with `prefix` waits on a lock (the runner stopped right there). */
async function waitingOn(prefix: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgDb!.url });
  await client.connect();
  try {
    await eventually(async () => {
      const { rows } = await client.query<{ n: string }>(
        `select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like $1`,
        [`${prefix}%`],
      );
      return Number(rows[0]!.n) > 0 || undefined;
    }, 30_000);
  } finally {
    await client.end();
  }
}

function query<R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> {
  return queryPostgres<R>(pgDb!.url, text, params);
}

interface Audit {
  response_id?: string;
  request_id: string;
  status_code: number;
  prompt: string;
  response_text: string;
  total_tokens: number;
}

/**
 * Starts a runner (with LEASE_MS, or the production lease when `leaseMs` is undefined), creates a background response
 * on it, and returns once `killAt` has the runner stopped and killed.
 */
async function runAndKill(
  killAt: (created: { id: string; token: string; requestId: string }) => Promise<{ release(): Promise<void> }>,
  prompt: string,
  leaseMs: number | undefined = LEASE_MS,
) {
  const token = await newKey();
  const runner = await startServerProcess(env, [], leaseMs === undefined ? {} : { startOptions: { backgroundLeaseMs: leaseMs } });
  started.push(runner);
  const { data: created, response } = await sdk(runner.url, token).responses.create({ model: 'svc01', input: prompt, background: true }).withResponse();
  const run = { id: created.id, token, requestId: response.headers.get('x-request-id')! };
  const held = await killAt(run);
  await runner.stop('SIGKILL');
  // A statement the runner had sent would still run once the test's lock is gone, Postgres not having noticed its
  // client died: its connections are ended first, as Postgres ends them once it notices.
  await query('select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and wait_event_type = $1', ['Lock']);
  await held.release();
  return run;
}

/**
 * Once the run was ended by whoever found it (its lease lapses in LEASE_MS, the survivor looks every quarter of it): the one audit,
 * with the answer the runner had, one delivery stored, and the response as it ended, not failed by its finder.
 */
async function auditedOnce(id: string, requestId: string, prompt: string, token: string): Promise<void> {
  await eventually(async () => {
    const [row] = await query<{ lease: string | null }>('select background_lease_until as lease from responses where id = $1', [id]);
    return row?.lease === null || undefined;
  }, 60_000);
  const received = await receiver.waitFor((all) => all.some((d) => (JSON.parse(d.raw.toString('utf8')) as Audit).response_id === id), 30_000);
  const audits = received.map((d) => JSON.parse(d.raw.toString('utf8')) as Audit).filter((a) => a.response_id === id);
  expect(audits).toEqual([expect.objectContaining({ request_id: requestId, status_code: 200, prompt: `user: ${prompt}`, response_text: ANSWER })]);
  expect(audits[0]!.total_tokens).toBeGreaterThan(0);
  expect(await query('select id from webhook_deliveries where request_id = $1', [requestId])).toHaveLength(1);
  expect(await sdk(survivor!.url, token).responses.retrieve(id)).toMatchObject({ status: 'completed', output_text: ANSWER });
}

describe('a background response whose runner is killed between storing its end and recording its audit (Postgres)', () => {
  it.skipIf(!pgDb)('killed before its audit was recorded: whoever finds the run records it, once, with the response as it ended', async () => {
    const prompt = 'When does it open? (killed before the audit)';
    // The audit's insert numbers the delivery in delivery_sequences: held there, the runner stops after the end is stored.
    const { id, requestId, token } = await runAndKill(async (run) => {
      const held = await holdLock('lock table delivery_sequences in exclusive mode');
      await eventually(async () => (await sdk(survivor!.url, run.token).responses.retrieve(run.id)).status === 'completed' || undefined, 30_000);
      await waitingOn('insert into delivery_sequences');
      expect(await query('select id from webhook_deliveries where request_id = $1', [run.requestId])).toEqual([]);
      return held;
    }, prompt);
    await auditedOnce(id, requestId, prompt, token);
  }, 120_000);

  it.skipIf(!pgDb)('killed after its audit was recorded, before its run was ended: the audit is not recorded a second time', async () => {
    const prompt = 'When does it open? (killed after the audit)';
    const { id, requestId, token } = await runAndKill(async (run) => {
      // The audit's insert is held until the response's row is held too: the run's end (an update of that row) then waits.
      const sequences = await holdLock('lock table delivery_sequences in exclusive mode');
      await waitingOn('insert into delivery_sequences');
      const row = await holdLock('select id from responses where id = $1 for update', [run.id]);
      await sequences.release();
      await eventually(async () => (await query('select id from webhook_deliveries where request_id = $1', [run.requestId])).length === 1 || undefined, 30_000);
      await waitingOn('update "responses"');
      return row;
    }, prompt);
    await auditedOnce(id, requestId, prompt, token);
  }, 120_000);

  it.skipIf(!pgDb)('killed before its audit was recorded, then the response deleted before anyone found the run: the audit is recorded, once', async () => {
    const prompt = 'When does it open? (killed, then deleted)';
    // The production lease: the DELETE below comes before anyone could find the run, however slow the host.
    const { id, requestId, token } = await runAndKill(async (run) => {
      const held = await holdLock('lock table delivery_sequences in exclusive mode');
      await eventually(async () => (await sdk(survivor!.url, run.token).responses.retrieve(run.id)).status === 'completed' || undefined, 30_000);
      await waitingOn('insert into delivery_sequences');
      return held;
    }, prompt, undefined);
    // Within the killed runner's lease: nobody has found its run yet, and the row, its pending audit with it, goes.
    await sdk(survivor!.url, token).responses.delete(id);
    const received = await receiver.waitFor((all) => all.some((d) => (JSON.parse(d.raw.toString('utf8')) as Audit).response_id === id), 30_000);
    const audits = received.map((d) => JSON.parse(d.raw.toString('utf8')) as Audit).filter((a) => a.response_id === id);
    expect(audits).toEqual([expect.objectContaining({ request_id: requestId, status_code: 200, prompt: `user: ${prompt}`, response_text: ANSWER })]);
    expect(await query('select id from webhook_deliveries where request_id = $1', [requestId])).toHaveLength(1);
  }, 120_000);
});

describe('a server process killed with a background response running (SVC_PROCESSES=2, SQLite)', () => {
  it('the primary ends it failed and counts its audit (500) in the Usage view, as any request', async () => {
    const sqliteEnv = serverEnv({
      SVC_DATABASE_URL: `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-bg-killed-')), 'svc.db')}`,
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_LOG_LEVEL: 'info',
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    });
    const server = await startServerProcess(sqliteEnv, ['--processes', '2']);
    started.push(server);
    const email = `usage-${randomBytes(4).toString('hex')}@example.test`;
    await adminCommandAsync(['users', 'create', '--email', email, '--password', 'long-enough-pw'], sqliteEnv);
    // No webhook URL: the Usage view counts every request, audited to a receiver or not.
    const { key: token } = JSON.parse(await adminCommandAsync(['keys', 'create', '--email', email, '--json'], sqliteEnv)) as { key: string };
    upstream.nextBehavior({ hang: true });
    const { data: created, response } = await sdk(server.url, token).responses.create({ model: 'svc01', input: 'Write a long novel.', background: true }).withResponse();
    const requestId = response.headers.get('x-request-id');
    // The process that answered the POST runs it (request log lines carry the pid with several processes).
    const pid = await eventually(() => {
      for (const line of server.stderr().split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { msg?: string; request_id?: string; pid?: number };
        if (entry.msg === 'request' && entry.request_id === requestId) return entry.pid;
      }
      return undefined;
    });
    process.kill(pid, 'SIGKILL');
    // A connection the primary hands to the killed process before it learns of the death is lost (Node's cluster):
    // each read that fails so is made again.
    const retried = <T>(read: () => Promise<T | undefined>) => eventually(() => read().catch(() => undefined), 30_000);
    const ended = await retried(async () => {
      const read = await sdk(server.url, token).responses.retrieve(created.id, {}, { timeout: 5_000 });
      return read.status === 'in_progress' ? undefined : read;
    });
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
    // The primary's count is written within a second of the end.
    const total = await retried(async () => {
      const dashboard = new DashboardClient(server.url);
      if ((await dashboard.login(email, 'long-enough-pw')).status !== 200) return undefined;
      const { body } = await dashboard.request('GET', '/usage?days=1');
      return body.total_summary.requests > 0 ? body.total_summary : undefined;
    });
    expect(total).toMatchObject({ requests: 1, errors_5xx: 1, total_tokens: 0 });
  }, 120_000);
});

describe('embedded SQLite: the next start finds a run its end was stored for, its audit perhaps not recorded', () => {
  it('records the audit stored with the end, once, and leaves the response as it ended', async () => {
    const databaseUrl = `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-bg-killed-')), 'svc.db')}`;
    const sqliteEnv = { SVC_DATABASE_URL: databaseUrl, SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' };
    const first = await startTestServer({ env: sqliteEnv });
    const { token, key } = await first.createKey({ webhookUrl: receiver.url });
    // What a runner killed between the two leaves: its end and the audit it was recording, its run still open.
    const prompt = 'When does it open? (SQLite, restarted)';
    const base = { id: `resp_${randomBytes(24).toString('hex')}`, createdAt: Math.floor(Date.now() / 1000), request: { model: 'svc01', input: prompt, background: true } };
    const input = [{ type: 'message' as const, id: `msg_${randomBytes(8).toString('hex')}`, role: 'user' as const, content: [{ type: 'input_text' as const, text: prompt }] }];
    const run = { owner: 'a-process-killed', until: Date.now() + 3_600_000 };
    const audit = { requestId: 'req_killed', startedAt: Date.now() - 1_000, streaming: false };
    await first.running.store.responses.save(key.id, pendingResponse(base), input, 0, undefined, { ...run, audit });
    const completed = {
      ...pendingResponse(base),
      status: 'completed' as const,
      completed_at: base.createdAt,
      output: [{ type: 'message' as const, id: 'msg_answer', role: 'assistant' as const, status: 'completed' as const, content: [{ type: 'output_text' as const, text: ANSWER, annotations: [], logprobs: [] }] }],
    };
    const usage = { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 };
    await first.running.store.responses.settle(key.id, completed, run, undefined, { ...audit, outcome: { statusCode: 200, finishedAt: Date.now(), responseText: ANSWER, svc: null, usage } });
    await first.close();

    const next = await startTestServer({ env: sqliteEnv });
    try {
      const received = await receiver.waitFor((all) => all.some((d) => (JSON.parse(d.raw.toString('utf8')) as Audit).response_id === base.id), 30_000);
      await eventually(async () => (await next.running.store.responses.state(key.id, base.id))?.running === false || undefined);
      const audits = received.map((d) => JSON.parse(d.raw.toString('utf8')) as Audit).filter((a) => a.response_id === base.id);
      expect(audits).toEqual([expect.objectContaining({ request_id: 'req_killed', status_code: 200, prompt: `user: ${prompt}`, response_text: ANSWER, total_tokens: 16 })]);
      expect(await sdk(next.url, token).responses.retrieve(base.id)).toMatchObject({ status: 'completed', output_text: ANSWER });
    } finally {
      await next.close();
    }
    // Two starts, two closes and a wait of up to 30 s for the receiver: past vitest's 30 s default on a loaded host.
  }, 120_000);
});
