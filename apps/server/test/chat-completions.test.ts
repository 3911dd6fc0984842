import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { ChatCompletionChunkSchema, ChatCompletionSchema } from '@svc/protocol';
import { checkGrounding } from '@svc/grounding';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { postChat } from './support/reliability-http.js';

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';

let upstream: FakeUpstream;
let server: TestServer;
let token: string;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  server = await startTestServer({
    env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'up-model', SVC_UPSTREAM_THINKING_MODEL: 'up-thinker' },
  });
  ({ token } = await server.createKey());
  client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

beforeEach(() => {
  upstream.setBehavior({});
  upstream.requests.length = 0;
});

const lastUpstreamBody = () => upstream.requests[upstream.requests.length - 1]!.body;

async function post(body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('non-streamed completions', () => {
  it('answers through the openai client with svc01, usage, x-request-id and the svc object', async () => {
    upstream.setBehavior({ answer: 'The Eiffel Tower is in Paris.' });
    const { data, response } = await client.chat.completions
      .create({ model: 'svc01', messages: [{ role: 'system', content: DOC }, { role: 'user', content: 'Where is it?' }] })
      .withResponse();
    const parsed = ChatCompletionSchema.parse(data);
    expect(parsed.model).toBe('svc01');
    expect(parsed.id).toMatch(/^chatcmpl-/);
    expect(response.headers.get('x-request-id')).toBe(parsed.id);
    expect(parsed.object).toBe('chat.completion');
    expect(parsed.choices[0]!.message).toMatchObject({ role: 'assistant', content: 'The Eiffel Tower is in Paris.' });
    expect(parsed.choices[0]!.finish_reason).toBe('stop');
    expect(parsed.usage.total_tokens).toBe(parsed.usage.prompt_tokens + parsed.usage.completion_tokens);
    expect(parsed.svc.dehallucinate_requested).toBe(true);
    expect(parsed.svc.checked).toBe(true);
    const expected = checkGrounding({ sources: [DOC, 'Where is it?'], answer: 'The Eiffel Tower is in Paris.', question: 'Where is it?' });
    expect(parsed.svc.score).toBe(expected.score);
    expect(parsed.svc.grounded).toBe(expected.grounded);
  });

  it('sends spec defaults upstream: max_tokens 4096, temperature 0.1, the mapped model, no svc field', async () => {
    await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
    const body = lastUpstreamBody();
    expect(body).toMatchObject({ model: 'up-model', max_tokens: 4096, temperature: 0.1 });
    expect(body).not.toHaveProperty('svc');
  });

  it('keeps explicit values and passes unknown fields through', async () => {
    await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 50,
      temperature: 0.7,
      seed: 3,
      // @ts-expect-error a vendor extension the SDK does not know
      top_k: 5,
    });
    expect(lastUpstreamBody()).toMatchObject({ max_tokens: 50, temperature: 0.7, seed: 3, top_k: 5 });
  });

  it('thinking mode forces temperature 1.0, uses the thinking model and passes reasoning_content through', async () => {
    upstream.setBehavior({ answer: 'Paris.', reasoning: 'The document says Paris.', reasoningField: 'reasoning' });
    const res = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'Where?' }],
      temperature: 0.2,
      // @ts-expect-error svc is our extension
      svc: { thinking: true },
    });
    expect(lastUpstreamBody()).toMatchObject({ model: 'up-thinker', temperature: 1 });
    expect((res.choices[0]!.message as unknown as { reasoning_content: string }).reasoning_content).toBe('The document says Paris.');
  });

  it('reports the check as not run when dehallucinate is false', async () => {
    const res = (await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'hi' }],
      // @ts-expect-error svc is our extension
      svc: { dehallucinate: false },
    })) as unknown as { svc: unknown };
    expect(res.svc).toEqual({ dehallucinate_requested: false, grounded: true, score: 1, flagged_spans: [], checked: false });
  });

  it('flags an unsupported number with offsets into the content', async () => {
    const answer = 'It was completed in 1925.';
    upstream.setBehavior({ answer });
    const res = (await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'system', content: DOC }, { role: 'user', content: 'When was it completed?' }],
    })) as unknown as { svc: { grounded: boolean; flagged_spans: Array<{ start: number; end: number; text: string }> } };
    expect(res.svc.grounded).toBe(false);
    const span = res.svc.flagged_spans.find((s) => s.text.includes('1925'));
    expect(span).toBeDefined();
    expect(answer.slice(span!.start, span!.end)).toBe(span!.text);
  });

  it('returns tool calls (parallel, with their arguments) and counts usage when upstream gives none', async () => {
    upstream.setBehavior({
      usage: false,
      toolCalls: [
        { name: 'get_weather', arguments: { city: 'Paris' } },
        { name: 'get_time', arguments: { tz: 'CET' } },
      ],
    });
    const res = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'Weather and time in Paris?' }],
      tools: [
        { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
        { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
      ],
      tool_choice: 'required',
    });
    expect(lastUpstreamBody()).toMatchObject({ tool_choice: 'required' });
    const calls = res.choices[0]!.message.tool_calls!;
    expect(calls.map((c) => (c.type === 'function' ? c.function.name : ''))).toEqual(['get_weather', 'get_time']);
    expect(res.choices[0]!.finish_reason).toBe('tool_calls');
    expect(res.usage!.prompt_tokens).toBeGreaterThan(5);
  });
});

