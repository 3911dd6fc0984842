import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { streamText, tool } from 'ai';
import { z } from 'zod';
import { type FakeUpstream } from './support/fake-upstream.js';
import type { TestServer } from './support/test-server.js';
import type { Receiver } from './support/webhooks.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';

/**
 * svc in front of hosted OpenAI-compatible providers other than OpenAI (Gemini, Anthropic, Azure, Groq, Mistral,
 * DeepSeek, OpenRouter, …), each quirk as the provider documents or sends it, through the real server and a real client.
 */

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let client: OpenAI;
let token: string;
let rig: AuditedServer;

beforeAll(async () => {
  rig = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'gemini-2.5-flash', SVC_UPSTREAM_THINKING_MODEL: 'gemini-2.5-pro' });
  ({ upstream, server, receiver, client, token } = rig);
});

afterAll(() => rig?.close());

beforeEach(() => {
  upstream.setBehavior({});
  upstream.requests.length = 0;
});

const ask = { model: 'svc01', messages: [{ role: 'user' as const, content: 'Hi' }] };

describe('error bodies in a provider\'s own shape', () => {
  const cases = [
    {
      provider: 'Gemini (a one-element array)',
      status: 400,
      body: [{ error: { code: 400, message: "Function calling with a response mime type: 'application/json' is unsupported", status: 'INVALID_ARGUMENT' } }],
      expected: { message: "400 Function calling with a response mime type: 'application/json' is unsupported", code: 'upstream_invalid_request', param: null },
    },
    {
      provider: "Anthropic (its own envelope, type 'error')",
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message: 'n: only n=1 is supported' } },
      expected: { message: '400 n: only n=1 is supported', code: 'upstream_invalid_request', param: null },
    },
    {
      provider: 'Mistral (a validation object as the message)',
      status: 422,
      body: { object: 'error', message: { detail: [{ type: 'extra_forbidden', loc: ['body', 'stop'], msg: 'Extra inputs are not permitted', input: [] }] }, type: 'invalid_request_error', param: null, code: null },
      expected: { message: '400 stop: Extra inputs are not permitted', code: 'extra_forbidden', param: 'stop' },
    },
    {
      provider: 'FastAPI (a bare detail list)',
      status: 422,
      body: { detail: [{ type: 'string_type', loc: ['body', 'messages', 0, 'content'], msg: 'Input should be a valid string' }] },
      expected: { message: '400 messages[0].content: Input should be a valid string', code: 'string_type', param: 'messages[0].content' },
    },
  ];

  for (const { provider, status, body, expected } of cases) {
    it(`${provider}: the client gets the upstream's message, streamed or not`, async () => {
      upstream.setBehavior({ status, errorBody: body });
      const plain = await client.chat.completions.create(ask).catch((err: unknown) => err);
      expect(plain).toBeInstanceOf(OpenAI.BadRequestError);
      expect(plain).toMatchObject({ status: 400, type: 'invalid_request_error', ...expected });
      const streamed = await client.chat.completions.create({ ...ask, stream: true }).catch((err: unknown) => err);
      expect(streamed).toMatchObject({ status: 400, ...expected });
    });
  }

  it('Gemini: a 429 in its array shape keeps its message and retry-after', async () => {
    upstream.setBehavior({ status: 429, retryAfter: '7', errorBody: [{ error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' } }] });
    const err = await client.chat.completions.create(ask).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err).toMatchObject({ code: 'upstream_rate_limited', message: '429 Upstream rate limit reached: Resource has been exhausted (e.g. check quota).' });
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
  });
});

describe('fields a provider refuses', () => {
  it("Mistral: stream_options (svc's own, for usage) and store are left out once refused, and from then on", async () => {
    upstream.setBehavior({ refuseFields: ['stream_options', 'store'] });
    const stream = await client.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    let id = '';
    for await (const chunk of stream) {
      id = chunk.id;
      text += chunk.choices[0]?.delta.content ?? '';
      usage ??= chunk.usage;
    }
    expect(text).toBe('Hello from the fake upstream.');
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    expect(upstream.requests.map((r) => 'stream_options' in r.body)).toEqual([true, false]);
    const audit = await delivered(id);
    expect(audit).toMatchObject({ status_code: 200, response_text: 'Hello from the fake upstream.' });
    expect(audit.output_tokens).toBeGreaterThan(0);

    upstream.requests.length = 0;
    const again = await client.chat.completions.create({ ...ask, stream: true });
    for await (const _ of again);
    expect(upstream.requests).toHaveLength(1);

    upstream.requests.length = 0;
    const stored = await client.chat.completions.create({ ...ask, store: true, metadata: { app: 'demo' } });
    expect(stored.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    expect(upstream.requests.map((r) => 'store' in r.body)).toEqual([true, false]);
  });

  it("Gemini: store and metadata, refused as names it does not know, are left out once refused (the thinking model learns for itself)", async () => {
    upstream.setBehavior({ refuseFields: ['store', 'metadata'], refuseFieldsAs: 'gemini' });
    const thinking = { ...ask, store: true, metadata: { app: 'demo' }, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming;
    const res = await client.chat.completions.create(thinking);
    expect(res.choices[0]!.message.content).toBe('Hello from the fake upstream.');
    expect(upstream.requests.map((r) => [r.body.model, 'store' in r.body, 'metadata' in r.body])).toEqual([
      ['gemini-2.5-pro', true, true],
      ['gemini-2.5-pro', false, true],
      ['gemini-2.5-pro', false, false],
    ]);
  });

  it('Gemini: a refused name svc does not leave out comes back as a 400 naming it in param', async () => {
    upstream.setBehavior({ refuseFields: ['prediction'], refuseFieldsAs: 'gemini' });
    const err = await client.chat.completions.create({ ...ask, prediction: { type: 'content', content: 'Hi' } }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, param: 'prediction', message: '400 Invalid JSON payload received. Unknown name "prediction": Cannot find field.' });
    expect(upstream.requests).toHaveLength(1);
  });

  it('a refused field svc does not leave out comes back as a 400 naming it', async () => {
    upstream.setBehavior({ refuseFields: ['parallel_tool_calls'] });
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object', properties: {} } } }];
    const err = await client.chat.completions.create({ ...ask, tools, parallel_tool_calls: false }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, code: 'extra_forbidden', param: 'parallel_tool_calls', message: '400 parallel_tool_calls: Extra inputs are not permitted' });
    expect(upstream.requests).toHaveLength(1);
  });
});

/** The webhook payload of the request `id`. */
async function delivered(id: string): Promise<Record<string, unknown>> {
  const all = await receiver.waitFor((deliveries) => deliveries.some((d) => JSON.parse(d.raw.toString()).request_id === id));
  return JSON.parse(all.find((d) => JSON.parse(d.raw.toString()).request_id === id)!.raw.toString()) as Record<string, unknown>;
}

describe("svc's own upstream key", () => {
  it("Gemini's 400 for a wrong key is svc's configuration: 502 upstream_error, not retried, not a 400 the client would blame on its own key", async () => {
    upstream.setBehavior({
      status: 400,
      errorBody: [
        {
          error: {
            code: 400,
            message: 'API key not valid. Please pass a valid API key.',
            status: 'INVALID_ARGUMENT',
            details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' }],
          },
        },
      ],
    });
    const retrying = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 2 });
    const err = await retrying.chat.completions.create(ask).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err).toMatchObject({ status: 502, type: 'upstream_error', code: 'upstream_error', message: '502 Upstream responded with HTTP 400: API key not valid. Please pass a valid API key.' });
    expect(upstream.requests).toHaveLength(1);
  });

  it("OpenRouter's 402 (no credits) is svc's account: 502 upstream_error with its message, not retried", async () => {
    upstream.setBehavior({ status: 402, errorBody: { error: { code: 402, message: 'Insufficient credits', metadata: {} } } });
    const retrying = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 2 });
    const err = await retrying.chat.completions.create(ask).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 502, code: 'upstream_error', message: '502 Upstream responded with HTTP 402: Insufficient credits' });
    expect(upstream.requests).toHaveLength(1);
  });
});

