import { afterEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually } from './support/webhooks.js';

const ANSWER = Array.from({ length: 12 }, (_, i) => `token${i}`).join(' ');

let upstream: FakeUpstream | undefined;
let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  await upstream?.close();
  server = undefined;
  upstream = undefined;
});

/** The content deltas of an SSE body, and whether it ended with `data: [DONE]`. */
function readSse(text: string): { content: string; done: boolean; finish: string | null } {
  let content = '';
  let finish: string | null = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> };
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? '';
      finish = choice.finish_reason ?? finish;
    }
  }
  return { content, done: text.endsWith('data: [DONE]\n\n'), finish };
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${server!.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}

describe('concurrent streams', () => {
  it('relays 300 paced streams at once: the upstream sees all 300 open together, each client gets the whole answer and [DONE]', async () => {
    const streams = 300;
    // The fake holds every response until `streams` requests are open at once: a gateway that queues
    // (the old 128-connection pool) leaves it at its queue's width, which the assertion on peakOpen shows.
    upstream = await startFakeUpstream({ answer: ANSWER, trickle: { intervalMs: 20 }, waitForOpen: { count: streams, timeoutMs: 20_000 } });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RATE_LIMIT_RPM: '100000' } });
    const { token } = await server.createKey();

    const results = await Promise.all(
      Array.from({ length: streams }, async () => {
        const res = await fetch(`${server!.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Count.' }] }),
        });
        return { status: res.status, ...readSse(await res.text()) };
      }),
    );

    expect(upstream.peakOpen).toBe(streams);
    expect(results.filter((r) => r.status === 200 && r.done && r.finish === 'stop' && r.content === ANSWER)).toHaveLength(streams);
    expect(await metric('svc_chat_in_flight_rejections_total')).toBe(0);
  });
});

describe('SVC_MAX_IN_FLIGHT', () => {
  it('refuses the request past the maximum with 429 too_many_requests_in_flight and retry-after, without sending it upstream', async () => {
    upstream = await startFakeUpstream({ answer: ANSWER, hangMidStream: true });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_MAX_IN_FLIGHT: '5' } });
    const { token } = await server.createKey();
    const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });

    // Five streams that the upstream leaves open after their first frames.
    const open = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const stream = await client.chat.completions.create({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
        const iterator = stream[Symbol.asyncIterator]();
        await iterator.next();
        return stream;
      }),
    );
    expect(await metric('svc_chat_requests_in_flight')).toBe(5);
    expect(await metric('svc_chat_streams_open')).toBe(5);
    expect(await metric('svc_chat_requests_in_flight_max')).toBe(5);

    // The sixth, through the SDK: a RateLimitError (the SDK would retry it after retry-after-ms).
    const refused = await client.chat.completions
      .create({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Hi' }] })
      .then(() => undefined, (err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    const error = refused as InstanceType<typeof OpenAI.RateLimitError>;
    expect(error.status).toBe(429);
    expect(error.error).toMatchObject({ type: 'rate_limit_error', code: 'too_many_requests_in_flight', param: null });
    expect(error.headers?.get('retry-after')).toBe('1');
    expect(error.headers?.get('retry-after-ms')).toBe('1000');

    // A seventh, as plain HTTP: the OpenAI error shape, and the rate-limit headers of an authenticated response.
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('x-ratelimit-limit-requests')).not.toBeNull();
    expect(await res.json()).toEqual({
      error: { message: expect.stringContaining('maximum of 5 requests'), type: 'rate_limit_error', code: 'too_many_requests_in_flight', param: null },
    });

    // Never queued: only the five reached the upstream, and the refusals are counted.
    expect(upstream.requests).toHaveLength(5);
    expect(await metric('svc_chat_in_flight_rejections_total')).toBe(2);
    expect(await metric('svc_chat_requests_in_flight')).toBe(5);

    // Closing the streams frees their slots; the next request is answered.
    for (const stream of open) stream.controller.abort();
    await eventually(async () => (await metric('svc_chat_requests_in_flight')) === 0);
    expect(await metric('svc_chat_streams_open')).toBe(0);
    upstream.setBehavior({ answer: 'Free again.' });
    const completion = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }] });
    expect(completion.choices[0]?.message.content).toBe('Free again.');
  });
});
