// How a background response's end is audited and shown: a cancel and a server's stop are not a client that went away;
// one upstream call is one audit even when its record fails after its commit; a streamed one whose store fails at
// the end ends with response.failed rather than a second answer.
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { countedUsage, type TestServer } from './support/test-server.js';
import { serverPerTest } from './support/server-per-test.js';
import { eventually } from './support/webhooks.js';

const servers = serverPerTest();

const sdk = (url: string, token: string) => new OpenAI({ apiKey: token, baseURL: `${url}/v1`, maxRetries: 0 });
const client = (srv: TestServer, token: string) => sdk(srv.url, token);
/** A background lease the tests wait out (the server looks for lapsed ones every second). */
const LEASE_MS = 2_000;
/** The audit status of a request whose response could not be stored: the database did not answer (svc's storage_unavailable). */
const STORE_FAILED = 503;

// Nothing listens there: the deliveries are read from the outbox, not received.
const start = (server: { backgroundLeaseMs?: number } = {}) => servers.start({ webhookUrl: 'http://127.0.0.1:9/hook' }, server);

/** The `status_code` of each delivery recorded for the response `id`. */
async function auditStatuses(server: TestServer, keyId: string, id: string): Promise<number[]> {
  const { rows } = await server.running.store.deliveries.list(keyId, { limit: 100 });
  const payloads = await Promise.all(rows.map(async (r) => JSON.parse((await server.running.store.deliveries.byId(r.id))!.payload) as { response_id?: string; status_code: number }));
  return payloads.filter((p) => p.response_id === id).map((p) => p.status_code);
}