describe('what a later turn needs is kept', () => {
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const call = { id: 'function-call-1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' }, extra_content: { google: { thought_signature: 'c2lnbmF0dXJl' } } };
  const head = { id: 'x', object: 'chat.completion.chunk', created: 1, model: 'gemini-2.5-flash' };

  it("Gemini's thought signature on a tool call reaches the client, streamed or not, and goes back upstream with the next turn", async () => {
    upstream.setBehavior({
      rawJson: { id: 'x', object: 'chat.completion', created: 1, model: 'gemini-2.5-flash', choices: [{ index: 0, message: { role: 'assistant', tool_calls: [call] }, finish_reason: 'tool_calls' }] },
    });
    const plain = await client.chat.completions.create({ ...ask, tools });
    expect(plain.choices[0]!.message.tool_calls).toEqual([call]);

    upstream.setBehavior({
      rawSse: [`data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: 'assistant', tool_calls: [call] }, finish_reason: 'tool_calls' }] })}\n\ndata: [DONE]\n\n`],
    });
    const stream = await client.chat.completions.create({ ...ask, tools, stream: true });
    const deltas: unknown[] = [];
    for await (const chunk of stream) deltas.push(...(chunk.choices[0]?.delta.tool_calls ?? []));
    expect(deltas).toEqual([{ index: 0, ...call }]);

    upstream.setBehavior({});
    upstream.requests.length = 0;
    const assistant = { role: 'assistant', content: null, tool_calls: [call] } as OpenAI.ChatCompletionAssistantMessageParam;
    await client.chat.completions.create({ model: 'svc01', tools, messages: [{ role: 'user', content: 'Weather in Paris?' }, assistant, { role: 'tool', tool_call_id: call.id, content: 'sunny' }] });
    expect((upstream.requests[0]!.body.messages as Array<Record<string, unknown>>)[1]!.tool_calls).toEqual([call]);
  });

  it("Gemini's 'stop' after a tool call is told as 'tool_calls', streamed (the openai SDK, the AI SDK) or not, so agent loops run the tool", async () => {
    const finish = (reason: string): string[] => [
      `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: 'assistant', tool_calls: [{ ...call, index: 0 }] }, finish_reason: null }] })}\n\n`,
      `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: {}, finish_reason: reason }] })}\n\ndata: [DONE]\n\n`,
    ];
    upstream.setBehavior({ rawSse: finish('stop') });
    const stream = await client.chat.completions.create({ ...ask, tools, stream: true });
    const reasons: unknown[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.finish_reason) reasons.push(chunk.choices[0].finish_reason);
    expect(reasons).toEqual(['tool_calls']);

    upstream.setBehavior({ rawSse: finish('stop') });
    const openai = createOpenAI({ apiKey: token, baseURL: `${server.url}/v1` });
    const result = streamText({ model: openai.chat('svc01'), prompt: 'Weather in Paris?', tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }) }) } });
    expect(await result.finishReason).toBe('tool-calls');
    expect((await result.toolCalls).map((c) => c.input)).toEqual([{ city: 'Paris' }]);

    upstream.setBehavior({
      rawJson: { id: 'x', object: 'chat.completion', created: 1, model: 'gemini-2.0-flash', choices: [{ index: 0, message: { role: 'assistant', tool_calls: [call] }, finish_reason: 'stop' }] },
    });
    const plain = await client.chat.completions.create({ ...ask, tools });
    expect(plain.choices[0]!.finish_reason).toBe('tool_calls');

    upstream.setBehavior({ rawSse: [`data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: 'Sunny.' }, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`] });
    const text = await client.chat.completions.create({ ...ask, tools, stream: true });
    const textReasons: unknown[] = [];
    for await (const chunk of text) if (chunk.choices[0]?.finish_reason) textReasons.push(chunk.choices[0].finish_reason);
    expect(textReasons).toEqual(['stop']);
  });

  it("DeepSeek's reasoning_content on an assistant turn with tool calls goes back upstream (its thinking mode answers 400 without it)", async () => {
    const assistant = { role: 'assistant', content: null, reasoning_content: 'Need the weather tool.', tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] };
    await client.chat.completions.create({ model: 'svc01', tools, messages: [{ role: 'user', content: 'Weather?' }, assistant as never, { role: 'tool', tool_call_id: 'call_0', content: 'sunny' }] });
    expect((upstream.requests[0]!.body.messages as unknown[])[1]).toEqual(assistant);
  });

  it("OpenRouter: reasoning becomes reasoning_content, reasoning_details pass as they came", async () => {
    const details = [{ type: 'reasoning.encrypted', data: 'ENC', id: 'r1', format: 'openai-responses-v1', index: 0 }];
    upstream.setBehavior({
      rawJson: { id: 'gen-1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi.', reasoning: 'Greet.', reasoning_details: details }, finish_reason: 'stop', native_finish_reason: 'STOP' }] },
    });
    const res = await client.chat.completions.create(ask);
    expect(res.choices[0]!.message).toMatchObject({ content: 'Hi.', reasoning_content: 'Greet.', reasoning_details: details });
  });
});