describe('streamed completions', () => {
  it('streams OpenAI chunks with one id, svc01, role first, svc on the finish chunk, and no usage unless asked', async () => {
    upstream.setBehavior({ answer: 'The tower is 330 metres tall.' });
    const stream = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'system', content: DOC }, { role: 'user', content: 'How tall?' }],
      stream: true,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(ChatCompletionChunkSchema.parse(chunk));
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.model === 'svc01' && c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe('The tower is 330 metres tall.');
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finish).toHaveLength(1);
    expect(finish[0]!.svc).toMatchObject({ dehallucinate_requested: true, checked: true });
    const expected = checkGrounding({ sources: [DOC, 'How tall?'], answer: text, question: 'How tall?' });
    expect(finish[0]!.svc!.score).toBe(expected.score);
    expect(chunks.some((c) => c.usage)).toBe(false);
    // usage is always requested upstream so the webhook has token counts
    expect(lastUpstreamBody()).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('ends with a choices: [] usage chunk when include_usage is set', async () => {
    const stream = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks[chunks.length - 1]!;
    expect(last.choices).toEqual([]);
    expect(last.usage!.total_tokens).toBe(last.usage!.prompt_tokens + last.usage!.completion_tokens);
  });

  it('computes usage itself when upstream streams none', async () => {
    upstream.setBehavior({ usage: false, answer: 'one two three' });
    const stream = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'count' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    expect(usage!.completion_tokens).toBe(3);
  });

  it('streams parallel tool-call deltas with their index', async () => {
    upstream.setBehavior({ toolCalls: [{ name: 'a', arguments: { x: 1 } }, { name: 'b', arguments: { y: 'two' } }] });
    const stream = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'call both' }],
      tools: [
        { type: 'function', function: { name: 'a', parameters: { type: 'object' } } },
        { type: 'function', function: { name: 'b', parameters: { type: 'object' } } },
      ],
      stream: true,
    });
    const args: Record<number, string> = {};
    const names: Record<number, string> = {};
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) {
        args[tc.index] = (args[tc.index] ?? '') + (tc.function?.arguments ?? '');
        if (tc.function?.name) names[tc.index] = tc.function.name;
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(names).toEqual({ 0: 'a', 1: 'b' });
    expect(JSON.parse(args[0]!)).toEqual({ x: 1 });
    expect(JSON.parse(args[1]!)).toEqual({ y: 'two' });
    expect(finish).toBe('tool_calls');
  });

  it('passes reasoning (either upstream field) as delta.reasoning_content', async () => {
    upstream.setBehavior({ reasoning: 'Thinking hard.', reasoningField: 'reasoning', answer: 'Done.' });
    // svc is our extension of the request: passed as a variable, the SDK's types let it through
    const params = { model: 'svc01', messages: [{ role: 'user' as const, content: 'think' }], stream: true as const, svc: { thinking: true } };
    const stream = await client.chat.completions.create(params);
    let reasoning = '';
    for await (const chunk of stream) reasoning += (chunk.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? '';
    expect(reasoning).toBe('Thinking hard.');
  });

  it('sends an SSE error event when upstream fails after the stream started', async () => {
    upstream.setBehavior({ resetMidStream: 2 });
    const res = await post({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }], stream: true });
    expect(res.status).toBe(200);
    const frames = res.text.split('\n\n').filter(Boolean);
    const last = JSON.parse(frames[frames.length - 1]!.replace(/^data: /, ''));
    expect(last.error).toMatchObject({ type: 'upstream_error' });
    expect(last.error.code).toMatch(/^upstream_/);
    expect(res.text).not.toContain('[DONE]');
  });

  it('aborts the upstream request when the client disconnects mid-stream', async () => {
    upstream.setBehavior({ trickle: { intervalMs: 100 }, answer: 'one two three four five six seven eight nine ten' });
    const controller = new AbortController();
    const res = await postChat(server.url, token, { stream: true, content: 'hi', signal: controller.signal });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    const aborted = await upstream.waitForAbort(5000);
    expect(aborted.aborted).toBe(true);
  });
});

