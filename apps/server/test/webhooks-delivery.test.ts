import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { AuditPayloadSchema, type AuditPayload } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { signBody } from '../src/webhooks/signer.js';
import { buildAuditPayload } from '../src/audit/audit-payload.js';
import { eventually, startReceiver, type Receiver, type ReceivedDelivery } from './support/webhooks.js';

const SECRET = 'whsec_test-secret-for-webhooks';
const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'The Eiffel Tower is in Paris.' });
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

afterEach(() => {
  upstream.setBehavior({ answer: 'The Eiffel Tower is in Paris.' });
  receiver.queue.length = 0;
  receiver.fallback = {};
});

async function clientFor(options: { signingSecret?: string | null; webhookUrl?: string | null } = {}) {
  const { token, key, user } = await server.createKey({
    webhookUrl: options.webhookUrl === undefined ? receiver.url : options.webhookUrl,
    signingSecret: options.signingSecret ?? null,
  });
  return { token, key, user, client: new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 }) };
}

/** The delivery carrying `requestId`, once it arrived. */
async function deliveryOf(requestId: string): Promise<{ entry: ReceivedDelivery; payload: AuditPayload }> {
  const find = (list: ReceivedDelivery[]) => list.find((d) => JSON.parse(d.raw.toString('utf8')).request_id === requestId);
  await receiver.waitFor((list) => find(list) !== undefined);
  const entry = find(receiver.received)!;
  return { entry, payload: AuditPayloadSchema.parse(JSON.parse(entry.raw.toString('utf8'))) };
}

function verifiesWithNodeCrypto(raw: Buffer, header: string | undefined, secret: string): boolean {
  if (!header?.startsWith('sha256=')) return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(raw).digest('hex'));
  const given = Buffer.from(header.slice('sha256='.length));
  // Same length first: timingSafeEqual throws otherwise.
  return expected.length === given.length && timingSafeEqual(expected, given);
}

describe('audit payload', () => {
  it('carries every field of spec §2.5 with the right values for a non-streamed 200', async () => {
    const { client, user } = await clientFor();
    const messages = [
      { role: 'system' as const, content: DOC },
      { role: 'user' as const, content: 'Where is it?' },
    ];
    const completion = await client.chat.completions.create({ model: 'svc01', messages });
    const { entry, payload } = await deliveryOf(completion.id);
    const svc = (completion as unknown as { svc: { grounded: boolean; score: number } }).svc;

    expect(Object.keys(payload).sort()).toEqual(
      [
        'event', 'request_id', 'timestamp', 'user_id', 'model', 'input_tokens', 'output_tokens', 'total_tokens',
        'latency_ms', 'status_code', 'streaming', 'prompt', 'response_text', 'grounded', 'hallucination_score',
        // additions beside the spec's fields (design §5)
        'sequence', 'grounding_checked', 'flagged_spans', 'claims',
      ].sort(),
    );
    expect(payload).toMatchObject({
      event: 'llm.request.completed',
      request_id: completion.id,
      user_id: user.id,
      model: 'svc01',
      input_tokens: completion.usage!.prompt_tokens,
      output_tokens: completion.usage!.completion_tokens,
      total_tokens: completion.usage!.total_tokens,
      status_code: 200,
      streaming: false,
      prompt: `system: ${DOC}\nuser: Where is it?`,
      response_text: completion.choices[0]!.message.content,
      grounded: svc.grounded,
      hallucination_score: Math.round((1 - svc.score) * 1000) / 1000,
      // the key's first delivery
      sequence: 1,
      grounding_checked: true,
      flagged_spans: (svc as unknown as { flagged_spans: unknown }).flagged_spans,
      claims: (svc as unknown as { claims: unknown }).claims,
    });
    expect(payload.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Number.isInteger(payload.latency_ms)).toBe(true);
    expect(payload.test).toBeUndefined();
    expect(entry.headers['content-type']).toBe('application/json');
    expect(entry.headers['user-agent']).toMatch(/^svc-webhooks\/\d+\.\d+\.\d+/);
    expect(entry.headers['x-svc-event']).toBe('llm.request.completed');
    expect(entry.headers['x-svc-delivery']).toMatch(/^whd_[0-9a-f]{32}$/);
  });

  it('reports streamed requests with streaming: true, the stream id and its usage', async () => {
    const { client } = await clientFor();
    const stream = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'Say hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let id = '';
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      id = chunk.id;
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    const { payload } = await deliveryOf(id);
    expect(payload.streaming).toBe(true);
    expect(payload.status_code).toBe(200);
    expect(payload.response_text).toBe(text);
    expect(payload.input_tokens).toBe(usage!.prompt_tokens);
    expect(payload.output_tokens).toBe(usage!.completion_tokens);
    expect(payload.prompt).toBe('user: Say hi');
  });

  it('reports a 400 invalid body with status_code 400, empty response_text, grounded true, score 0', async () => {
    const { token } = await clientFor();
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 5 }] }),
    });
    expect(res.status).toBe(400);
    const requestId = res.headers.get('x-request-id')!;
    const { payload } = await deliveryOf(requestId);
    expect(payload).toMatchObject({ status_code: 400, response_text: '', grounded: true, hallucination_score: 0, streaming: false });
  });

  it('reports a body that is not JSON (400 invalid_json) or is over 10 MiB (413) too: every failed request is audited', async () => {
    const { token } = await clientFor();
    const post = (body: string) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      });
    const notJson = await post('{"model": "svc01", "messages": [');
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
    const invalid = await deliveryOf(notJson.headers.get('x-request-id')!);
    expect(invalid.payload).toMatchObject({ status_code: 400, prompt: '', response_text: '', streaming: false, total_tokens: 0 });

    const tooLarge = await post(JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'x'.repeat(10 * 1024 * 1024) }] }));
    expect(tooLarge.status).toBe(413);
    expect(((await tooLarge.json()) as { error: { code: string } }).error.code).toBe('request_too_large');
    const large = await deliveryOf(tooLarge.headers.get('x-request-id')!);
    expect(large.payload).toMatchObject({ status_code: 413, prompt: '', response_text: '' });
  });

  it('reports an upstream failure with status_code 502', async () => {
    upstream.setBehavior({ status: 500, errorMessage: 'upstream exploded' });
    const { client } = await clientFor();
    const error = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }).then(
      () => {
        throw new Error('expected the upstream failure to reach the client');
      },
      (err: unknown) => err as InstanceType<typeof OpenAI.APIError>,
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(error.status).toBe(502);
    const requestId = error.headers?.get('x-request-id');
    expect(requestId).toBeTruthy();
    const { payload } = await deliveryOf(requestId!);
    expect(payload).toMatchObject({ status_code: 502, response_text: '', grounded: true, hallucination_score: 0 });
  });

  it('sends nothing for a key without a webhook URL', async () => {
    const { client, key } = await clientFor({ webhookUrl: null });
    await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
    const rows = await server.running.store.deliveries.list(key.id, { limit: 10 });
    expect(rows.rows).toHaveLength(0);
  });

  it('builds latency_ms, grounded and hallucination_score from the request (unit)', () => {
    const { payload, body } = buildAuditPayload({
      requestId: 'chatcmpl-x',
      key: { user_id: '7f1c0f5e-8a43-4c55-9a0e-3f2f1a1b2c3d' } as never,
      startedAt: 1_000,
      finishedAt: 1_812,
      statusCode: 200,
      streaming: false,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'x' } }] }],
      responseText: 'b',
      svc: { dehallucinate_requested: true, grounded: false, score: 0.25, flagged_spans: [], checked: true },
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
    }, 1);
    expect(payload).toMatchObject({ latency_ms: 812, grounded: false, hallucination_score: 0.75, prompt: 'user: a', timestamp: '1970-01-01T00:00:01.812Z' });
    expect(body).toBe(JSON.stringify(payload));
  });
});

