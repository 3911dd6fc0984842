// DELETE /v1/responses/{id} of a background response whose owner runs it elsewhere (another instance or process), its
// wait for the owner to stop the run ended while the runner was writing its final state (its claim: no owner, a lease;
// the answer in hand): the DELETE took the run over and ended it `cancelled`, audited 409 with no tokens, and the
// runner, finding its run no longer its own, dropped the answer. The DELETE now waits for that write: the response
// ends as the runner had it (completed, audited 200 with its tokens, counted once), and is deleted after.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import type { ResponseObject } from '@svc/protocol';
import { countedUsage, startTestServer, type TestServer } from './support/test-server.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { storeVariants } from './support/databases.js';

const variants = await storeVariants('responses-background-delete-mid-write');
const SECRET_KEY = randomBytes(32).toString('base64');
const ANSWER = 'The library opens at 9 am.';
/** A server's start and close on a loaded host, and the DELETE's reads between. */
const TIMEOUT_MS = 120_000;
/** Past the DELETE's wait for the owner to stop the run (CANCEL_WAIT_MS, routes.ts). */
const PAST_THE_WAIT_MS = 11_000;

let upstream: FakeUpstream | undefined;
afterAll(async () => {
  await upstream?.close();
});

/** The `status_code` and `response_text` of each delivery recorded for the response `id`. */
async function audits(server: TestServer, keyId: string, id: string): Promise<Array<{ status_code: number; response_text: string }>> {
  const { rows } = await server.running.store.deliveries.list(keyId, { limit: 100 });
  const payloads = await Promise.all(
    rows.map(async (r) => JSON.parse((await server.running.store.deliveries.byId(r.id))!.payload) as { response_id?: string; status_code: number; response_text: string }),
  );
  return payloads.filter((p) => p.response_id === id).map((p) => ({ status_code: p.status_code, response_text: p.response_text }));
}

describe.each(variants)('DELETE of a background response whose runner is writing its end (%s)', (_name, databaseUrl) => {
  it('waits for that write: the answer in hand wins (completed, audited 200 with its tokens, counted once), then the response is deleted', async () => {
    upstream ??= await startFakeUpstream();
    // The server's clock goes past the DELETE's wait once the DELETE waits (below); leases of an hour, so that no run
    // lapses meanwhile and nothing but the DELETE ends it.
    let ahead = 0;
    const srv = await startTestServer({
      env: { SVC_DATABASE_URL: databaseUrl, SVC_SECRET_KEY: SECRET_KEY, SVC_UPSTREAM_BASE_URL: upstream.url },
      clock: () => Date.now() + ahead,
      backgroundLeaseMs: 3_600_000,
    });
    try {
      // Nothing listens there: the deliveries are read from the outbox.
      const { token, key } = await srv.createKey({ webhookUrl: 'http://127.0.0.1:9/hook' });
      const responses = srv.running.store.responses;

      // The runner is held at its final write: its end's items indexed under its claim, the row not yet written.
      const store = responses as unknown as { indexOutputItems: (keyId: string, response: ResponseObject, ...rest: unknown[]) => Promise<void> };
      const index = store.indexOutputItems.bind(store);
      let atFinalWrite!: () => void;
      const heldAtFinalWrite = new Promise<void>((resolve) => (atFinalWrite = resolve));
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      store.indexOutputItems = async (keyId, response, ...rest) => {
        await index(keyId, response, ...rest);
        if (response.status === 'completed') {
          atFinalWrite();
          await released;
        }
      };
      // The DELETE finds the run not in its own process (as on another instance), so it asks its owner to stop it and
      // waits; once it reads the run after asking, its clock is past that wait.
      srv.running.background.has = () => false;
      let asked = false;
      const requestCancel = responses.requestCancel.bind(responses);
      responses.requestCancel = async (...args: Parameters<typeof requestCancel>) => {
        const result = await requestCancel(...args);
        asked = true;
        return result;
      };
      // Once the DELETE, past its wait, looked at the run to end it and then read it again, it waits for the write.
      let lookedToEnd = false;
      let waiting!: () => void;
      const deleteWaits = new Promise<void>((resolve) => (waiting = resolve));
      const orphans = responses.orphans.bind(responses);
      responses.orphans = async (...args: Parameters<typeof orphans>) => {
        if ('id' in args[0]) lookedToEnd = true;
        return orphans(...args);
      };
      const runOf = responses.runOf.bind(responses);
      responses.runOf = async (...args: Parameters<typeof runOf>) => {
        if (asked) ahead = PAST_THE_WAIT_MS;
        if (lookedToEnd) waiting();
        return runOf(...args);
      };

      upstream.nextBehavior({ answer: ANSWER });
      const sdk = new OpenAI({ apiKey: token, baseURL: `${srv.url}/v1`, maxRetries: 0 });
      const created = await sdk.responses.create({ model: 'svc01', input: 'When does it open?', background: true });
      await heldAtFinalWrite;
      expect(await runOf(key.id, created.id)).toMatchObject({ owner: null });

      const deleting = fetch(`${srv.url}/v1/responses/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
      // Released once the DELETE waits for the write, or once it answered without waiting (ended the run itself).
      await Promise.race([deleteWaits, deleting]);
      release();
      const res = await deleting;
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ id: created.id, object: 'response', deleted: true });

      await expect(sdk.responses.retrieve(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      expect(await runOf(key.id, created.id)).toBeUndefined();
      // Ended as its runner had it: its answer audited once (not `cancelled`, 409, without it), and counted once with its tokens.
      expect(await audits(srv, key.id, created.id)).toEqual([{ status_code: 200, response_text: ANSWER }]);
      const usage = await countedUsage([srv], key.id);
      expect(usage).toMatchObject({ requests: 1, errors_4xx: 0, errors_5xx: 0 });
      expect(Number(usage!.output_tokens)).toBeGreaterThan(0);
    } finally {
      await srv.close();
    }
  }, TIMEOUT_MS);
});