describe('stream frames of hosted providers', () => {
  const head = { id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm' };
  const frame = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;

  it("Azure's first frame (choices [], empty id and model, prompt_filter_results) and a frame without delta do not reach or break the client", async () => {
    upstream.setBehavior({
      rawSse: [
        frame({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }] }),
        frame({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello' }, finish_reason: null }] }),
        frame({ ...head, choices: [{ index: 0, finish_reason: null, content_filter_offsets: { check_offset: 5 } }] }),
        frame({ ...head, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
        'data: [DONE]\n\n',
      ],
    });
    const openai = createOpenAI({ apiKey: token, baseURL: `${server.url}/v1` });
    const errors: unknown[] = [];
    const result = streamText({ model: openai.chat('svc01'), prompt: 'Hi', onError: ({ error }) => void errors.push(error) });
    expect(await result.text).toBe('Hello');
    expect(await result.finishReason).toBe('stop');
    expect(errors).toEqual([]);
  });

  it("Groq: the token counts of x_groq.usage (its finish frame's) are the stream's usage, for the client and the webhook", async () => {
    const groq = { prompt_tokens: 11, completion_tokens: 22, total_tokens: 33, queue_time: 0.02, total_time: 0.1 };
    const sse = (): string[] => [
      frame({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: 'Hel' }, logprobs: null, finish_reason: null }], x_groq: { id: 'req_1' } }),
      frame({ ...head, choices: [{ index: 0, delta: { content: 'lo' }, logprobs: null, finish_reason: null }] }),
      frame({ ...head, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }], x_groq: { id: 'req_1', usage: groq } }),
      'data: [DONE]\n\n',
    ];
    upstream.setBehavior({ rawSse: sse() });
    const completion = await client.chat.completions.stream({ ...ask, stream_options: { include_usage: true } }).finalChatCompletion();
    expect(completion.choices[0]!.message.content).toBe('Hello');
    expect(completion.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 22, total_tokens: 33 });
    const got = await receiver.waitFor((all) => all.some((d) => d.raw.toString().includes(completion.id)));
    const payload = JSON.parse(got.find((d) => d.raw.toString().includes(completion.id))!.raw.toString('utf8')) as Record<string, unknown>;
    expect(payload).toMatchObject({ input_tokens: 11, output_tokens: 22, total_tokens: 33 });

    upstream.setBehavior({ rawSse: sse() });
    const openai = createOpenAI({ apiKey: token, baseURL: `${server.url}/v1` });
    const result = streamText({ model: openai.chat('svc01'), prompt: 'Hi', maxRetries: 0 });
    expect(await result.text).toBe('Hello');
    expect(await result.usage).toMatchObject({ inputTokens: 11, outputTokens: 22, totalTokens: 33 });
  });

  it("Mistral's reasoning models: content as thinking and text parts becomes reasoning_content and content, streamed or not; the webhook has the text", async () => {
    const thinking = (text: string) => ({ type: 'thinking', thinking: [{ type: 'text', text }] });
    upstream.setBehavior({
      rawSse: [
        frame({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }),
        frame({ ...head, choices: [{ index: 0, delta: { content: [thinking('The user greets. ')] }, finish_reason: null }] }),
        frame({ ...head, choices: [{ index: 0, delta: { content: [thinking('Greet back.')] }, finish_reason: null }] }),
        frame({ ...head, choices: [{ index: 0, delta: { content: [{ type: 'text', text: 'Hello' }] }, finish_reason: null }] }),
        frame({ ...head, choices: [{ index: 0, delta: { content: ' there.' }, finish_reason: 'stop' }] }),
        'data: [DONE]\n\n',
      ],
    });
    const stream = client.chat.completions.stream(ask);
    // The stream helper keeps only the last delta's reasoning_content (a field it does not know): the deltas hold it all.
    let reasoning = '';
    stream.on('chunk', (chunk) => (reasoning += (chunk.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? ''));
    const streamed = await stream.finalChatCompletion();
    expect(streamed.choices[0]!.message.content).toBe('Hello there.');
    expect(reasoning).toBe('The user greets. Greet back.');
    const got = await receiver.waitFor((all) => all.some((d) => d.raw.toString().includes(streamed.id)));
    expect(JSON.parse(got.find((d) => d.raw.toString().includes(streamed.id))!.raw.toString('utf8'))).toMatchObject({ status_code: 200, response_text: 'Hello there.' });

    upstream.setBehavior({
      rawJson: {
        ...head,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: [thinking('The user greets.'), { type: 'text', text: 'Hello there.' }] }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 },
      },
    });
    const plain = await client.chat.completions.create(ask);
    expect(plain.choices[0]!.message).toMatchObject({ content: 'Hello there.', reasoning_content: 'The user greets.' });
  });

  it("OpenRouter: ': OPENROUTER PROCESSING' comments are skipped, an error frame mid-stream ends the stream with its message", async () => {
    upstream.setBehavior({
      rawSse: [
        ': OPENROUTER PROCESSING\n\n',
        frame({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: 'Hel' }, finish_reason: null }] }),
        frame({ ...head, error: { code: 502, message: 'Provider disconnected' }, choices: [{ index: 0, delta: { content: '' }, finish_reason: 'error' }] }),
      ],
    });
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    let text = '';
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().catch((e: unknown) => e);
    expect(text).toBe('Hel');
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as Error).message).toContain('Provider disconnected');
  });
});
