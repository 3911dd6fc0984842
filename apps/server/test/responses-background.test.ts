import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { Agent } from 'undici';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { eventually, startReceiver, type ReceivedDelivery, type Receiver } from './support/webhooks.js';
import { createTestPostgres } from './support/databases.js';
import { adminCommandAsync, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';

/**
 * OpenAI's background mode (`background: true`) as its guide has clients use it through the openai SDK: create, poll
 * `retrieve` while `queued`/`in_progress`, `cancel`; on SQLite and on Postgres, where a second instance polls and
 * cancels what the first runs, and where an instance that dies leaves nothing stuck `in_progress`.
 */

const pgDb = await createTestPostgres('responses-background');
const SECRET_KEY = randomBytes(32).toString('base64');
const RUNNING = ['queued', 'in_progress'];

let upstream: FakeUpstream;
let receiver: Receiver;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  receiver = await startReceiver();
});
afterAll(async () => {
  await upstream?.close();
  await receiver?.close();
  await pgDb?.drop();
});

/** A promise the fake upstream waits on (the model working) until the test opens it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

const sdk = (url: string, token: string) => new OpenAI({ apiKey: token, baseURL: `${url}/v1`, maxRetries: 0 });

/** Polls as the background guide does (a few times a second, within the key's rate limit), until the response leaves `queued`/`in_progress`. */
function finished(client: OpenAI, id: string, timeoutMs = 30_000): Promise<OpenAI.Responses.Response> {
  return eventually(async () => {
    const response = await client.responses.retrieve(id);
    if (!RUNNING.includes(response.status!)) return response;
    await delay(200);
    return undefined;
  }, timeoutMs);
}

/** A new user's key, made with the admin command on `env`'s database, its webhook URL the test's receiver. */
async function keyFor(env: NodeJS.ProcessEnv): Promise<string> {
  const email = `bg-${randomBytes(4).toString('hex')}@example.test`;
  await adminCommandAsync(['users', 'create', '--email', email, '--password', 'long-enough-pw'], env);
  return (JSON.parse(await adminCommandAsync(['keys', 'create', '--email', email, '--webhook-url', receiver.url, '--json'], env)) as { key: string }).key;
}

interface Audit {
  response_id?: string;
  request_id: string;
  status_code: number;
  streaming: boolean;
  prompt: string;
  response_text: string;
  total_tokens: number;
}

const deliveriesOf = (received: ReceivedDelivery[], id: string) =>
  received.map((d) => JSON.parse(d.raw.toString('utf8')) as Audit).filter((p) => p.response_id === id);

/**
 * The audit of a background response ended `failed` because nobody ran it any more, once it came: a failed
 * request's (500, no answer, no tokens), naming the POST's request id and prompt. One only: it came after the
 * response was read `failed`, written after its audit was recorded.
 */
async function orphanAudit(id: string, requestId: string, prompt: string): Promise<void> {
  const audits = await receiver.waitFor((received) => deliveriesOf(received, id).length > 0, 60_000).then((r) => deliveriesOf(r, id));
  expect(audits).toEqual([expect.objectContaining({ request_id: requestId, status_code: 500, streaming: false, prompt: `user: ${prompt}`, response_text: '', total_tokens: 0 })]);
}

const variants = [
  ['SQLite', undefined],
  ['Postgres, a second instance polling and cancelling', pgDb?.url],
] as const;

