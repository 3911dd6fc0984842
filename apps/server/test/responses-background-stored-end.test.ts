// A background response whose runner stored its end with the audit it was recording, and then died (or failed to
// record it): a cancel or a DELETE of it waited the whole 10 s for a runner that was gone, answered with the run still
// open, and left its audit to whoever found the run nobody's, up to 20 s later. Nothing is left to stop in such a run:
// the cancel or the DELETE records its audit and ends it, and the request is counted once in the Usage view, however
// many recorded its audit (its runner whose record failed after its commit, then whoever ended the run).
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import type { ResponseObject } from '@svc/protocol';
import { sql } from 'kysely';
import { openStore } from '../src/storage/store.js';
import { pendingResponse, responseUsage } from '../src/responses/translate.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { storeVariants } from './support/databases.js';
import { eventually } from './support/webhooks.js';

const variants = await storeVariants('responses-background-stored-end');
const SECRET_KEY = randomBytes(32).toString('base64');
const ANSWER = 'The library opens at 9 am.';
/**
 * Each case starts a server, signs its key's secret, closes the server and opens the store again: on a host at load
 * 35, past vitest's 30 s default.
 */
const TIMEOUT_MS = 120_000;

let upstream: FakeUpstream | undefined;
afterAll(async () => {
  await upstream?.close();
});

const sdk = (url: string, token: string) => new OpenAI({ apiKey: token, baseURL: `${url}/v1`, maxRetries: 0 });

/** The `status_code` of each delivery recorded for the response `id`. */
async function auditStatuses(server: TestServer, keyId: string, id: string): Promise<number[]> {
  const { rows } = await server.running.store.deliveries.list(keyId, { limit: 100 });
  const payloads = await Promise.all(rows.map(async (r) => JSON.parse((await server.running.store.deliveries.byId(r.id))!.payload) as { response_id?: string; status_code: number }));
  return payloads.filter((p) => p.response_id === id).map((p) => p.status_code);
}

/** What a runner killed after storing its end leaves: the end and the audit it was recording, its run still open under a lease of an hour. */
async function endStoredByAKilledRunner(server: TestServer, keyId: string): Promise<string> {
  const prompt = 'When does it open?';
  const base = { id: `resp_${randomBytes(24).toString('hex')}`, createdAt: Math.floor(Date.now() / 1000), request: { model: 'svc01', input: prompt, background: true } };
  const input = [{ type: 'message' as const, id: `msg_${randomBytes(8).toString('hex')}`, role: 'user' as const, content: [{ type: 'input_text' as const, text: prompt }] }];
  const run = { owner: 'a-process-killed', until: Date.now() + 3_600_000 };
  const audit = { requestId: `req_${randomBytes(8).toString('hex')}`, startedAt: Date.now() - 1_000, streaming: false };
  const { responses } = server.running.store;
  await responses.save(keyId, pendingResponse(base), input, 0, undefined, { ...run, audit });
  const completed: ResponseObject = {
    ...pendingResponse(base),
    status: 'completed',
    completed_at: base.createdAt,
    output: [{ type: 'message', id: 'msg_answer', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: ANSWER, annotations: [], logprobs: [] }] }],
    usage: responseUsage({ prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 }),
  };
  const outcome = { statusCode: 200, finishedAt: Date.now(), responseText: ANSWER, svc: null, usage: { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 } };
  await responses.settle(keyId, completed, run, undefined, { ...audit, outcome });
  return base.id;
}

/** The requests the Usage view counts for the key today, once the server is closed (its last counts written). */
async function usageAfterClose(server: TestServer, keyId: string): Promise<{ requests: number; total_tokens: number }> {
  const { user_id: userId } = (await server.running.store.keys.byId(keyId))!;
  await server.close();
  const store = await openStore(server.config.databaseUrl);
  try {
    const rows = await store.usage.byDay(userId, new Date().toISOString().slice(0, 10), keyId);
    return rows.reduce((sum, row) => ({ requests: sum.requests + row.requests, total_tokens: sum.total_tokens + row.input_tokens + row.output_tokens }), { requests: 0, total_tokens: 0 });
  } finally {
    await store.close();
  }
}

/** The killed runner's stored end delivered once, as it says (200), and counted once with its tokens (closes `server`). */
async function expectAuditedAndCountedOnce(server: TestServer, keyId: string, id: string): Promise<void> {
  expect(await auditStatuses(server, keyId, id)).toEqual([200]);
  expect(await usageAfterClose(server, keyId)).toEqual({ requests: 1, total_tokens: 16 });
}

