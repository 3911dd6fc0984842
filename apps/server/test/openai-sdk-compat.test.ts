import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { setTimeout as delay } from 'node:timers/promises';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { createOpenAICompatibleUpstream } from '../src/upstream/openai-compatible.js';

/**
 * What the official `openai` client notices about svc in front of an upstream: error classes and their
 * fields, (no) retries, the token-limit form reasoning models need, stream frame details, aborts.
 */

let upstream: FakeUpstream;
let server: TestServer;
let token: string;
/** The SDK's defaults (2 retries), as users run it. */
let client: OpenAI;
let noRetry: OpenAI;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  server = await startTestServer({
    env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_API_KEY: 'sk-upstream-secret', SVC_UPSTREAM_MODEL: 'up-model', SVC_UPSTREAM_THINKING_MODEL: 'o4-mini' },
  });
  ({ token } = await server.createKey());
  client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1` });
  noRetry = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

beforeEach(() => {
  upstream.setBehavior({});
  upstream.requests.length = 0;
});

const ask = { model: 'svc01', messages: [{ role: 'user' as const, content: 'Say hello.' }] };

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await delay(5);
}

async function rejection(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(OpenAI.APIError);
    return error as InstanceType<typeof OpenAI.APIError>;
  }
  throw new Error('expected the call to fail');
}

describe('upstream 4xx keep their meaning', () => {
  // logit_bias: svc drops a sampling knob a model refuses (token-limit.ts), not a field whose output a client asked for.
  it.each([false, true])("an upstream 400 is a BadRequestError with the upstream's message, code and param, not retried (stream: %s)", async (stream) => {
    upstream.setBehavior({
      status: 400,
      errorMessage: "Unsupported parameter: 'logit_bias' is not supported with this model (key sk-upstream-secret).",
      errorCode: 'unsupported_parameter',
      errorParam: 'logit_bias',
    });
    const error = await rejection(client.chat.completions.create({ ...ask, logit_bias: { '50256': -100 }, stream }));
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.status).toBe(400);
    expect(error.code).toBe('unsupported_parameter');
    expect(error.param).toBe('logit_bias');
    expect(error.type).toBe('invalid_request_error');
    expect(error.message).toContain("Unsupported parameter: 'logit_bias'");
    expect(error.message).not.toContain('sk-upstream-secret');
    // The SDK retries 408/409/429/5xx: a 400 reaches the upstream exactly once.
    expect(upstream.requests).toHaveLength(1);
  });

  it.each([
    ['vLLM', { object: 'error', message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.", type: 'BadRequestError', param: null, code: 400 }],
    ['vLLM (V1)', { object: 'error', message: 'The decoder prompt (length 5000) is longer than the maximum model length of 4096.', type: 'BadRequestError', param: null, code: 400 }],
    ['llama.cpp', { error: { code: 400, message: 'the request exceeds the available context size, try increasing it', type: 'exceed_context_size_error', n_prompt_tokens: 5000, n_ctx: 4096 } }],
    ['LM Studio', { error: 'Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens.' }],
    ['TGI', { error: 'Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000 `inputs` tokens and 64 `max_new_tokens`', error_type: 'validation' }],
  ])("%s's refusal of a prompt longer than the context is a BadRequestError with OpenAI's code context_length_exceeded, streamed or not", async (_server, errorBody) => {
    for (const stream of [false, true]) {
      upstream.setBehavior({ status: 400, errorBody });
      const error = await rejection(client.chat.completions.create({ ...ask, stream }));
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.code).toBe('context_length_exceeded');
      expect(error.param).toBe('messages');
      expect(error.message).toMatch(/context|model length|max_new_tokens/);
    }
  });

  it('an upstream code of its own is kept, whatever its message says', async () => {
    upstream.setBehavior({ status: 400, errorMessage: 'Prompt too long: the maximum context length is 8192 tokens.', errorCode: 'prompt_too_long' });
    expect((await rejection(client.chat.completions.create(ask))).code).toBe('prompt_too_long');
  });

  it("an upstream 429 is a RateLimitError (upstream_rate_limited) with the upstream's retry-after", async () => {
    upstream.setBehavior({ status: 429, retryAfter: '7', errorMessage: 'Rate limit reached for requests.' });
    const error = await rejection(noRetry.chat.completions.create(ask));
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error.code).toBe('upstream_rate_limited');
    expect(error.headers?.get('retry-after')).toBe('7');
  });

  it.each([
    ['401 (svc\'s upstream key)', 401],
    ['403', 403],
    ['500', 500],
  ])('an upstream %s stays a 502 upstream_error', async (_name, status) => {
    upstream.setBehavior({ status });
    const error = await rejection(noRetry.chat.completions.create(ask));
    expect(error.status).toBe(502);
    expect(error.code).toBe('upstream_error');
    expect(error.type).toBe('upstream_error');
  });

  it('an upstream 401 or 403 (svc\'s own key) is not retried by the SDK, streamed or not; a 500 is', async () => {
    // Each retry was one more upstream call and one more audit delivery, for an answer that could not change.
    for (const status of [401, 403]) {
      for (const stream of [false, true]) {
        upstream.setBehavior({ status });
        upstream.requests.length = 0;
        const error = await rejection(client.chat.completions.create({ ...ask, stream }));
        expect(error.status).toBe(502);
        expect(error.headers?.get('x-should-retry')).toBe('false');
        expect(upstream.requests).toHaveLength(1);
      }
    }
    upstream.setBehavior({ status: 500 });
    upstream.requests.length = 0;
    await rejection(client.chat.completions.create(ask));
    expect(upstream.requests).toHaveLength(3);
  });
});

describe('errors in the middle of a stream', () => {
  // svc's upstream key is 'sk-upstream-secret'. The message was cut to 500 characters before the key was taken out,
  // so a key across the cut came out in part ('sk-upstre…'); and OpenAI's masked form of the key was passed on.
  const across = `${'x'.repeat(490)} sk-upstream-secret is not valid.`;
  const masked = 'Incorrect API key provided: sk-ups*********cret.';
  const chunk = `data: ${JSON.stringify({ id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1, model: 'up-model', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hel' }, finish_reason: null }] })}\n\n`;
  it.each([
    ['a 200 body with an error (Gemini array), key across the cut', false, { rawJson: [{ error: { code: 400, message: across, status: 'INVALID_ARGUMENT' } }] }],
    ['a 200 body with an error, masked key', false, { rawJson: { error: { message: masked } } }],
    ['a stream answered with a JSON error, key across the cut', true, { rawJson: { detail: across } }],
    ['a stream answered with a JSON error, masked key', true, { rawJson: [{ error: { message: masked } }] }],
    ['an error frame mid-stream, key across the cut', true, { rawSse: [chunk, `data: ${JSON.stringify({ error: { message: across } })}\n\n`] }],
    ['an error frame mid-stream, masked key', true, { rawSse: [chunk, `data: ${JSON.stringify({ object: 'error', message: masked })}\n\n`] }],
  ])("%s: no part of svc's upstream key reaches the client", async (_name, stream, behavior) => {
    upstream.setBehavior(behavior);
    const error = await rejection((async () => {
      const answer = await noRetry.chat.completions.create({ ...ask, stream });
      if (stream) for await (const _ of answer as AsyncIterable<unknown>) void _;
    })());
    expect(error.status === 502 || error.status === undefined).toBe(true);
    expect(error.message).not.toMatch(/sk-ups|\*\*\*/);
    // The key's place is marked (the cut may fall inside the mark).
    expect(error.message).toMatch(/\[redacted/);
  });

  it.each([
    ['OpenAI\'s {"error": {…}}', 'data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}\n\n', 'The server had an error while processing your request.'],
    ['vLLM\'s top-level {"object": "error", …}', 'data: {"object":"error","message":"CUDA out of memory.","type":"InternalServerError","param":null,"code":500}\n\n', 'CUDA out of memory.'],
    ['a named error event', 'event: error\ndata: {"message":"Overloaded"}\n\n', 'Overloaded'],
    [
      "llama.cpp's `error:` line",
      'error: {"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}\n\n',
      'the request exceeds the available context size, try increasing it',
    ],
  ])("%s reaches the SDK as an APIError upstream_error with the upstream's message", async (_name, errorFrame, message) => {
    const first = `data: ${JSON.stringify({ id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1, model: 'up-model', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hel' }, finish_reason: null }] })}\n\n`;
    upstream.setBehavior({ rawSse: [first, errorFrame] });
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    let text = '';
    const error = await rejection((async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })());
    expect(text).toBe('Hel');
    expect(error.error).toMatchObject({ type: 'upstream_error', code: 'upstream_error', message: `Upstream failed mid-stream: ${message}` });
  });
});

describe('the token limit in the form the upstream model takes', () => {
  it('a reasoning model (svc.thinking → o4-mini) gets max_completion_tokens and temperature 1; the fake refuses anything else', async () => {
    const completion = await noRetry.chat.completions.create({ ...ask, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(completion.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    expect(upstream.requests).toHaveLength(1);
    const sent = upstream.requests[0]!.body;
    expect(sent).toMatchObject({ model: 'o4-mini', max_completion_tokens: 4096, temperature: 1 });
    expect(sent).not.toHaveProperty('max_tokens');
  });

  it("a client's max_tokens is sent as max_completion_tokens to a reasoning model, streamed too", async () => {
    const stream = await noRetry.chat.completions.create({ ...ask, max_tokens: 50, stream: true, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsStreaming);
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('Hello from the fake upstream.');
    expect(upstream.requests[0]!.body).toMatchObject({ model: 'o4-mini', max_completion_tokens: 50 });
    expect(upstream.requests[0]!.body).not.toHaveProperty('max_tokens');
  });

  it('other models get max_tokens (svc default 4096) and the default temperature', async () => {
    await noRetry.chat.completions.create({ ...ask, max_completion_tokens: 64 });
    expect(upstream.requests[0]!.body).toMatchObject({ model: 'up-model', max_tokens: 64, temperature: 0.1 });
    expect(upstream.requests[0]!.body).not.toHaveProperty('max_completion_tokens');
  });

  it('an upstream that refuses the form with 400 unsupported_parameter gets the other form once, and keeps it', async () => {
    // This model name is no reasoning model by the rule, but its server takes only max_completion_tokens.
    upstream.setBehavior({ tokenLimitField: 'max_completion_tokens' });
    const first = await client.chat.completions.create(ask);
    expect(first.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    expect(upstream.requests.map((r) => Object.keys(r.body).filter((k) => k.startsWith('max_')))).toEqual([['max_tokens'], ['max_completion_tokens']]);
    await client.chat.completions.create(ask);
    expect(upstream.requests).toHaveLength(3);
    expect(upstream.requests[2]!.body).toHaveProperty('max_completion_tokens', 4096);
  });

  it('a model the rule does not know as a reasoning model, refusing a temperature: sent again without it, and none after', async () => {
    upstream.setBehavior({ tokenLimitField: 'max_completion_tokens', fixedTemperature: true });
    const first = await noRetry.chat.completions.create(ask);
    expect(first.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    const sent = () => upstream.requests.map((r) => Object.keys(r.body).filter((k) => k.startsWith('max_') || k === 'temperature').sort());
    // up-model learned max_completion_tokens in the test before (the lesson is per model, server-wide): the
    // first request here still has the temperature, the next one not.
    expect(sent()).toEqual([['max_completion_tokens', 'temperature'], ['max_completion_tokens']]);
    await noRetry.chat.completions.create(ask);
    expect(sent()).toEqual([['max_completion_tokens', 'temperature'], ['max_completion_tokens'], ['max_completion_tokens']]);
  });
});

describe('tool calls from upstreams that leave fields out', () => {
  it('keeps parallel calls apart when the upstream leaves out their index (one call per frame, as Gemini streams them)', async () => {
    // Each frame's calls have no `index`: a call with a new id is a new call, one without an id goes on the last.
    const frame = (delta: Record<string, unknown>, finish: string | null = null): string =>
      `data: ${JSON.stringify({ id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1, model: 'up-model', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    upstream.setBehavior({
      rawSse: [
        frame({ role: 'assistant', tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":' } }] }),
        frame({ tool_calls: [{ function: { arguments: '"Paris"}' } }] }),
        frame({ tool_calls: [{ id: 'call_b', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } }] }),
        frame({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ],
    });
    const stream = client.chat.completions.stream({
      ...ask,
      tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    });
    const indexes: number[] = [];
    stream.on('chunk', (chunk) => indexes.push(...(chunk.choices[0]?.delta.tool_calls ?? []).map((call) => call.index)));
    const completion = await stream.finalChatCompletion();
    expect(indexes).toEqual([0, 0, 1]);
    expect(completion.choices[0]?.message.tool_calls).toEqual([
      { id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_b', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } },
    ]);
    expect(completion.choices[0]?.finish_reason).toBe('tool_calls');
  });

  it('takes fragments whose missing fields are nulls ("id": null, "type": null, "name": null, "function": null), as some servers send them', async () => {
    const frame = (delta: Record<string, unknown>, finish: string | null = null): string =>
      `data: ${JSON.stringify({ id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1, model: 'up-model', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    upstream.setBehavior({
      rawSse: [
        frame({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '' } }] }),
        frame({ tool_calls: [{ index: 0, id: null, type: null, function: { name: null, arguments: '{"city":"Paris"}' } }] }),
        frame({ tool_calls: [{ index: 0, id: null, type: null, function: null }] }),
        frame({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ],
    });
    const completion = await client.chat.completions
      .stream({ ...ask, tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }] })
      .finalChatCompletion();
    expect(completion.choices[0]?.message.tool_calls).toEqual([{ id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }]);
    expect(completion.choices[0]?.finish_reason).toBe('tool_calls');
  });

  it('gives a non-streamed tool call without a type (or "type": null) the type "function", rather than a 502', async () => {
    const calls = [
      { id: 'call_a', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_b', type: null, function: { name: 'weather', arguments: '{"city":"Rome"}' } },
    ];
    upstream.setBehavior({
      rawJson: {
        id: 'chatcmpl-up', object: 'chat.completion', created: 1, model: 'up-model',
        choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: calls }, finish_reason: 'tool_calls' }],
      },
    });
    const completion = await client.chat.completions.create(ask);
    expect(completion.choices[0]?.message.tool_calls).toEqual([
      { id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_b', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } },
    ]);
  });
});

describe("TGI's tool calls: arguments as an object, streamed calls not in an array", () => {
  const weather = [{ type: 'function' as const, function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

  it('a non-streamed call whose arguments are an object reaches the client with them as JSON text', async () => {
    upstream.setBehavior({
      rawJson: {
        id: '', object: 'chat.completion', created: 1, model: 'tgi',
        choices: [{ index: 0, message: { role: 'assistant', tool_calls: [{ id: '0', type: 'function', function: { description: null, name: 'weather', arguments: { city: 'Paris' } } }] }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
      },
    });
    const completion = await client.chat.completions.create({ ...ask, tools: weather });
    expect(completion.choices[0]?.finish_reason).toBe('tool_calls');
    expect(completion.choices[0]?.message.tool_calls).toMatchObject([{ id: '0', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }]);
  });

  it('a stream whose fragments carry the call as an object (name null, id "") is assembled by the stream helper', async () => {
    // As TGI 2.4 streams: every frame repeats the role, the call is an object, later fragments name nothing.
    const frame = (fn: Record<string, unknown>, finish: string | null = null): string =>
      `data: ${JSON.stringify({ object: 'chat.completion.chunk', id: '', created: 1, model: 'tgi', choices: [{ index: 0, delta: { role: 'assistant', tool_calls: { index: 0, id: '', type: 'function', function: fn } }, logprobs: null, finish_reason: finish }], usage: null })}\n\n`;
    upstream.setBehavior({
      rawSse: [frame({ name: 'weather', arguments: '{"city' }), frame({ name: null, arguments: '":"Par' }), frame({ name: null, arguments: 'is"}' }, 'eos_token'), 'data: [DONE]\n\n'],
    });
    const completion = await client.chat.completions.stream({ ...ask, tools: weather }).finalChatCompletion();
    const calls = completion.choices[0]?.message.tool_calls;
    expect(calls).toHaveLength(1);
    expect(calls?.[0]).toMatchObject({ type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } });
    expect(calls?.[0]?.id).toMatch(/^call_/);
    expect(completion.choices[0]?.finish_reason).toBe('tool_calls');

    // A whole call in one fragment, its arguments an object (llama.cpp's server did so for a while in 2026).
    upstream.setBehavior({ rawSse: [frame({ name: 'weather', arguments: { city: 'Rome' } }, 'tool_calls'), 'data: [DONE]\n\n'] });
    const whole = await client.chat.completions.stream({ ...ask, tools: weather }).finalChatCompletion();
    expect(whole.choices[0]?.message.tool_calls?.[0]?.function).toEqual({ name: 'weather', arguments: '{"city":"Rome"}' });
  });
});

describe('details SDKs notice', () => {
  it('an unknown model is a NotFoundError (404 model_not_found, param model), for chat and models.retrieve', async () => {
    const chat = await rejection(client.chat.completions.create({ ...ask, model: 'gpt-4o' }));
    expect(chat).toBeInstanceOf(OpenAI.NotFoundError);
    expect(chat).toMatchObject({ status: 404, code: 'model_not_found', param: 'model', type: 'invalid_request_error' });
    const retrieve = await rejection(client.models.retrieve('gpt-4o'));
    expect(retrieve).toBeInstanceOf(OpenAI.NotFoundError);
    expect(retrieve).toMatchObject({ code: 'model_not_found', param: 'model' });
    expect(upstream.requests).toHaveLength(0);
  });

  it.each([
    ['a content part without its text', [{ type: 'text' }], 'missing_required_parameter', 'messages[0].content[0].text'],
    ['an image detail OpenAI does not know', [{ type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'ultra' } }], 'invalid_value', 'messages[0].content[0].image_url.detail'],
    ['an audio part without its format', [{ type: 'input_audio', input_audio: { data: 'UklGRg==' } }], 'missing_required_parameter', 'messages[0].content[0].input_audio.format'],
  ])('%s is a BadRequestError whose param names the field inside the part, not the whole content', async (_, content, code, param) => {
    const error = await rejection(noRetry.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: content as never }] }));
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ code, param });
    expect(error.message).toContain(param);
    expect(upstream.requests).toHaveLength(0);
  });

  it('stop with more than 4 sequences names the limit; a non-string sequence is named by its index', async () => {
    const tooMany = await rejection(noRetry.chat.completions.create({ ...ask, stop: ['a', 'b', 'c', 'd', 'e'] }));
    expect(tooMany).toMatchObject({ status: 400, code: 'invalid_value', param: 'stop' });
    expect(tooMany.message).toContain('4');
    const notString = await rejection(noRetry.chat.completions.create({ ...ask, stop: ['a', 5 as never] }));
    expect(notString).toMatchObject({ status: 400, code: 'invalid_type', param: 'stop[1]' });
  });

  it('a revoked key is an AuthenticationError saying it was revoked, and when; a wrong key, that it is incorrect', async () => {
    const { token: revokedToken, key } = await server.createKey();
    await server.running.store.keys.revoke(key.id, Date.parse('2026-11-02T10:00:00.000Z'));
    const baseURL = `${server.url}/v1`;
    const revoked = await rejection(new OpenAI({ apiKey: revokedToken, baseURL, maxRetries: 0 }).chat.completions.create(ask));
    expect(revoked).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(revoked).toMatchObject({ status: 401, type: 'authentication_error', code: 'invalid_api_key', param: null });
    expect(revoked.message).toContain(`This API key (${key.prefix}) was revoked on 2026-11-02T10:00:00.000Z.`);
    const wrong = await rejection(new OpenAI({ apiKey: `${token}x`, baseURL, maxRetries: 0 }).models.list());
    expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(wrong).toMatchObject({ code: 'invalid_api_key' });
    expect(wrong.message).toContain('Incorrect API key provided.');
    expect(wrong.message).not.toContain('revoked');
  });

  it('a non-streamed answer that takes longer than the first-byte timeout to generate is answered (its headers come with it)', async () => {
    // Scaled down: svc's own upstream, first byte within 150 ms (60 s in production), all of it within 10 s.
    const patient = await startTestServer({
      upstream: createOpenAICompatibleUpstream({ baseUrl: upstream.url, timeoutMs: 10_000, firstByteTimeoutMs: 150 }),
      env: { SVC_UPSTREAM_THINKING_MODEL: 'o4-mini' },
    });
    try {
      const { token: patientToken } = await patient.createKey();
      const sdk = new OpenAI({ apiKey: patientToken, baseURL: `${patient.url}/v1`, maxRetries: 0 });
      // A reasoning model thinking before it answers: OpenAI sends nothing until the whole completion is ready.
      upstream.setBehavior({ delayMs: 400, answer: 'After some thought: 42.' });
      const res = await sdk.chat.completions.create({ ...ask, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect(res.choices[0]!.message.content).toBe('After some thought: 42.');
      expect(upstream.requests).toHaveLength(1);
      // A stream still gets its head within the first-byte timeout (an upstream that never starts is cut short).
      const streamed = await rejection(sdk.chat.completions.create({ ...ask, stream: true }));
      expect(streamed).toMatchObject({ status: 502, code: 'upstream_timeout' });
    } finally {
      await patient.close();
    }
  });

  it("stream_options without stream: true is a 400 naming it, in OpenAI's words; with stream, or null, it is taken", async () => {
    for (const stream of [undefined, false, null]) {
      const error = await rejection(noRetry.chat.completions.create({ ...ask, stream, stream_options: { include_usage: true } } as never));
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value', param: 'stream_options' });
      expect(error.message).toBe("400 The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    }
    expect(upstream.requests).toHaveLength(0);
    await noRetry.chat.completions.create({ ...ask, stream_options: null });
    const stream = await noRetry.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
    let usage: unknown;
    for await (const chunk of stream) usage ??= chunk.usage;
    expect(usage).toMatchObject({ total_tokens: expect.any(Number) });
  });

  it("null is \"not set\" for every parameter OpenAI documents as nullable; the others are refused naming the field, as OpenAI refuses them", async () => {
    // The nullable ones of the SDK's ChatCompletionCreateParams (generated from OpenAI's OpenAPI document).
    const nullable = {
      audio: null, frequency_penalty: null, logit_bias: null, logprobs: null, max_completion_tokens: null, max_tokens: null, metadata: null,
      modalities: null, n: null, prediction: null, presence_penalty: null, prompt_cache_key: null, reasoning_effort: null, safety_identifier: null,
      seed: null, service_tier: null, stop: null, store: null, stream: null, stream_options: null, temperature: null, top_logprobs: null,
      top_p: null, verbosity: null,
    };
    const completion = await noRetry.chat.completions.create({ ...ask, ...nullable });
    expect(completion.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    // Not forwarded (some upstreams refuse nulls); svc's defaults stand in for them.
    const sent = upstream.requests[0]!.body;
    const defaults = ['max_tokens', 'max_completion_tokens', 'temperature'];
    for (const key of Object.keys(nullable)) if (!defaults.includes(key)) expect(sent).not.toHaveProperty(key);
    // In the form this model takes (earlier tests here taught svc that it wants max_completion_tokens and no temperature).
    expect(sent.max_tokens ?? sent.max_completion_tokens).toBe(4096);
    // Not nullable in OpenAI's API (llama_index's `parallel_tool_calls: null` got OpenAI's 400): the same 400 here.
    for (const key of ['user', 'parallel_tool_calls', 'tools', 'tool_choice', 'response_format']) {
      const error = await rejection(noRetry.chat.completions.create({ ...ask, [key]: null } as never));
      expect(error).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_type', param: key });
      expect(error.message).toMatch(new RegExp(`Invalid type for '${key}': expected .*, but got null`));
    }
    expect(upstream.requests).toHaveLength(1);
  });

  it("a value past its bound is answered in OpenAI's words (what a client shows its user), with the field as param", async () => {
    const cases: Array<[object, string, string]> = [
      [{ messages: [] }, 'messages', "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."],
      [{ temperature: 3 }, 'temperature', "Invalid 'temperature': integer above maximum value. Expected a value <= 2, but got 3 instead."],
      [{ top_p: 1.5 }, 'top_p', "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 1.5 instead."],
      [{ max_tokens: 0 }, 'max_tokens', "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead."],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 instead."],
    ];
    for (const [fields, param, message] of cases) {
      const error = await rejection(noRetry.chat.completions.create({ ...ask, ...fields } as never));
      expect(error).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param });
      expect(error.message).toBe(`400 ${message}`);
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('models.retrieve("svc01") returns the model object', async () => {
    expect(await client.models.retrieve('svc01')).toEqual({ id: 'svc01', object: 'model', created: expect.any(Number), owned_by: 'svc' });
  });

  it('with include_usage every chunk before the usage chunk has usage null; fingerprint and service_tier on every chunk', async () => {
    upstream.setBehavior({ serviceTier: 'default' });
    const stream = await client.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });
    expect(last.system_fingerprint).toBe('fp_fake');
    for (const chunk of chunks.slice(0, -1)) {
      expect(chunk).toHaveProperty('usage', null);
      expect(chunk.system_fingerprint).toBe('fp_fake');
    }
    for (const chunk of chunks) expect(chunk.service_tier).toBe('default');
  });

  it('without include_usage chunks carry no usage key', async () => {
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    for await (const chunk of stream) expect(chunk).not.toHaveProperty('usage');
  });

  it("passes on the message's other fields of a non-streamed completion: annotations, audio, function_call", async () => {
    const annotations = [{ type: 'url_citation', url_citation: { url: 'https://example.com/', title: 'Example', start_index: 0, end_index: 5 } }];
    const audio = { id: 'audio_1', data: 'UklGRg==', expires_at: 1_900_000_000, transcript: 'Hello' };
    const function_call = { name: 'weather', arguments: '{"city":"Paris"}' };
    upstream.setBehavior({
      rawJson: {
        id: 'chatcmpl-up', object: 'chat.completion', created: 1, model: 'up-model',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hello', refusal: null, annotations, audio, function_call }, logprobs: null, finish_reason: 'stop' }],
      },
    });
    const completion = await client.chat.completions.create({ ...ask, modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } });
    expect(completion.choices[0]?.message).toEqual({ role: 'assistant', content: 'Hello', refusal: null, annotations, audio, function_call });
    expect(upstream.requests[0]?.body).toMatchObject({ modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } });
  });

  it("passes the upstream's service_tier on a non-streamed completion", async () => {
    upstream.setBehavior({ serviceTier: 'flex' });
    const completion = await client.chat.completions.create(ask);
    expect(completion.service_tier).toBe('flex');
    expect(completion.system_fingerprint).toBe('fp_fake');
  });

  it("svc's own 429 carries retry-after and retry-after-ms: the time until the window frees a request", async () => {
    const { token: limited } = await server.createKey({ rateLimitRpm: 1 });
    const limitedClient = new OpenAI({ apiKey: limited, baseURL: `${server.url}/v1`, maxRetries: 0 });
    await limitedClient.models.list();
    // The window opened at the first request; a second later less than 59 s of it are left.
    await delay(1_100);
    const error = await rejection(limitedClient.models.list());
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error.code).toBe('rate_limit_exceeded');
    const ms = Number(error.headers?.get('retry-after-ms'));
    const seconds = Number(error.headers?.get('retry-after'));
    expect(ms).toBeGreaterThan(0);
    expect(ms).toBeLessThanOrEqual(58_900);
    expect(seconds).toBe(Math.ceil(ms / 1000));
    expect(seconds).toBeLessThanOrEqual(59);
  });

  it('aborting a stream mid-way settles the call every time and closes the upstream request', async () => {
    upstream.setBehavior({ answer: Array.from({ length: 200 }, (_, i) => `word${i}`).join(' '), trickle: { intervalMs: 20 } });
    for (let round = 0; round < 5; round++) {
      upstream.requests.length = 0;
      const controller = new AbortController();
      const stream = await client.chat.completions.create({ ...ask, stream: true }, { signal: controller.signal });
      let seen = 0;
      // The SDK's stream iterator ends quietly when its signal aborts (no APIUserAbortError mid-stream).
      for await (const _chunk of stream) {
        if (++seen === 3) controller.abort();
      }
      expect(seen).toBe(3);
      const aborted = await upstream.waitForAbort();
      expect(aborted.body.stream).toBe(true);
    }
    // Aborted while svc still waits for the upstream's headers: create() rejects, the upstream request is closed.
    upstream.setBehavior({ hang: true });
    for (let round = 0; round < 3; round++) {
      upstream.requests.length = 0;
      const controller = new AbortController();
      const pending = client.chat.completions.create({ ...ask, stream: true }, { signal: controller.signal });
      await until(() => upstream.requests.length === 1);
      controller.abort();
      await expect(pending).rejects.toBeInstanceOf(OpenAI.APIUserAbortError);
      await upstream.waitForAbort();
    }
    // The server still answers at once afterwards.
    upstream.setBehavior({});
    expect((await client.chat.completions.create(ask)).choices[0]!.message.content).toBe('Hello from the fake upstream.');
  });

  it('breaking out of a stream (the SDK aborts it) settles every time, from the upstream and from the offline model', async () => {
    upstream.setBehavior({ answer: Array.from({ length: 200 }, (_, i) => `word${i}`).join(' '), trickle: { intervalMs: 20 } });
    const offline = await startTestServer();
    try {
      const { token: offlineToken } = await offline.createKey();
      const offlineClient = new OpenAI({ apiKey: offlineToken, baseURL: `${offline.url}/v1`, maxRetries: 0 });
      const document = Array.from({ length: 400 }, (_, i) => `Sentence ${i} says the tower has ${i} steps.`).join(' ');
      for (const [name, sdk] of [['upstream', client], ['offline', offlineClient]] as const) {
        for (let round = 0; round < 5; round++) {
          upstream.requests.length = 0;
          const stream = await sdk.chat.completions.create({
            model: 'svc01',
            stream: true,
            messages: [{ role: 'system', content: document }, { role: 'user', content: 'Summarise the document.' }],
          });
          let seen = 0;
          for await (const _chunk of stream) {
            if (++seen === 3) break;
          }
          expect(seen, name).toBe(3);
          if (name === 'upstream') await upstream.waitForAbort();
        }
        const after = await sdk.chat.completions.create({ ...ask, messages: [{ role: 'system', content: 'Hello is a greeting.' }, ...ask.messages] });
        expect(after.choices[0]!.message.content, name).toBeTruthy();
      }
    } finally {
      await offline.close();
    }
  });
});