describe('signatures', () => {
  it('signs the raw received bytes (node:crypto, @svc/verify) and keeps the delivery id stable', async () => {
    const { client } = await clientFor({ signingSecret: SECRET });
    const completion = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
    const { entry } = await deliveryOf(completion.id);
    const header = entry.headers['x-svc-signature'] as string;
    expect(header).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verifiesWithNodeCrypto(entry.raw, header, SECRET)).toBe(true);
    expect(verifiesWithNodeCrypto(entry.raw, header, `${SECRET}x`)).toBe(false);

    const verify = await import('@svc/verify').catch(() => undefined);
    if (verify) {
      expect(verify.verifySignature(entry.raw, header, SECRET)).toBe(true);
      expect(verify.constructEvent(entry.raw, header, SECRET, { toleranceSeconds: 3600 }).request_id).toBe(completion.id);
    } else {
      console.warn('@svc/verify is not built: its verification of the delivery is skipped');
    }
  });

  it('sends no signature header without a secret', async () => {
    const { client } = await clientFor({ signingSecret: null });
    const completion = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
    const { entry } = await deliveryOf(completion.id);
    expect(entry.headers['x-svc-signature']).toBeUndefined();
  });

  it('matches the known-answer vectors of @svc/verify', () => {
    const file = fileURLToPath(new URL('../../../packages/verify/test/vectors.json', import.meta.url));
    if (!existsSync(file)) {
      console.warn('packages/verify/test/vectors.json not found: known-answer vectors skipped');
      return;
    }
    const vectors = JSON.parse(readFileSync(file, 'utf8')) as Array<{ name: string; body_base64: string; secret: string; signature: string }>;
    expect(vectors.length).toBeGreaterThan(0);
    for (const v of vectors) expect(signBody(Buffer.from(v.body_base64, 'base64'), v.secret), v.name).toBe(v.signature);
  });
});

describe('latency', () => {
  it('does not wait for a receiver that sleeps 5 s; the delivery arrives later', async () => {
    receiver.fallback = { delayMs: 5_000 };
    const { client } = await clientFor();
    const started = Date.now();
    const completion = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
    const { entry } = await deliveryOf(completion.id);
    // The answer came while the receiver still sat on its delivery: had svc waited for it, its reply would be in.
    expect(entry.replied).toBeUndefined();
    expect(entry.receivedAt).toBeGreaterThanOrEqual(started);
    await eventually(() => entry.replied === 200, 15_000);
  });
});