describe.each(variants)('background responses (%s)', (name, databaseUrl) => {
  const enabled = name === 'SQLite' || databaseUrl !== undefined;
  let env: Record<string, string>;
  let runner: TestServer;
  /** The instance the client polls and cancels through: another one on Postgres. */
  let other: TestServer;
  let token: string;

  beforeAll(async () => {
    if (!enabled) return;
    env = {
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      ...(databaseUrl && { SVC_DATABASE_URL: databaseUrl, SVC_SECRET_KEY: SECRET_KEY }),
    };
    runner = await startTestServer({ env });
    other = databaseUrl ? await startTestServer({ env }) : runner;
    ({ token } = await runner.createKey({ webhookUrl: receiver.url }));
  });
  afterAll(async () => {
    await runner?.close();
    if (other !== runner) await other?.close();
  });

  it.skipIf(!enabled)('answers the POST at once, in_progress; the answer lands in the store, read by polling; one audit, sent at the end', async () => {
    const model = gate();
    upstream.nextBehavior({ answer: 'The tower is in Paris.', holdUntil: model.opened });
    const created = await sdk(runner.url, token).responses.create({ model: 'svc01', input: 'Where is the tower?', background: true });
    expect(created).toMatchObject({ object: 'response', status: 'in_progress', background: true, output: [] });
    expect(await sdk(other.url, token).responses.retrieve(created.id)).toMatchObject({ id: created.id, status: 'in_progress' });
    expect(deliveriesOf(receiver.received, created.id)).toEqual([]);

    model.open();
    const done = await finished(sdk(other.url, token), created.id);
    expect(done).toMatchObject({ status: 'completed', background: true, output_text: 'The tower is in Paris.' });
    const [audit] = await receiver.waitFor((received) => deliveriesOf(received, created.id).length > 0).then((r) => deliveriesOf(r, created.id));
    expect(audit).toMatchObject({ status_code: 200 });
    // Its output is a conversation's turn like any other.
    upstream.nextBehavior({ answer: 'It is 330 metres tall.' });
    const next = await sdk(other.url, token).responses.create({ model: 'svc01', previous_response_id: created.id, input: 'How tall?' });
    expect(next.output_text).toBe('It is 330 metres tall.');
    expect(JSON.stringify(upstream.requests.at(-1)!.body.messages)).toContain('The tower is in Paris.');
    expect(deliveriesOf(receiver.received, created.id)).toHaveLength(1);
  });

  it.skipIf(!enabled)('cancel stops the upstream call wherever it runs and returns it cancelled, again on a second call; one audit (409: a cancel, not a client that went away)', async () => {
    upstream.nextBehavior({ hang: true });
    const created = await sdk(runner.url, token).responses.create({ model: 'svc01', input: 'Write a long novel.', background: true });
    const aborted = upstream.waitForAbort(30_000);
    const cancelled = await sdk(other.url, token).responses.cancel(created.id);
    expect(cancelled).toMatchObject({ id: created.id, status: 'cancelled', background: true });
    await aborted;
    expect(await sdk(runner.url, token).responses.cancel(created.id)).toMatchObject({ status: 'cancelled' });
    expect(await sdk(runner.url, token).responses.retrieve(created.id)).toMatchObject({ status: 'cancelled' });
    const audits = await receiver.waitFor((received) => deliveriesOf(received, created.id).length > 0).then((r) => deliveriesOf(r, created.id));
    expect(audits).toEqual([expect.objectContaining({ status_code: 409 })]);
    // Deleted while running, from either instance: stopped first, not left running for nobody.
    upstream.nextBehavior({ hang: true });
    const prompt = `Write another novel (${name}).`;
    const deleted = await sdk(runner.url, token).responses.create({ model: 'svc01', input: prompt, background: true });
    await sdk(other.url, token).responses.delete(deleted.id);
    await eventually(() => upstream.requests.find((r) => JSON.stringify(r.body.messages).includes(prompt))?.aborted);
    expect(await sdk(runner.url, token).responses.retrieve(deleted.id).catch((err: unknown) => err)).toBeInstanceOf(OpenAI.NotFoundError);
    // Finished ones are returned as they are.
    const quick = await sdk(runner.url, token).responses.create({ model: 'svc01', input: 'Hi', background: true });
    const answered = await finished(sdk(runner.url, token), quick.id);
    // (`output_text` is the SDK's own addition to what `retrieve` returns.)
    const { output_text: _, ...stored } = answered;
    expect(await sdk(other.url, token).responses.cancel(quick.id)).toEqual(stored);
  });

  it.skipIf(!enabled)('a background stream read again from the other instance while it runs; a cancel from anywhere ends both streams, stored cancelled', async () => {
    const model = gate();
    upstream.nextBehavior({ answer: 'The tower is in Paris.', silentUntil: model.opened });
    const stream = await sdk(runner.url, token).responses.create({ model: 'svc01', input: 'Where is the tower?', background: true, stream: true });
    let id = '';
    let resumed: OpenAI.Responses.ResponseStreamEvent[] | undefined;
    let cancelled: OpenAI.Responses.Response | undefined;
    try {
      for await (const event of stream) {
        if (event.type !== 'response.created') continue;
        id = event.response.id;
        expect(await sdk(other.url, token).responses.retrieve(id)).toMatchObject({ status: 'in_progress', background: true });
        const again = await sdk(other.url, token).responses.retrieve(id, { stream: true, starting_after: 0 });
        cancelled = await sdk(other.url, token).responses.cancel(id);
        resumed = [];
        for await (const resumedEvent of again) resumed.push(resumedEvent);
      }
    } catch {
      // The stream may end without its last event: the response was cancelled under it.
    }
    // The event after 0 (`response.in_progress`), then the end of the stream, as the cancel ended it: no answer came.
    expect(resumed?.map((e) => [e.sequence_number, e.type])).toEqual([[1, 'response.in_progress']]);
    expect(cancelled).toMatchObject({ id, status: 'cancelled' });
    expect(await sdk(runner.url, token).responses.retrieve(id)).toMatchObject({ status: 'cancelled' });
    model.open();
  });

  it.skipIf(!enabled)('a background stream whose client leaves runs on: its end is stored, read by polling, audited once (200)', async () => {
    const model = gate();
    upstream.nextBehavior({ answer: 'The tower is in Paris.', silentUntil: model.opened });
    const stream = await sdk(runner.url, token).responses.create({ model: 'svc01', input: 'Where is the tower?', background: true, stream: true });
    let id = '';
    for await (const event of stream) {
      if (event.type !== 'response.created') continue;
      id = event.response.id;
      break; // The SDK closes the connection.
    }
    expect(await sdk(other.url, token).responses.retrieve(id)).toMatchObject({ status: 'in_progress' });
    model.open();
    expect(await finished(sdk(other.url, token), id)).toMatchObject({ status: 'completed', output_text: 'The tower is in Paris.' });
    const audits = await receiver.waitFor((received) => deliveriesOf(received, id).length > 0).then((r) => deliveriesOf(r, id));
    expect(audits).toEqual([expect.objectContaining({ status_code: 200 })]);
    expect(upstream.requests.at(-1)!.aborted).toBe(false);
  });

  it.skipIf(!enabled)('a graceful stop gives a running one its time, then ends it failed, saying the server stopped', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'svc-bg-')), 'svc.db');
    const own = { ...env, SVC_SHUTDOWN_TIMEOUT_MS: '300', ...(databaseUrl ? {} : { SVC_DATABASE_URL: `sqlite:${file}` }) };
    const stopping = await startTestServer({ env: own });
    const { token: stopToken } = await stopping.createKey();
    upstream.nextBehavior({ hang: true });
    const created = await sdk(stopping.url, stopToken).responses.create({ model: 'svc01', input: 'Write a long novel.', background: true });
    await stopping.close();
    const reader = databaseUrl ? other : await startTestServer({ env: own });
    try {
      const ended = await sdk(reader.url, stopToken).responses.retrieve(created.id);
      expect(ended).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
      expect(ended.error!.message).toContain('svc stopped (SIGTERM or SIGINT) before this background response finished');
    } finally {
      if (reader !== other) await reader.close();
    }
  });
});

