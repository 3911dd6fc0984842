// A streamed Responses API request whose delivery was recorded, then whose response could not be stored (the
// database lost the connection between the two writes, as a Postgres soak's pg_terminate_backend did): the
// stream ends with response.failed, and the request keeps its one delivery. It got a second, under another
// delivery id and another status, so a receiver de-duplicating on webhook-id counted the request twice.
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/test-server.js';

let srv: TestServer | undefined;
afterEach(async () => {
  await srv?.close();
  srv = undefined;
});

describe('Responses API: a store failure after the audit', () => {
  it('a streamed response that could not be stored is audited once', async () => {
    srv = await startTestServer();
    const { token, key } = await srv.createKey({ webhookUrl: 'http://127.0.0.1:9/hook' });
    const responses = srv.running.store.responses;
    const save = responses.save.bind(responses);
    let failed = 0;
    responses.save = async (...args: Parameters<typeof save>) => {
      if (failed++ === 0) throw new Error('Connection terminated unexpectedly');
      return save(...args);
    };
    const res = await fetch(`${srv.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', input: 'When does it open?', instructions: 'The library opens at 9 am.', stream: true, store: true }),
    });
    const text = await res.text();
    expect(failed).toBeGreaterThanOrEqual(1); // then the failed response is stored, as any stream that broke
    expect(text).toContain('response.failed');
    const requestId = res.headers.get('x-request-id');
    const { rows } = await srv.running.store.deliveries.list(key.id, { limit: 10 });
    const mine = rows.filter((r) => r.request_id === requestId);
    const statuses = await Promise.all(mine.map(async (r) => JSON.parse((await srv!.running.store.deliveries.byId(r.id))!.payload).status_code));
    expect(statuses).toEqual([200]);
  });
});
