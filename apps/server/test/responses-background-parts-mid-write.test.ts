// A background response whose JSON is over a part (RESPONSE_PART_CHARS: megabytes of echoed `instructions`) is kept in
// parts. Its runner used to delete the running response's parts, write the final ones, then point the row at them: a
// GET or cancel in between answered 404 (the parts gone), or 200 with the first of the new parts only (the row still
// counting the old ones: JSON cut off). A read now answers the whole response as it was before the write, or after it.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import type { ResponseObject } from '@svc/protocol';
import { startTestServer } from './support/test-server.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { storeVariants } from './support/databases.js';
import { RESPONSE_PART_CHARS } from '../src/storage/responses-store.js';

const variants = await storeVariants('responses-background-parts-mid-write');
const SECRET_KEY = randomBytes(32).toString('base64');
/** Two parts of the running response; with the answer, three of the final one. */
const INSTRUCTIONS = 'Answer in full. '.repeat(Math.ceil((1.5 * RESPONSE_PART_CHARS) / 16));
const ANSWER = 'The tower is 330 metres tall. '.repeat(Math.ceil(RESPONSE_PART_CHARS / 30));
const TIMEOUT_MS = 120_000;

let upstream: FakeUpstream | undefined;
afterAll(async () => {
  await upstream?.close();
});

/** A point the runner stops at until `release`d; `reached` once it is there. */
function holdPoint() {
  let arrive!: () => void;
  let release!: () => void;
  return {
    reached: new Promise<void>((resolve) => (arrive = resolve)),
    released: new Promise<void>((resolve) => (release = resolve)),
    arrive: () => arrive(),
    release: () => release(),
  };
}

describe.each(variants)('a background response stored in parts, read while its end is written (%s)', (_name, databaseUrl) => {
  it('GET and cancel answer the whole response, as it was before the write, at each step of it', async () => {
    upstream ??= await startFakeUpstream();
    const srv = await startTestServer({
      env: { SVC_DATABASE_URL: databaseUrl, SVC_SECRET_KEY: SECRET_KEY, SVC_UPSTREAM_BASE_URL: upstream.url },
      backgroundLeaseMs: 3_600_000,
    });
    try {
      const { token } = await srv.createKey({ webhookUrl: 'http://127.0.0.1:9/hook' });
      const responses = srv.running.store.responses;
      // The runner is held twice while it writes its end: as it starts on the final response's parts, and once they are
      // all written (its items indexed under its claim), before the row points at them.
      type Internals = {
        putParts: (response: ResponseObject, field: string, text: string, turn: unknown, claim?: unknown, ...rest: unknown[]) => Promise<string>;
        indexOutputItems: (keyId: string, response: ResponseObject, ...rest: unknown[]) => Promise<void>;
      };
      const store = responses as unknown as Internals;
      const putParts = store.putParts.bind(store);
      const index = store.indexOutputItems.bind(store);
      const atParts = holdPoint();
      const atIndex = holdPoint();
      store.putParts = async (response, field, text, turn, claim, ...rest) => {
        if (claim !== undefined && field === 'response' && response.status === 'completed') {
          atParts.arrive();
          await atParts.released;
        }
        return putParts(response, field, text, turn, claim, ...rest);
      };
      store.indexOutputItems = async (keyId, response, ...rest) => {
        await index(keyId, response, ...rest);
        if (response.status === 'completed') {
          atIndex.arrive();
          await atIndex.released;
        }
      };

      upstream.nextBehavior({ answer: ANSWER });
      const sdk = new OpenAI({ apiKey: token, baseURL: `${srv.url}/v1`, maxRetries: 0 });
      const created = await sdk.responses.create({ model: 'svc01', instructions: INSTRUCTIONS, input: 'How tall is the tower?', background: true });
      const headers = { authorization: `Bearer ${token}` };
      const get = async () => {
        const res = await fetch(`${srv.url}/v1/responses/${created.id}`, { headers });
        return { status: res.status, text: await res.text() };
      };
      /** The running response, whole: its status and all its instructions. */
      const running = (answer: { status: number; text: string }) => {
        expect(answer.status).toBe(200);
        const body = JSON.parse(answer.text) as ResponseObject;
        expect(body).toMatchObject({ id: created.id, status: 'in_progress' });
        expect(body.instructions).toBe(INSTRUCTIONS);
      };

      await atParts.reached;
      running(await get());
      // A cancel from another instance (this process does not run it, as there): its read of the response comes first.
      srv.running.background.has = () => false;
      const state = responses.state.bind(responses);
      let cancelRead!: (found: Awaited<ReturnType<typeof state>>) => void;
      const cancelHasRead = new Promise<Awaited<ReturnType<typeof state>>>((resolve) => (cancelRead = resolve));
      responses.state = async (...args: Parameters<typeof state>) => {
        const found = await state(...args);
        cancelRead(found);
        return found;
      };
      const cancelling = fetch(`${srv.url}/v1/responses/${created.id}/cancel`, { method: 'POST', headers });
      expect(await Promise.race([cancelHasRead, cancelling.then(() => 'answered before the writer went on')])).toMatchObject({ running: true });
      atParts.release();

      await atIndex.reached;
      running(await get());
      atIndex.release();

      // The cancel came while its end was being written: it answers that end, whole.
      const cancelled = await cancelling;
      expect(cancelled.status).toBe(200);
      const ended = JSON.parse(await cancelled.text()) as ResponseObject;
      expect(ended).toMatchObject({ id: created.id, status: 'completed', instructions: INSTRUCTIONS });
      expect(JSON.stringify(ended.output)).toContain(ANSWER);
      const after = await get();
      expect(after.status).toBe(200);
      expect(JSON.parse(after.text)).toEqual(ended);
    } finally {
      await srv.close();
    }
  }, TIMEOUT_MS);
});