describe('errors', () => {
  it.each([
    ['missing key', undefined, 'missing_api_key'],
    ['malformed header', 'Basic abc', 'invalid_api_key'],
    ['unknown key', 'Bearer sk-svc-nope', 'invalid_api_key'],
  ])('401 for %s', async (_name, authorization, code) => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: authorization ? { authorization } : {},
      body: '{}',
    });
    expect(res.status).toBe(401);
    const body = await res.json();
    expect(body).toEqual({ error: { message: expect.any(String), type: 'authentication_error', code, param: null } });
  });

  it('401 invalid_api_key for a revoked key, through the openai client', async () => {
    const { token: revokedToken, key } = await server.createKey();
    await server.running.store.keys.revoke(key.id, Date.now());
    const revokedClient = new OpenAI({ apiKey: revokedToken, baseURL: `${server.url}/v1`, maxRetries: 0 });
    await expect(revokedClient.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 401,
      code: 'invalid_api_key',
    });
  });

  it.each([
    ['invalid JSON', '{"model": "svc01",', 'invalid_json', null],
    ['missing messages', { model: 'svc01' }, 'missing_required_parameter', 'messages'],
    ['missing model', { messages: [{ role: 'user', content: 'x' }] }, 'missing_required_parameter', 'model'],
    ['messages not an array', { model: 'svc01', messages: 'hi' }, 'invalid_type', 'messages'],
    ['content of wrong type', { model: 'svc01', messages: [{ role: 'user', content: 5 }] }, 'invalid_type', 'messages[0].content'],
    ['unknown role', { model: 'svc01', messages: [{ role: 'robot', content: 'x' }] }, 'invalid_value', 'messages[0].role'],
    ['empty messages', { model: 'svc01', messages: [] }, 'invalid_value', 'messages'],
    ['temperature of wrong type', { model: 'svc01', messages: [{ role: 'user', content: 'x' }], temperature: 'hot' }, 'invalid_type', 'temperature'],
    ['temperature out of range', { model: 'svc01', messages: [{ role: 'user', content: 'x' }], temperature: 5 }, 'invalid_value', 'temperature'],
    ['max_tokens not an integer', { model: 'svc01', messages: [{ role: 'user', content: 'x' }], max_tokens: 1.5 }, 'invalid_type', 'max_tokens'],
    ['svc.thinking of wrong type', { model: 'svc01', messages: [{ role: 'user', content: 'x' }], svc: { thinking: 'yes' } }, 'invalid_type', 'svc.thinking'],
    ['body not an object', '[1,2]', 'invalid_type', null],
    ['a number that parses as Infinity', '{"model":"svc01","messages":[{"role":"user","content":"x"}],"temperature":1e999}', 'invalid_value', 'temperature'],
  ])('400 for %s', async (_name, body, code, param) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', code, param } });
  });

  it('404 model_not_found with param model for an unknown model (as OpenAI answers)', async () => {
    const res = await post({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] });
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text)).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', code: 'model_not_found', param: 'model' } });
  });

  it('413 for a body over 10 MiB', async () => {
    const res = await post({ model: 'svc01', messages: [{ role: 'user', content: 'x'.repeat(10 * 1024 * 1024 + 10) }] });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text).error).toMatchObject({ code: 'request_too_large', type: 'invalid_request_error' });
  });

  it('404 not_found in the error shape for unknown routes', async () => {
    const res = await fetch(`${server.url}/v1/nope`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 'not_found', type: 'invalid_request_error', param: null });
  });

  it.each([
    ['500', { status: 500 }, 'upstream_error'],
    ['garbage body', { garbage: true }, 'upstream_invalid_response'],
    ['reset before headers', { resetBeforeHeaders: true }, 'upstream_unavailable'],
  ])('502 for upstream %s', async (_name, behavior, code) => {
    upstream.setBehavior(behavior);
    const res = await post({ model: 'svc01', messages: [{ role: 'user', content: 'x' }] });
    expect(res.status).toBe(502);
    expect(JSON.parse(res.text)).toEqual({ error: { message: expect.any(String), type: 'upstream_error', code, param: null } });
  });

  it('429 upstream_rate_limited with the upstream retry-after when upstream rate-limits', async () => {
    upstream.setBehavior({ status: 429, retryAfter: '7' });
    const res = await post({ model: 'svc01', messages: [{ role: 'user', content: 'x' }], stream: true });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(JSON.parse(res.text).error).toMatchObject({ type: 'rate_limit_error', code: 'upstream_rate_limited' });
  });

  it('502 upstream_unavailable when nothing listens upstream', async () => {
    const dead = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: 'http://127.0.0.1:9/v1' } });
    try {
      const { token: t } = await dead.createKey();
      const res = await fetch(`${dead.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t}` },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('upstream_unavailable');
    } finally {
      await dead.close();
    }
  });
});

describe('rate limits', () => {
  it('answers 429 with retry-after and x-ratelimit-* headers after the per-key limit', async () => {
    const { token: limited } = await server.createKey({ rateLimitRpm: 3 });
    const call = () => fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${limited}` } });
    const first = await call();
    expect(first.headers.get('x-ratelimit-limit-requests')).toBe('3');
    expect(first.headers.get('x-ratelimit-remaining-requests')).toBe('2');
    expect(first.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+(ms|s)$|^\d+m\d+s$/);
    await call();
    await call();
    const refused = await call();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await refused.json()) as { error: unknown }).error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded', param: null });
  });
});

describe('other routes', () => {
  it('lists svc01 and serves health checks without a key', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['svc01']);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });

  it('never logs keys or prompts at info level', async () => {
    await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'secret-prompt-marker' }] });
    const all = server.logs.join('\n');
    expect(all).toContain('"request_id"');
    expect(all).not.toContain(token);
    expect(all).not.toContain('secret-prompt-marker');
  });
});