/**
 * Runs `body` while the database refuses every new outbox row (a trigger raising an error: a real database error, as a
 * constraint or an operator's guard would give), and takes the refusal away after it, whether it passed or not.
 */
async function withOutboxRefused(server: TestServer, body: () => Promise<void>): Promise<void> {
  const { db, dialect } = server.running.store.handle;
  if (dialect === 'sqlite') {
    await sql`create trigger refuse_outbox before insert on webhook_deliveries begin select raise(abort, 'the outbox refuses new rows'); end`.execute(db);
  } else {
    await sql`create function refuse_outbox() returns trigger language plpgsql as $$ begin raise exception 'the outbox refuses new rows'; end $$`.execute(db);
    await sql`create trigger refuse_outbox before insert on webhook_deliveries for each row execute function refuse_outbox()`.execute(db);
  }
  try {
    await body();
  } finally {
    if (dialect === 'sqlite') {
      await sql`drop trigger refuse_outbox`.execute(db);
    } else {
      await sql`drop trigger refuse_outbox on webhook_deliveries`.execute(db);
      await sql`drop function refuse_outbox()`.execute(db);
    }
  }
}

describe.each(variants)('a background response whose end is stored, its audit still to record (%s)', (_name, databaseUrl) => {
  async function start(clock?: () => number): Promise<{ srv: TestServer; token: string; keyId: string }> {
    upstream ??= await startFakeUpstream();
    const srv = await startTestServer({ env: { SVC_DATABASE_URL: databaseUrl, SVC_SECRET_KEY: SECRET_KEY, SVC_UPSTREAM_BASE_URL: upstream.url }, clock });
    // Nothing listens there: the deliveries are read from the outbox, not received.
    const { token, key } = await srv.createKey({ webhookUrl: 'http://127.0.0.1:9/hook' });
    return { srv, token, keyId: key.id };
  }

  it('its runner gone: a cancel answers it as it ended, its audit recorded and its run ended, counted once', async () => {
    const { srv, token, keyId } = await start();
    try {
      const id = await endStoredByAKilledRunner(srv, keyId);
      expect(await sdk(srv.url, token).responses.cancel(id)).toMatchObject({ id, status: 'completed' });
      // Ended by the cancel, not left running for the runner's lease to lapse.
      expect(await srv.running.store.responses.runOf(keyId, id)).toBeUndefined();
      await expectAuditedAndCountedOnce(srv, keyId, id);
    } finally {
      await srv.close();
    }
  }, TIMEOUT_MS);

  it('its runner gone: a DELETE records its audit first, once, and counts it once', async () => {
    const { srv, token, keyId } = await start();
    try {
      const id = await endStoredByAKilledRunner(srv, keyId);
      expect(await sdk(srv.url, token).responses.delete(id)).toMatchObject({ id, deleted: true });
      await expectAuditedAndCountedOnce(srv, keyId, id);
    } finally {
      await srv.close();
    }
  }, TIMEOUT_MS);

  it('its runner gone and its audit refused by the database: a cancel answers it as it ended, and the audit is recorded later by the server (once)', async () => {
    const { srv, token, keyId } = await start();
    try {
      const id = await endStoredByAKilledRunner(srv, keyId);
      await withOutboxRefused(srv, async () => {
        // Nothing is left to stop: the cancel has done what it was asked; the audit is svc's to record, not the client's to retry.
        expect(await sdk(srv.url, token).responses.cancel(id)).toMatchObject({ id, status: 'completed' });
        expect(await auditStatuses(srv, keyId, id)).toEqual([]);
      });
      // Taken by the cancel, whose lease lapses: the server's look for lapsed runs records it.
      await eventually(async () => ((await srv.running.store.responses.runOf(keyId, id)) === undefined ? true : undefined), 90_000);
      await expectAuditedAndCountedOnce(srv, keyId, id);
    } finally {
      await srv.close();
    }
  }, 120_000);

  it('its runner gone and its audit refused by the database: a DELETE keeps it, answers a retryable 503 in the OpenAI error shape, and succeeds once the audit is recorded', async () => {
    const { srv, token, keyId } = await start();
    try {
      const id = await endStoredByAKilledRunner(srv, keyId);
      await withOutboxRefused(srv, async () => {
        const res = await fetch(`${srv.url}/v1/responses/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
        expect(res.status).toBe(503);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(await res.json()).toEqual({ error: { message: expect.stringContaining('audit'), type: 'server_error', code: 'database_unavailable', param: null } });
        // Kept: deleted now, its audit would be lost with it.
        expect((await sdk(srv.url, token).responses.retrieve(id)).status).toBe('completed');
      });
      // The client's retry (the SDKs retry a 503 by themselves) records the audit and deletes it.
      expect(await sdk(srv.url, token).responses.delete(id)).toMatchObject({ id, deleted: true });
      await expectAuditedAndCountedOnce(srv, keyId, id);
    } finally {
      await srv.close();
    }
  });

  it('its runner gone and its stored audit garbled (not JSON): the server that finds the run keeps the completed end and audits it with what it says, once', async () => {
    const { srv, token, keyId } = await start();
    try {
      const id = await endStoredByAKilledRunner(srv, keyId);
      const { db } = srv.running.store.handle;
      // Its audit cut midway, and its runner's lease lapsed: the server's next look for lapsed runs finds it.
      await db.updateTable('responses').set({ background_audit: '{"requestId":"req_', background_lease_until: Date.now() - 1_000 }).where('id', '=', id).execute();
      await eventually(async () => ((await srv.running.store.responses.runOf(keyId, id)) === undefined ? true : undefined), 60_000);
      const kept = await sdk(srv.url, token).responses.retrieve(id);
      expect(kept).toMatchObject({ id, status: 'completed', error: null });
      expect(kept.output_text).toBe(ANSWER);
      expect(await auditStatuses(srv, keyId, id)).toEqual([200]);
      const { rows } = await srv.running.store.deliveries.list(keyId, { limit: 100 });
      const payloads = await Promise.all(rows.map(async (r) => JSON.parse((await srv.running.store.deliveries.byId(r.id))!.payload) as { response_id?: string; response_text: string; total_tokens: number }));
      expect(payloads.find((p) => p.response_id === id)).toMatchObject({ response_text: ANSWER, total_tokens: 16 });
      expect(await usageAfterClose(srv, keyId)).toEqual({ requests: 1, total_tokens: 16 });
    } finally {
      await srv.close();
    }
  }, 90_000);

  it('its runner gone and its stored audit garbled (not JSON): a cancel answers it as it ended without waiting out its deadline, audited with what it says, once', async () => {
    // The server's clock stands still: a cancel that waited for its deadline (10 s on that clock) would never answer.
    const now = Date.now();
    const { srv, token, keyId } = await start(() => now);
    try {
      const id = await endStoredByAKilledRunner(srv, keyId);
      // Its audit cut midway; its runner's lease (an hour) is still to lapse: only the cancel ends the run.
      await srv.running.store.handle.db.updateTable('responses').set({ background_audit: '{"requestId":"req_' }).where('id', '=', id).execute();
      const cancelled = await sdk(srv.url, token).responses.cancel(id);
      expect(cancelled).toMatchObject({ id, status: 'completed', error: null, output: [{ type: 'message', content: [{ type: 'output_text', text: ANSWER }] }] });
      expect(await srv.running.store.responses.runOf(keyId, id)).toBeUndefined();
      await expectAuditedAndCountedOnce(srv, keyId, id);
    } finally {
      await srv.close();
    }
  }, TIMEOUT_MS);

  it("its runner's record failed after its commit, and again at once: the cancel that ends the run records nothing twice, and Usage counts it once", async () => {
    const { srv, token, keyId } = await start();
    try {
      const deliveries = srv.running.store.deliveries;
      const insert = deliveries.insertSequenced.bind(deliveries);
      let failed = 0;
      deliveries.insertSequenced = async (...args: Parameters<typeof insert>) => {
        const rows = await insert(...args);
        // The runner's record and the one it tries again at once.
        if (failed++ < 2) throw new Error('the acknowledgement of the commit was lost');
        return rows;
      };
      upstream!.nextBehavior({ answer: ANSWER });
      const client = sdk(srv.url, token);
      const created = await client.responses.create({ model: 'svc01', input: 'When does it open?', background: true });
      // The runner is done: its end stored, its audit's record failed (as far as it knows), its run left open.
      await eventually(() => srv.running.background.size === 0 || undefined);
      expect(failed).toBe(2);
      expect(await srv.running.store.responses.runOf(keyId, created.id)).toMatchObject({ audit: { outcome: { statusCode: 200 } } });
      expect(await client.responses.cancel(created.id)).toMatchObject({ status: 'completed' });
      expect(await srv.running.store.responses.runOf(keyId, created.id)).toBeUndefined();
      expect(await auditStatuses(srv, keyId, created.id)).toEqual([200]);
      expect(await usageAfterClose(srv, keyId)).toMatchObject({ requests: 1 });
    } finally {
      await srv.close();
    }
  }, TIMEOUT_MS);
});
