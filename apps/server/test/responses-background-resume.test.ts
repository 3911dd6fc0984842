import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { eventually, startReceiver, type ReceivedDelivery, type Receiver } from './support/webhooks.js';
import { createTestPostgres } from './support/databases.js';
import { serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';

/**
 * Resuming a background stream as OpenAI's background guide has clients do it through the openai SDK: create with
 * `background` and `stream`, keep the last `sequence_number`, and after the connection dropped,
 * `responses.retrieve(id, { stream: true, starting_after })` for the rest: the events not yet received, then the live
 * ones, to the stream's last event. On SQLite, and on Postgres from a second server process.
 */

const pgDb = await createTestPostgres('responses-resume');
const SECRET_KEY = randomBytes(32).toString('base64');
/** 40 words: a delta each, paced by the fake upstream. */
const ANSWER = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

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

function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

const sdk = (url: string, token: string) => new OpenAI({ apiKey: token, baseURL: `${url}/v1`, maxRetries: 0 });
type StreamEvent = OpenAI.Responses.ResponseStreamEvent;

async function collect(stream: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const events: StreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const textOf = (events: StreamEvent[]) => events.map((e) => (e.type === 'response.output_text.delta' ? e.delta : '')).join('');
const deltas = (events: StreamEvent[]) => events.filter((e) => e.type === 'response.output_text.delta').length;

const auditsOf = (received: ReceivedDelivery[], id: string) =>
  received.map((d) => JSON.parse(d.raw.toString('utf8')) as { response_id?: string; status_code: number; streaming: boolean }).filter((p) => p.response_id === id);

/**
 * Starts a background stream whose model stalls after its fifth word until `model.open()`, reads it until the third
 * word and drops the connection: the events received and the response's id.
 */
async function dropMidStream(client: OpenAI, model: { opened: Promise<void> }): Promise<{ id: string; received: StreamEvent[] }> {
  // The role frame and five words, then nothing until the gate opens; the rest a frame every few ms.
  upstream.nextBehavior({ answer: ANSWER, trickle: { intervalMs: 5 }, pauseMidStream: { afterFrames: 6, until: model.opened } });
  const stream = await client.responses.create({ model: 'svc01', input: 'Count the words.', background: true, stream: true });
  const received: StreamEvent[] = [];
  for await (const event of stream) {
    received.push(event);
    if (deltas(received) === 3) break; // The SDK closes the connection.
  }
  const created = received[0]!;
  if (created.type !== 'response.created') throw new Error(`first event: ${created.type}`);
  return { id: created.response.id, received };
}

const variants = [
  ['SQLite, the same server', undefined],
  ['Postgres, resumed on a second server process', pgDb?.url],
] as const;

describe.each(variants)('resuming a background stream (%s)', (name, databaseUrl) => {
  const enabled = name.startsWith('SQLite') || databaseUrl !== undefined;
  let runner: TestServer;
  let readerProcess: ServerProcess | undefined;
  /** Where the client resumes: the runner itself, or another server process on the same Postgres. */
  let readerUrl: string;
  let token: string;
  /** Ids of the refused responses found so far. */
  const seen = new Set<string>();

  beforeAll(async () => {
    if (!enabled) return;
    const env = {
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      ...(databaseUrl && { SVC_DATABASE_URL: databaseUrl, SVC_SECRET_KEY: SECRET_KEY }),
    };
    runner = await startTestServer({ env });
    ({ token } = await runner.createKey({ webhookUrl: receiver.url }));
    if (databaseUrl) {
      readerProcess = await startServerProcess(serverEnv(env));
      readerUrl = readerProcess.url;
    } else {
      readerUrl = runner.url;
    }
  }, 120_000);
  afterAll(async () => {
    await readerProcess?.stop('SIGKILL');
    await runner?.close();
  });

  it.skipIf(!enabled)('a client that dropped mid-stream gets exactly the events after starting_after, replayed then live, to response.completed; one audit', async () => {
    const model = gate();
    const { id, received } = await dropMidStream(sdk(runner.url, token), model);
    const cursor = received.at(-1)!.sequence_number;

    const resumed: StreamEvent[] = [];
    for await (const event of await sdk(readerUrl, token).responses.retrieve(id, { stream: true, starting_after: cursor })) {
      resumed.push(event);
      // The fifth word was the last before the model stalled: what follows can only come live.
      if (deltas([...received, ...resumed]) === 5) model.open();
    }

    const all = [...received, ...resumed];
    expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
    expect(resumed[0]!.sequence_number).toBe(cursor + 1);
    expect(textOf(all)).toBe(ANSWER);
    const last = resumed.at(-1)!;
    expect(last.type).toBe('response.completed');
    if (last.type !== 'response.completed') return;
    expect(last.response).toMatchObject({ id, status: 'completed', background: true });
    expect(last.response.output[0]).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: ANSWER }] });

    // After the end: the whole stream again, the same events, then the end; after its last event, nothing more.
    expect(await collect(await sdk(readerUrl, token).responses.retrieve(id, { stream: true }))).toEqual(all);
    expect(await collect(await sdk(readerUrl, token).responses.retrieve(id, { stream: true, starting_after: cursor }))).toEqual(resumed);
    expect(await collect(await sdk(readerUrl, token).responses.retrieve(id, { stream: true, starting_after: last.sequence_number }))).toEqual([]);
    expect(await sdk(readerUrl, token).responses.retrieve(id)).toMatchObject({ status: 'completed', output_text: ANSWER });

    // Kept a batch at a time: far fewer writes than events.
    const rows = await runner.running.store.handle.db.selectFrom('response_events').select('seq').where('response_id', '=', id).execute();
    expect(rows.length).toBeLessThan(all.length / 4);

    // Read again three times, audited once: the request's, as before.
    const audits = await receiver.waitFor((r) => auditsOf(r, id).length > 0).then((r) => auditsOf(r, id));
    expect(audits).toEqual([expect.objectContaining({ status_code: 200, streaming: true })]);
  });

  it.skipIf(!databaseUrl)("a reader's server stopping gracefully ends its stream at once; the client resumes on another instance where it left off", async () => {
    // A stop that waited for its open requests (up to SVC_SHUTDOWN_TIMEOUT_MS) would hold this reader past the test's timeout.
    const env = { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_DATABASE_URL: databaseUrl!, SVC_SECRET_KEY: SECRET_KEY, SVC_SHUTDOWN_TIMEOUT_MS: '600000' };
    const stopping = await startServerProcess(serverEnv(env));
    try {
      const model = gate();
      const { id, received } = await dropMidStream(sdk(runner.url, token), model);
      const first: StreamEvent[] = [];
      const reading = (async () => {
        for await (const event of await sdk(stopping.url, token).responses.retrieve(id, { stream: true, starting_after: received.at(-1)!.sequence_number })) {
          first.push(event);
          // Caught up with the stalled model: the reader's server stops.
          if (deltas([...received, ...first]) === 5) void stopping.stop('SIGTERM');
        }
      })();
      await reading;
      expect(first.at(-1)!.type).toBe('response.output_text.delta');
      model.open();
      const held = [...received, ...first];
      const rest = await collect(await sdk(runner.url, token).responses.retrieve(id, { stream: true, starting_after: held.at(-1)!.sequence_number }));
      const all = [...held, ...rest];
      expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
      expect(textOf(all)).toBe(ANSWER);
      expect(rest.at(-1)!.type).toBe('response.completed');
    } finally {
      await stopping.stop('SIGKILL');
    }
  });

  it.skipIf(!enabled)('one that ended without its last event kept (the upstream refused it) is streamed as response.failed, the stored response', async () => {
    upstream.nextBehavior({ status: 500, errorMessage: 'The model is overloaded.' });
    const client = sdk(runner.url, token);
    const refused = await client.responses.create({ model: 'svc01', input: 'Hi', background: true, stream: true }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    // The POST's answer is the upstream's error: the response it stored is found in the database, ended failed.
    const id = await eventually(async () => {
      const rows = await runner.running.store.handle.db
        .selectFrom('responses')
        .select(['id', 'response'])
        .where('stream_events', '=', 'kept')
        .where('background_lease_until', 'is', null)
        .execute();
      return rows.find((r) => !seen.has(r.id) && (JSON.parse(r.response) as { status: string }).status === 'failed')?.id;
    });
    seen.add(id);
    const stored = await sdk(readerUrl, token).responses.retrieve(id);
    expect(stored.status).toBe('failed');
    const { output_text: _, ...asStored } = stored;
    expect(await collect(await sdk(readerUrl, token).responses.retrieve(id, { stream: true }))).toEqual([{ type: 'response.failed', sequence_number: 0, response: asStored }]);
  });

  it.skipIf(!enabled)("another key's background stream is not found, running or ended (404)", async () => {
    const { token: otherToken } = await runner.createKey();
    const model = gate();
    const { id } = await dropMidStream(sdk(runner.url, token), model);
    const refused = await sdk(readerUrl, otherToken)
      .responses.retrieve(id, { stream: true, starting_after: 0 })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.NotFoundError);
    expect(refused).toMatchObject({ status: 404, error: { code: 'not_found', param: 'response_id' } });
    model.open();
    await collect(await sdk(readerUrl, token).responses.retrieve(id, { stream: true }));
    expect(await sdk(readerUrl, otherToken).responses.retrieve(id, { stream: true }).catch((err: unknown) => err)).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it.skipIf(!enabled)('deleted, its kept events go with it: its stream is not found', async () => {
    const model = gate();
    model.open();
    const { id } = await dropMidStream(sdk(runner.url, token), model);
    await collect(await sdk(readerUrl, token).responses.retrieve(id, { stream: true }));
    const kept = () => runner.running.store.handle.db.selectFrom('response_events').select('seq').where('response_id', '=', id).execute();
    expect((await kept()).length).toBeGreaterThan(0);
    await sdk(readerUrl, token).responses.delete(id);
    expect(await kept()).toEqual([]);
    expect(await sdk(readerUrl, token).responses.retrieve(id, { stream: true }).catch((err: unknown) => err)).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('what cannot be streamed again', () => {
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
    ({ token } = await server.createKey());
  });
  afterAll(() => server?.close());

  it("a response not created with background and stream is a 400 naming 'stream'", async () => {
    const client = sdk(server.url, token);
    const plain = await client.responses.create({ model: 'svc01', input: 'Hi' });
    const streamedInForeground = await collect(await client.responses.create({ model: 'svc01', input: 'Hi', stream: true }));
    const backgroundNotStreamed = await client.responses.create({ model: 'svc01', input: 'Hi', background: true });
    const foregroundId = streamedInForeground[0]!.type === 'response.created' ? streamedInForeground[0]!.response.id : '';
    for (const id of [plain.id, foregroundId, backgroundNotStreamed.id]) {
      const refused = await client.responses.retrieve(id, { stream: true }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'stream' });
      expect((refused as Error).message).toContain('was not created with background=true and stream=true');
    }
  });

  it("an invalid starting_after is a 400 in OpenAI's shape naming it", async () => {
    const created = await sdk(server.url, token).responses.create({ model: 'svc01', input: 'Hi', background: true });
    for (const value of ['abc', '-1', '1.5', '', '99999999999999999999']) {
      const res = await fetch(`${server.url}/v1/responses/${created.id}?stream=true&starting_after=${value}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        error: { message: expect.stringContaining("Invalid value for 'starting_after'"), type: 'invalid_request_error', code: 'invalid_value', param: 'starting_after' },
      });
    }
    const res = await fetch(`${server.url}/v1/responses/${created.id}?stream=yes`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'invalid_value', param: 'stream' } });
  });
});

describe('the limit on kept events (SVC_RESPONSE_STREAM_MAX_BYTES)', () => {
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RESPONSE_STREAM_MAX_BYTES: '6KiB', SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
    ({ token } = await server.createKey({ webhookUrl: receiver.url }));
  });
  afterAll(() => server?.close());

  it('past it the events are given up: a reader following is told so in the stream, a later one gets a 400; the response runs on, audited once', async () => {
    const client = sdk(server.url, token);
    const model = gate();
    const { id, received } = await dropMidStream(client, model);
    const following = await client.responses.retrieve(id, { stream: true, starting_after: received.at(-1)!.sequence_number });
    const read: StreamEvent[] = [];
    const failure = (async () => {
      for await (const event of following) {
        read.push(event);
        if (deltas([...received, ...read]) === 5) model.open();
      }
    })().catch((err: unknown) => err);
    const told = await failure;
    expect(told).toBeInstanceOf(OpenAI.APIError);
    expect((told as Error).message).toContain('SVC_RESPONSE_STREAM_MAX_BYTES');
    // What it was sent before was the stream's, in order.
    expect(read.map((e) => e.sequence_number)).toEqual(read.map((_, i) => received.length + i));

    const refused = await client.responses.retrieve(id, { stream: true, starting_after: 0 }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'stream' });
    expect((refused as Error).message).toContain('can no longer be resumed');

    const done = await eventually(async () => {
      const response = await client.responses.retrieve(id);
      return response.status === 'completed' ? response : undefined;
    }, 30_000);
    expect(done.output_text).toBe(ANSWER);
    expect(await server.running.store.handle.db.selectFrom('response_events').select('seq').where('response_id', '=', id).execute()).toEqual([]);
    const audits = await receiver.waitFor((r) => auditsOf(r, id).length > 0).then((r) => auditsOf(r, id));
    expect(audits).toEqual([expect.objectContaining({ status_code: 200 })]);
  });
});

describe('an end that could not be stored', () => {
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
    ({ token } = await server.createKey());
    // The database refuses this test's completed response (as a full disk would), not its failed one.
    await sql`create trigger refuse_completed before update of response on responses
      when new.response like '{"id":"%","object":"response","created_at":%,"status":"completed"%' and new.response like '%refuse-completed%'
      begin select raise(abort, 'database or disk is full'); end`.execute(server.running.store.handle.db);
  });
  afterAll(() => server?.close());

  it('is streamed again as it ended, response.failed as its POST got it, not as the completed answer it was about to be', async () => {
    const client = sdk(server.url, token);
    upstream.nextBehavior({ answer: 'Almost there.' });
    const streamed = await collect(await client.responses.create({ model: 'svc01', input: 'Hi', instructions: 'refuse-completed', background: true, stream: true }));
    const created = streamed[0]!;
    if (created.type !== 'response.created') throw new Error(`first event: ${created.type}`);
    const id = created.response.id;
    expect(streamed.at(-1)!.type).toBe('response.failed');
    const replayed = await collect(await client.responses.retrieve(id, { stream: true }));
    expect(replayed.at(-1)!.type).toBe('response.failed');
    expect(replayed.map((e) => e.type)).not.toContain('response.completed');
  });
});

describe.each(variants)('an end the database refuses (%s)', (name, databaseUrl) => {
  const enabled = name.startsWith('SQLite') || databaseUrl !== undefined;
  let server: TestServer;
  let token: string;
  beforeAll(async () => {
    if (!enabled) return;
    const env = {
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      ...(databaseUrl && { SVC_DATABASE_URL: databaseUrl, SVC_SECRET_KEY: SECRET_KEY }),
    };
    server = await startTestServer({ env });
    ({ token } = await server.createKey({ webhookUrl: receiver.url }));
    // The database refuses this test's completed response (as a full disk would), not its failed one.
    const db = server.running.store.handle.db;
    // Its status read as JSON: the failed response's output (the answer so far) holds items `"status":"completed"` too.
    if (databaseUrl) {
      await sql`create or replace function refuse_end() returns trigger language plpgsql as $$
        begin
          if new.response like '%refuse-end%' and new.response::jsonb->>'status' = 'completed' then
            raise exception 'could not extend file: No space left on device';
          end if;
          return new;
        end $$`.execute(db);
      await sql`create trigger refuse_end before update of response on responses for each row execute function refuse_end()`.execute(db);
    } else {
      await sql`create trigger refuse_end before update of response on responses
        when new.response like '%refuse-end%' and json_extract(new.response, '$.status') = 'completed'
        begin select raise(abort, 'database or disk is full'); end`.execute(db);
    }
  }, 120_000);
  afterAll(() => server?.close());

  it.skipIf(!enabled)('reads back failed with its error as soon as its POST ended, not in_progress until its lease lapses; audited once', async () => {
    const client = sdk(server.url, token);
    upstream.nextBehavior({ answer: 'Almost there.' });
    const streamed = await collect(await client.responses.create({ model: 'svc01', input: 'Hi', instructions: 'refuse-end', background: true, stream: true }));
    const created = streamed[0]!;
    if (created.type !== 'response.created') throw new Error(`first event: ${created.type}`);
    const last = streamed.at(-1)!;
    if (last.type !== 'response.failed') throw new Error(`last event: ${last.type}`);
    const read = await client.responses.retrieve(created.response.id);
    expect(read.status).toBe('failed');
    expect(read.error).toEqual(last.response.error);
    const audits = await receiver.waitFor((r) => auditsOf(r, read.id).length > 0).then((r) => auditsOf(r, read.id));
    expect(audits).toEqual([expect.objectContaining({ status_code: 500 })]);
  });
});
