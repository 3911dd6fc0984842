// DELETE /v1/responses/{id} of a background response running on another instance (Postgres) whose owner did not stop
// it within the delete's wait (a slow poll): the row was deleted anyway, and the owner, which looks for cancels on
// its rows, never found one: its upstream call ran to its end for a response nobody could read. The owner now stops a
// run whose row is gone at its next look. The DELETE ends the run before the row goes (cancelled, audited, counted):
// the owner, finding its run no longer its own, counts nothing, and the request is counted once.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { countedUsage, startTestServer, type TestServer } from './support/test-server.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { eventually } from './support/webhooks.js';
import { createTestPostgres } from './support/databases.js';

const pgDb = await createTestPostgres('responses-delete-elsewhere');
let upstream: FakeUpstream;
let owner: TestServer | undefined;
let other: TestServer | undefined;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  if (!pgDb) return;
  const env = { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_DATABASE_URL: pgDb.url, SVC_SECRET_KEY: randomBytes(32).toString('base64') };
  owner = await startTestServer({ env });
  other = await startTestServer({ env });
});
afterAll(async () => {
  await owner?.close();
  await other?.close();
  await upstream?.close();
  await pgDb?.drop();
});

describe('DELETE of a background response running on another instance (Postgres)', () => {
  it.skipIf(!pgDb)('leaves no upstream call running once the response is deleted, though its owner was slow to look', async () => {
    const { token, key } = await owner!.createKey();
    const sdk = (srv: TestServer) => new OpenAI({ apiKey: token, baseURL: `${srv.url}/v1`, maxRetries: 0 });
    // The owner's looks for cancels find none until the delete has answered: it is slower than the delete's wait.
    const responses = owner!.running.store.responses;
    const asked = responses.cancelsAsked.bind(responses);
    let slow = true;
    responses.cancelsAsked = async (...args: Parameters<typeof asked>) => (slow ? [] : asked(...args));

    upstream.nextBehavior({ hang: true });
    const prompt = `Write a long novel (${randomBytes(4).toString('hex')}).`;
    const created = await sdk(owner!).responses.create({ model: 'svc01', input: prompt, background: true });
    await eventually(() => upstream.requests.some((r) => JSON.stringify(r.body.messages).includes(prompt)) || undefined);
    await sdk(other!).responses.delete(created.id);
    expect(await sdk(owner!).responses.retrieve(created.id).catch((err: unknown) => err)).toBeInstanceOf(OpenAI.NotFoundError);

    slow = false;
    await eventually(() => upstream.requests.find((r) => JSON.stringify(r.body.messages).includes(prompt))?.aborted, 15_000);
    await eventually(() => owner!.running.background.size === 0 || undefined);
    // Counted once, as cancelled by its client (409): by the DELETE that ended it, not again by its owner.
    expect(await countedUsage([owner!, other!], key.id)).toMatchObject({ requests: 1, errors_4xx: 1, errors_5xx: 0 });
  });
});