describe('background responses and SVC_MAX_IN_FLIGHT', () => {
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_MAX_IN_FLIGHT: '1' } });
    ({ token } = await server.createKey());
  });
  afterAll(() => server?.close());

  it("a running one holds its slot: the next request gets 429 too_many_requests_in_flight in OpenAI's shape, until it ends", async () => {
    const model = gate();
    upstream.nextBehavior({ answer: 'Done.', holdUntil: model.opened });
    const created = await sdk(server.url, token).responses.create({ model: 'svc01', input: 'Long task', background: true });
    for (const background of [true, false]) {
      const refused = await sdk(server.url, token)
        .responses.create({ model: 'svc01', input: 'Another', background })
        .catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
      expect(refused).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'too_many_requests_in_flight' });
    }
    model.open();
    expect(await finished(sdk(server.url, token), created.id)).toMatchObject({ status: 'completed' });
    upstream.nextBehavior({ answer: 'Next.' });
    expect((await sdk(server.url, token).responses.create({ model: 'svc01', input: 'Another', background: true })).status).toBe('in_progress');
  });
});

describe('a server process that dies with background responses running', () => {
  const started: ServerProcess[] = [];
  afterAll(async () => {
    await Promise.all(started.map((s) => s.stop('SIGKILL')));
  });

  async function runOneAndDie(env: NodeJS.ProcessEnv, prompt: string): Promise<{ id: string; token: string; requestId: string }> {
    const token = await keyFor(env);
    const doomed = await startServerProcess(env);
    started.push(doomed);
    upstream.nextBehavior({ hang: true });
    const { data: created, response } = await sdk(doomed.url, token).responses.create({ model: 'svc01', input: prompt, background: true }).withResponse();
    expect(created.status).toBe('in_progress');
    await doomed.stop('SIGKILL');
    return { id: created.id, token, requestId: response.headers.get('x-request-id')! };
  }

  it('embedded SQLite: the next start ends it failed, and sends its audit', async () => {
    const env = serverEnv({
      SVC_DATABASE_URL: `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-bg-')), 'svc.db')}`,
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    });
    await adminCommandAsync(['migrate'], env);
    const prompt = 'Write a long novel (SQLite, restarted).';
    const { id, token, requestId } = await runOneAndDie(env, prompt);
    const next = await startServerProcess(env);
    started.push(next);
    const ended = await finished(sdk(next.url, token), id);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
    expect(ended.error!.message).toContain('the server was restarted');
    await orphanAudit(id, requestId, prompt);
  }, 120_000);

  it.skipIf(!pgDb)('Postgres: another instance ends it failed once its lease lapses, and sends its audit', async () => {
    const env = serverEnv({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: SECRET_KEY, SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' });
    const survivor = await startServerProcess(env);
    started.push(survivor);
    const prompt = 'Write a long novel (Postgres, lease lapsed).';
    const { id, token, requestId } = await runOneAndDie(env, prompt);
    expect(await sdk(survivor.url, token).responses.retrieve(id)).toMatchObject({ status: 'in_progress' });
    // The lease (20 s) lapses, and the survivor's next look (every 5 s) ends it.
    const ended = await finished(sdk(survivor.url, token), id, 60_000);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
    expect(ended.error!.message).toContain('stopped answering for it');
    await orphanAudit(id, requestId, prompt);
  }, 120_000);
});

describe('background responses over the processes of one server (SVC_PROCESSES=2, SQLite)', () => {
  let server: ServerProcess;
  let token: string;

  beforeAll(async () => {
    const env = serverEnv({
      SVC_DATABASE_URL: `sqlite:${join(mkdtempSync(join(tmpdir(), 'svc-bg-')), 'svc.db')}`,
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_LOG_LEVEL: 'info',
      SVC_RATE_LIMIT_RPM: '100000',
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    });
    server = await startServerProcess(env, ['--processes', '2']);
    token = await keyFor(env);
  }, 90_000);
  afterAll(() => server?.stop('SIGKILL'));

  /** The process that answered a request, by its `x-request-id` (request log lines carry the pid with several processes). */
  const pidOf = (requestId: string) =>
    eventually(() => {
      for (const line of server.stderr().split('\n')) {
        if (!line.startsWith('{')) continue;
        const entry = JSON.parse(line) as { msg?: string; request_id?: string; pid?: number };
        if (entry.msg === 'request' && entry.request_id === requestId) return entry.pid;
      }
      return undefined;
    });

  /** A request on a connection of its own: the primary hands each new connection to the next process. */
  async function call(method: string, path: string, body?: object, signal?: AbortSignal): Promise<{ status: number; requestId: string; json: OpenAI.Responses.Response }> {
    const res = await fetch(`${server.url}${path}`, {
      method,
      signal,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', connection: 'close' },
      ...(body && { body: JSON.stringify(body) }),
      // A fresh dispatcher per call: no connection is reused.
      dispatcher: new Agent({ pipelining: 0 }),
    } as RequestInit);
    return { status: res.status, requestId: res.headers.get('x-request-id') ?? '', json: (await res.json()) as OpenAI.Responses.Response };
  }

  it('polls and cancels from either process; a process killed leaves its responses failed at once, not in_progress', async () => {
    upstream.setBehavior({ hang: true });
    try {
      const created = await Promise.all(Array.from({ length: 4 }, () => call('POST', '/v1/responses', { model: 'svc01', input: 'Write a long novel.', background: true })));
      expect(created.map((c) => c.json.status)).toEqual(Array(4).fill('in_progress'));
      const runners = await Promise.all(created.map((c) => pidOf(c.requestId)));
      expect(new Set(runners).size).toBe(2);
      // Each cancelled through both processes in turn: half of them through the one that does not run it.
      const cancelledBy: number[] = [];
      for (const { json } of created) {
        const cancel = await call('POST', `/v1/responses/${json.id}/cancel`);
        expect(cancel.json).toMatchObject({ id: json.id, status: 'cancelled' });
        cancelledBy.push((await pidOf(cancel.requestId))!);
        expect((await call('GET', `/v1/responses/${json.id}`)).json.status).toBe('cancelled');
      }
      expect(cancelledBy.some((pid, i) => pid !== runners[i])).toBe(true);

      const doomedPrompt = 'Write a long novel (its process killed).';
      const doomed = await call('POST', '/v1/responses', { model: 'svc01', input: doomedPrompt, background: true });
      process.kill((await pidOf(doomed.requestId))!, 'SIGKILL');
      // A connection the primary hands to the killed process before it learns of the death is never answered (Node's
      // cluster loses it): each read is given up after a while and made again.
      const ended = await eventually(async () => {
        const read = await call('GET', `/v1/responses/${doomed.json.id}`, undefined, AbortSignal.timeout(5_000)).catch((err: unknown) => {
          if ((err as Error).name !== 'TimeoutError') throw err;
          return undefined;
        });
        return read === undefined || read.json.status === 'in_progress' ? undefined : read.json;
      }, 30_000);
      expect(ended).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
      expect(ended.error!.message).toContain('process running this background response died');
      await orphanAudit(doomed.json.id, doomed.requestId, doomedPrompt);
    } finally {
      upstream.setBehavior({});
    }
  }, 120_000);
});