describe('background responses: how their end is audited', () => {
  it('a cancelled one is audited 409, not as a client that went away (499), streamed or not', async () => {
    const { srv, token, keyId } = await start();
    const client = sdk(srv.url, token);
    servers.upstream.nextBehavior({ hang: true });
    const created = await client.responses.create({ model: 'svc01', input: 'Write a long novel.', background: true });
    expect(await client.responses.cancel(created.id)).toMatchObject({ status: 'cancelled' });
    expect(await eventually(async () => ((await auditStatuses(srv, keyId, created.id)).length > 0 ? auditStatuses(srv, keyId, created.id) : undefined))).toEqual([409]);

    servers.upstream.nextBehavior({ answer: 'Once upon a time '.repeat(20), hangMidStream: true });
    const stream = await client.responses.create({ model: 'svc01', input: 'Write another.', background: true, stream: true });
    let id: string | undefined;
    for await (const event of stream) {
      if (event.type === 'response.created') id = event.response.id;
      if (event.type === 'response.output_text.delta') break;
    }
    expect(await client.responses.cancel(id!)).toMatchObject({ status: 'cancelled' });
    expect(await eventually(async () => ((await auditStatuses(srv, keyId, id!)).length > 0 ? auditStatuses(srv, keyId, id!) : undefined))).toEqual([409]);
  });

  it.each([false, true])('one whose upstream call failed is audited with that failure, also when a cancel comes just after its end is stored (stream: %s)', async (stream) => {
    const { srv, token, keyId } = await start();
    const responses = srv.running.store.responses;
    const settle = responses.settle.bind(responses);
    responses.settle = async (...args: Parameters<typeof settle>) => {
      const stored = await settle(...args);
      // As the owner's look does when it finds the row no longer running (a cancel asked meanwhile, or its end stored).
      void srv.running.background.cancel(args[1].id);
      return stored;
    };
    const client = sdk(srv.url, token);
    let id: string;
    if (stream) {
      // Cut after its first events: the relay ends the stream with response.failed and audits the failure.
      servers.upstream.nextBehavior({ answer: 'Once upon a time '.repeat(20), resetMidStream: true });
      const events = await client.responses.create({ model: 'svc01', input: 'Hi', background: true, stream: true });
      const types: string[] = [];
      for await (const event of events) {
        types.push(event.type);
        if (event.type === 'response.created') id = event.response.id;
      }
      expect(types.at(-1)).toBe('response.failed');
    } else {
      servers.upstream.nextBehavior({ status: 400, errorMessage: 'Invalid prompt.' });
      ({ id } = await client.responses.create({ model: 'svc01', input: 'Hi', background: true }));
    }
    const statuses = await eventually(async () => ((await auditStatuses(srv, keyId, id)).length > 0 ? auditStatuses(srv, keyId, id) : undefined));
    expect(await client.responses.retrieve(id!)).toMatchObject({ status: 'failed' });
    expect(statuses).toEqual([stream ? 502 : 400]);
  });

  it('one stopped by the server stopping is audited 503, as the server going away', async () => {
    const { srv: server, token, keyId } = await start();
    servers.upstream.nextBehavior({ hang: true });
    const created = await sdk(server.url, token).responses.create({ model: 'svc01', input: 'Write a long novel.', background: true });
    const { running } = server;
    await running.background.stop(0);
    expect(await auditStatuses(server, keyId, created.id)).toEqual([503]);
  });

  it('a completed one whose audit record fails after its commit is audited once, and reads completed', async () => {
    const { srv, token, keyId } = await start();
    const deliveries = srv.running.store.deliveries;
    const insert = deliveries.insertSequenced.bind(deliveries);
    let failed = 0;
    deliveries.insertSequenced = async (...args: Parameters<typeof insert>) => {
      const rows = await insert(...args);
      if (failed++ === 0) throw new Error('the acknowledgement of the commit was lost');
      return rows;
    };
    servers.upstream.nextBehavior({ answer: 'The library opens at 9 am.' });
    const client = sdk(srv.url, token);
    const created = await client.responses.create({ model: 'svc01', input: 'When does it open?', background: true });
    const done = await eventually(async () => {
      const r = await client.responses.retrieve(created.id);
      return r.status === 'in_progress' ? undefined : r;
    });
    // Its run ended: whatever it was to record is recorded.
    await eventually(() => srv.running.background.size === 0 || undefined);
    await delay(50);
    expect(done).toMatchObject({ status: 'completed', output_text: 'The library opens at 9 am.' });
    expect(await auditStatuses(srv, keyId, created.id)).toEqual([200]);
    // The Usage view counts it once, as the request it was, not a second time as a failure.
    const { user_id: userId } = (await srv.running.store.keys.byId(keyId))!;
    const day = new Date().toISOString().slice(0, 10);
    const [usage] = await eventually(async () => {
      const rows = await srv.running.store.usage.byDay(userId, day, keyId);
      return rows.length > 0 ? rows : undefined;
    });
    expect(usage).toMatchObject({ requests: 1, errors_5xx: 0 });
  });

  it('one whose runner was slower than its lease, ended by the look for lapsed runs, deleted, then answered: counted once', async () => {
    const { srv, token, keyId } = await start({ backgroundLeaseMs: LEASE_MS });
    // The runner is slower than its lease: its renewals do not come, nor its looks for a run no longer its own.
    const responses = srv.running.store.responses;
    responses.renewLeases = async () => {};
    responses.cancelsAsked = async () => [];
    let answer!: () => void;
    servers.upstream.nextBehavior({ answer: 'The library opens at 9 am.', holdUntil: new Promise<void>((resolve) => (answer = resolve)) });
    const client = sdk(srv.url, token);
    const created = await client.responses.create({ model: 'svc01', input: 'When does it open? (slower than its lease)', background: true });
    // Its lease lapses: the server's look for lapsed runs ends it failed, audits it (500) and counts it.
    const ended = await eventually(async () => {
      const r = await client.responses.retrieve(created.id);
      return r.status === 'in_progress' ? undefined : r;
    }, 30_000);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
    await client.responses.delete(created.id);
    // The runner gets its answer after all, for a run ended by another and a row deleted since.
    answer();
    await eventually(() => srv.running.background.size === 0 || undefined, 30_000);
    expect(await auditStatuses(srv, keyId, created.id)).toEqual([500]);
    expect(await countedUsage([srv], keyId)).toMatchObject({ requests: 1, errors_5xx: 1 });
  });

  it('a streamed one whose store fails at its end ends with response.failed (no 500 after the events), audited once', async () => {
    const { srv, token, keyId } = await start();
    const responses = srv.running.store.responses;
    const settle = responses.settle.bind(responses);
    let failed = 0;
    responses.settle = async (...args: Parameters<typeof settle>) => {
      if (failed++ === 0) throw new Error('Connection terminated unexpectedly');
      return settle(...args);
    };
    servers.upstream.nextBehavior({ answer: 'The library opens at 9 am.' });
    const res = await fetch(`${srv.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', input: 'When does it open?', background: true, stream: true }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(failed).toBeGreaterThanOrEqual(1);
    const types = [...text.matchAll(/^event: (.+)$/gm)].map((m) => m[1]);
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.failed');
    expect(text).not.toContain('internal_error');
    const id = /"id":"(resp_[0-9a-f]+)"/.exec(text)![1]!;
    await eventually(() => srv.running.background.size === 0 || undefined);
    // Audited as it ended (its end and its audit are written together), not 200 as the answer that was not stored:
    // a runner killed where this store failed would have left it so.
    expect(await client(srv, token).responses.retrieve(id)).toMatchObject({ status: 'failed' });
    expect(await auditStatuses(srv, keyId, id)).toEqual([STORE_FAILED]);
    expect(srv.logs.filter((l) => /failed unexpectedly|ERR_HTTP_HEADERS_SENT|Cannot set headers/.test(l))).toEqual([]);
  });

  it('a streamed one the upstream refused, whose client had left before the answer, is audited 499 (the client got nothing), stored failed', async () => {
    const { srv, token, keyId } = await start();
    let answer!: () => void;
    servers.upstream.nextBehavior({ status: 400, errorMessage: 'Invalid prompt.', holdUntil: new Promise<void>((resolve) => (answer = resolve)) });
    const asked = servers.upstream.requests.length;
    const gone = new AbortController();
    const posted = fetch(`${srv.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', input: 'Hi', background: true, stream: true }),
      signal: gone.signal,
    }).catch(() => undefined);
    await eventually(() => servers.upstream.requests.length > asked || undefined);
    gone.abort();
    await posted;
    // svc saw the client leave (the request's log line, written when its response closed).
    await eventually(() => srv.logs.some((l) => l.includes('"path":"/v1/responses","status":499')) || undefined);
    answer();
    const audit = await eventually(async () => {
      const { rows } = await srv.running.store.deliveries.list(keyId, { limit: 10 });
      return rows.length > 0 ? (JSON.parse((await srv.running.store.deliveries.byId(rows[0]!.id))!.payload) as { response_id: string; status_code: number }) : undefined;
    });
    await eventually(() => srv.running.background.size === 0 || undefined);
    expect(audit.status_code).toBe(499);
    expect(await client(srv, token).responses.retrieve(audit.response_id)).toMatchObject({ status: 'failed', error: { message: 'Invalid prompt.' } });
  });
});
