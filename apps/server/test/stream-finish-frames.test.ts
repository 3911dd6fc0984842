import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { ChatOpenAI } from '@langchain/openai';
import { createOpenAI } from '@ai-sdk/openai';
import { streamText } from 'ai';
import { SvcResultSchema } from '@svc/protocol';
import { chunkFrame, type FakeUpstream } from './support/fake-upstream.js';
import type { TestServer } from './support/test-server.js';
import type { Receiver } from './support/webhooks.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';

/**
 * The shapes upstream streams end in, read through the openai SDK, the AI SDK and LangChain: a finish sent
 * twice (vLLM, TGI, proxies), usage before the finish, content and tool calls in the finish frame, and so on.
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889.';
const ANSWER = 'It was completed in 1889.';
const messages = [
  { role: 'system' as const, content: DOC },
  { role: 'user' as const, content: 'When was the Eiffel Tower completed?' },
];
const USAGE = { prompt_tokens: 21, completion_tokens: 7, total_tokens: 28 };

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let token: string;
let baseURL: string;
let client: OpenAI;
let rig: AuditedServer;

beforeAll(async () => {
  rig = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'gpt-4o' });
  ({ upstream, server, receiver, token, baseURL, client } = rig);
});

afterAll(() => rig?.close());

beforeEach(() => {
  upstream.setBehavior({ answer: ANSWER });
});


/** The text, then `finish_reason: "stop"`, then the finish again in a frame of its own with usage. */
function twiceFinished(): string[] {
  return [
    chunkFrame([{ index: 0, delta: { role: 'assistant', content: 'It was completed ' }, logprobs: null, finish_reason: null }]) +
      chunkFrame([{ index: 0, delta: { content: 'in 1889.' }, logprobs: null, finish_reason: 'stop' }]) +
      chunkFrame([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }], { usage: USAGE }) +
      'data: [DONE]\n\n',
  ];
}

/** The webhook deliveries of request `id` (after the receiver got at least one). */
async function deliveriesOf(id: string): Promise<Array<Record<string, unknown>>> {
  const of = (all: Array<{ raw: Buffer }>) => all.map((d) => JSON.parse(d.raw.toString('utf8')) as Record<string, unknown>).filter((d) => d.request_id === id);
  await receiver.waitFor((all) => of(all).length > 0);
  // A second delivery would follow the first at once: one more event-loop round trip through the server.
  await fetch(`${server.url}/healthz`).catch(() => undefined);
  return of(receiver.received);
}

describe('a finish sent twice (text + stop, then an empty delta with stop again and usage)', () => {
  it('openai: one finish chunk with svc; the message, usage and one webhook are right', async () => {
    upstream.setBehavior({ rawSse: twiceFinished() });
    const finishes: Array<{ svc: unknown }> = [];
    const stream = client.chat.completions.stream({ model: 'svc01', messages, stream_options: { include_usage: true } });
    stream.on('chunk', (chunk) => {
      for (const c of chunk.choices) if (c.finish_reason) finishes.push({ svc: (chunk as { svc?: unknown }).svc });
    });
    const completion = await stream.finalChatCompletion();
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0]!.message.content).toBe(ANSWER);
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.usage).toMatchObject(USAGE);
    expect(finishes).toHaveLength(1);
    expect(SvcResultSchema.parse(finishes[0]!.svc)).toMatchObject({ checked: true, grounded: true });
    const deliveries = await deliveriesOf(completion.id);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ response_text: ANSWER, status_code: 200, streaming: true });
  });

  it('AI SDK streamText: the text, one finish, the finish reason and usage', async () => {
    upstream.setBehavior({ rawSse: twiceFinished() });
    const openai = createOpenAI({ apiKey: token, baseURL });
    const result = streamText({ model: openai.chat('svc01'), messages, maxRetries: 0 });
    const finishes: string[] = [];
    let text = '';
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'finish-step') finishes.push(part.finishReason);
    }
    expect(text).toBe(ANSWER);
    expect(finishes).toEqual(['stop']);
    expect(await result.finishReason).toBe('stop');
    const usage = await result.usage;
    expect([usage.inputTokens, usage.outputTokens]).toEqual([USAGE.prompt_tokens, USAGE.completion_tokens]);
    const id = (await result.response).id;
    expect(await deliveriesOf(id)).toHaveLength(1);
  });

  it('LangChain stream: the text, svc on one chunk only, usage', async () => {
    upstream.setBehavior({ rawSse: twiceFinished() });
    const llm = new ChatOpenAI({ model: 'svc01', apiKey: token, configuration: { baseURL }, maxRetries: 0, __includeRawResponse: true, streamUsage: true });
    let text = '';
    let withSvc = 0;
    let usage: { input_tokens: number; output_tokens: number } | undefined;
    let id = '';
    for await (const chunk of await llm.stream(messages)) {
      text += typeof chunk.content === 'string' ? chunk.content : '';
      const raw = chunk.additional_kwargs.__raw_response as { svc?: unknown; id?: string } | undefined;
      if (raw?.id) id = raw.id;
      if (raw?.svc !== undefined) withSvc += 1;
      if (chunk.usage_metadata) usage = chunk.usage_metadata;
    }
    expect(text).toBe(ANSWER);
    expect(withSvc).toBe(1);
    expect(usage).toMatchObject({ input_tokens: USAGE.prompt_tokens, output_tokens: USAGE.completion_tokens });
    expect(await deliveriesOf(id)).toHaveLength(1);
  });
});

describe('tool calls with an empty id (older Gemini models)', () => {
  const tools = ['get_weather', 'get_time'].map((name) => ({ type: 'function' as const, function: { name, parameters: { type: 'object', properties: { city: { type: 'string' } } } } }));
  const geminiCall = (name: string) => ({ id: '', type: 'function', function: { name, arguments: '{"city":"Paris"}' } });
  const head = { id: 'g', object: 'chat.completion.chunk', created: 1, model: 'gemini-1.5-flash' };
  /** Gemini's stream: each call whole in a frame of its own, without `index`, `id: ""`; then `stop`. */
  const geminiStream = (): string[] => [
    `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: 'assistant', tool_calls: [geminiCall('get_weather')] } }] })}\n\n` +
      `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { tool_calls: [geminiCall('get_time')] }, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`,
  ];
  const geminiJson = () => ({
    id: 'g',
    object: 'chat.completion',
    created: 1,
    model: 'gemini-1.5-flash',
    choices: [{ index: 0, message: { role: 'assistant', tool_calls: [geminiCall('get_weather'), geminiCall('get_time'), { ...geminiCall('get_time'), id: 'kept-1' }] }, finish_reason: 'stop' }],
  });

  it('openai: streamed and not, each call gets its own call_… id; an id the upstream sent is kept', async () => {
    upstream.setBehavior({ rawSse: geminiStream() });
    const streamed = await client.chat.completions.stream({ model: 'svc01', messages, tools }).finalChatCompletion();
    const calls = streamed.choices[0]!.message.tool_calls!.map((c) => (c.type === 'function' ? { id: c.id, name: c.function.name, args: c.function.arguments } : null));
    expect(calls.map((c) => [c!.name, c!.args])).toEqual([
      ['get_weather', '{"city":"Paris"}'],
      ['get_time', '{"city":"Paris"}'],
    ]);
    for (const c of calls) expect(c!.id).toMatch(/^call_[A-Za-z0-9]{24}$/);
    expect(new Set(calls.map((c) => c!.id)).size).toBe(2);
    expect(streamed.choices[0]!.finish_reason).toBe('tool_calls');

    upstream.setBehavior({ rawJson: geminiJson() });
    const plain = await client.chat.completions.create({ model: 'svc01', messages, tools });
    const ids = plain.choices[0]!.message.tool_calls!.map((c) => c.id);
    expect(ids[0]).toMatch(/^call_[A-Za-z0-9]{24}$/);
    expect(ids[1]).toMatch(/^call_[A-Za-z0-9]{24}$/);
    expect(ids[0]).not.toBe(ids[1]);
    expect(ids[2]).toBe('kept-1');
  });

  it("AI SDK: the tools' results go back upstream under the ids of their calls", async () => {
    const openai = createOpenAI({ apiKey: token, baseURL });
    upstream.requests.length = 0;
    upstream.nextBehavior({ rawSse: geminiStream() });
    upstream.nextBehavior({ answer: 'Sunny, noon.' });
    const { z } = await import('zod');
    const { tool, stepCountIs } = await import('ai');
    const result = streamText({
      model: openai.chat('svc01'),
      messages,
      maxRetries: 0,
      stopWhen: stepCountIs(2),
      tools: {
        get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => 'sunny' }),
        get_time: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => 'noon' }),
      },
    });
    expect(await result.text).toBe('Sunny, noon.');
    const turn = upstream.requests[1]!.body.messages as Array<{ role: string; tool_calls?: Array<{ id: string; function: { name: string } }>; tool_call_id?: string; content: unknown }>;
    const assistant = turn.find((m) => m.role === 'assistant')!;
    const results = turn.filter((m) => m.role === 'tool');
    expect(assistant.tool_calls!.map((c) => c.function.name)).toEqual(['get_weather', 'get_time']);
    expect(results.map((m) => m.tool_call_id)).toEqual(assistant.tool_calls!.map((c) => c.id));
    expect(new Set(results.map((m) => m.tool_call_id)).size).toBe(2);
    // svc's ids (the AI SDK makes up ids of its own for blank ones, in another form).
    for (const m of results) expect(m.tool_call_id).toMatch(/^call_[A-Za-z0-9]{24}$/);
    expect(results.map((m) => m.content)).toEqual(['sunny', 'noon']);
  });
});

describe("finish reasons outside OpenAI's set", () => {
  const cases: Array<[string, string, string]> = [
    // upstream's, OpenAI's, the AI SDK's
    ['eos', 'stop', 'stop'],
    ['end_turn', 'stop', 'stop'],
    ['STOP', 'stop', 'stop'],
    ['MAX_TOKENS', 'length', 'length'],
    ['SAFETY', 'content_filter', 'content-filter'],
    ['content_filter', 'content_filter', 'content-filter'],
    ['function_call', 'function_call', 'tool-calls'],
  ];
  const sse = (reason: string): string[] => [
    chunkFrame([{ index: 0, delta: { role: 'assistant', content: ANSWER }, finish_reason: null }]) + chunkFrame([{ index: 0, delta: {}, finish_reason: reason }], { usage: USAGE }) + 'data: [DONE]\n\n',
  ];

  it.each(cases)('%s: openai streamed and not, and the AI SDK, read %s', async (reason, openaiReason, aiReason) => {
    upstream.setBehavior({ rawSse: sse(reason) });
    const streamed = await client.chat.completions.stream({ model: 'svc01', messages }).finalChatCompletion();
    expect(streamed.choices[0]!.finish_reason).toBe(openaiReason);
    expect(streamed.choices[0]!.message.content).toBe(ANSWER);

    upstream.setBehavior({ rawJson: { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: reason }], usage: USAGE } });
    const plain = await client.chat.completions.create({ model: 'svc01', messages });
    expect(plain.choices[0]!.finish_reason).toBe(openaiReason);

    upstream.setBehavior({ rawSse: sse(reason) });
    const openai = createOpenAI({ apiKey: token, baseURL });
    const result = streamText({ model: openai.chat('svc01'), prompt: 'When was the Eiffel Tower completed?', maxRetries: 0 });
    await result.consumeStream();
    expect(await result.finishReason).toBe(aiReason);
  });

  it('MAX_TOKENS through the Responses API is an incomplete response (max_output_tokens)', async () => {
    upstream.setBehavior({ rawSse: sse('MAX_TOKENS') });
    const final = await client.responses.stream({ model: 'svc01', input: 'When was the Eiffel Tower completed?' }).finalResponse();
    expect(final.status).toBe('incomplete');
    expect(final.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(final.output_text).toBe(ANSWER);
  });
});

describe('choice indexes that start at 1', () => {
  const fromOne = (): string[] => [
    chunkFrame([{ index: 1, delta: { role: 'assistant', content: 'It was completed ' }, finish_reason: null }]) +
      chunkFrame([{ index: 1, delta: { content: 'in 1889.' }, finish_reason: null }]) +
      chunkFrame([{ index: 1, delta: {}, finish_reason: 'stop' }], { usage: USAGE }) +
      'data: [DONE]\n\n',
  ];

  it('openai: the stream helper gets choice 0 with the answer, checked, and the audit has its text', async () => {
    upstream.setBehavior({ rawSse: fromOne() });
    const finishes: unknown[] = [];
    const stream = client.chat.completions.stream({ model: 'svc01', messages });
    stream.on('chunk', (chunk) => {
      for (const c of chunk.choices) if (c.finish_reason) finishes.push((chunk as { svc?: unknown }).svc);
    });
    const completion = await stream.finalChatCompletion();
    expect(completion.choices.map((c) => [c.index, c.message.content, c.finish_reason])).toEqual([[0, ANSWER, 'stop']]);
    expect(finishes).toHaveLength(1);
    expect(SvcResultSchema.parse(finishes[0])).toMatchObject({ checked: true, grounded: true });
    const deliveries = await deliveriesOf(completion.id);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ response_text: ANSWER, grounding_checked: true });
  });

  it("LangChain: one answer, finish_reason 'stop'", async () => {
    upstream.setBehavior({ rawSse: fromOne() });
    const llm = new ChatOpenAI({ model: 'svc01', apiKey: token, configuration: { baseURL }, maxRetries: 0 });
    let text = '';
    const reasons: unknown[] = [];
    for await (const chunk of await llm.stream(messages)) {
      text += typeof chunk.content === 'string' ? chunk.content : '';
      if (chunk.response_metadata.finish_reason) reasons.push(chunk.response_metadata.finish_reason);
    }
    expect(text).toBe(ANSWER);
    expect(reasons).toEqual(['stop']);
  });
});

describe('n: 2 from a server that numbers choices from 1', () => {
  const OTHER = 'It opened in 1889.';
  /** Choice 2 opens before choice 1, as servers that run choices in parallel may send them. */
  const streamed = (): string[] => [
    chunkFrame([{ index: 2, delta: { role: 'assistant', content: 'It opened ' }, finish_reason: null }]) +
      chunkFrame([{ index: 1, delta: { role: 'assistant', content: 'It was completed ' }, finish_reason: null }]) +
      chunkFrame([{ index: 1, delta: { content: 'in 1889.' }, finish_reason: 'stop' }]) +
      chunkFrame([{ index: 2, delta: { content: 'in 1889.' }, finish_reason: 'stop' }]) +
      chunkFrame([], { usage: USAGE }) +
      'data: [DONE]\n\n',
  ];
  const whole = {
    id: 'up',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [
      { index: 1, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' },
      { index: 2, message: { role: 'assistant', content: OTHER }, finish_reason: 'stop' },
    ],
    usage: USAGE,
  };

  it('openai: streamed and not, choice 0 is the first of the upstream\'s, choice 1 the second; svc checks and audits choice 0', async () => {
    upstream.setBehavior({ rawJson: whole });
    const plain = await client.chat.completions.create({ model: 'svc01', messages, n: 2 });
    upstream.setBehavior({ rawSse: streamed() });
    const stream = client.chat.completions.stream({ model: 'svc01', messages, n: 2 });
    const indexes: number[] = [];
    stream.on('chunk', (chunk) => indexes.push(...chunk.choices.map((c) => c.index)));
    const completion = await stream.finalChatCompletion();
    const expected = [
      [0, ANSWER],
      [1, OTHER],
    ];
    expect(plain.choices.map((c) => [c.index, c.message.content])).toEqual(expected);
    expect(completion.choices.map((c) => [c.index, c.message.content])).toEqual(expected);
    expect(new Set(indexes)).toEqual(new Set([0, 1]));
    const deliveries = await deliveriesOf(completion.id);
    expect(deliveries[0]).toMatchObject({ response_text: ANSWER, grounding_checked: true, grounded: true });
  });
});

describe('logprobs on the first frame of a choice, and in the finish frame', () => {
  const tokens = (...texts: string[]) => ({ content: texts.map((token) => ({ token, logprob: -0.25, bytes: [...Buffer.from(token)], top_logprobs: [] })), refusal: null });

  it("openai stream helper: each token's logprobs once (one frame that opens, carries the text and finishes)", async () => {
    upstream.setBehavior({
      rawSse: [chunkFrame([{ index: 0, delta: { role: 'assistant', content: ANSWER }, logprobs: tokens(ANSWER), finish_reason: 'stop' }], { usage: USAGE }) + 'data: [DONE]\n\n'],
    });
    const completion = await client.chat.completions.stream({ model: 'svc01', messages, logprobs: true }).finalChatCompletion();
    expect(completion.choices[0]!.message.content).toBe(ANSWER);
    expect(completion.choices[0]!.logprobs?.content?.map((t) => t.token)).toEqual([ANSWER]);
  });

  it('openai stream helper and the AI SDK: tokens over several frames, the last with the finish, each once', async () => {
    const sse = (): string[] => [
      chunkFrame([{ index: 0, delta: { role: 'assistant', content: 'It was ' }, logprobs: tokens('It', ' was '), finish_reason: null }]) +
        chunkFrame([{ index: 0, delta: { content: 'completed in 1889.' }, logprobs: tokens('completed', ' in', ' 1889.'), finish_reason: 'stop' }], { usage: USAGE }) +
        'data: [DONE]\n\n',
    ];
    upstream.setBehavior({ rawSse: sse() });
    const completion = await client.chat.completions.stream({ model: 'svc01', messages, logprobs: true }).finalChatCompletion();
    expect(completion.choices[0]!.logprobs?.content?.map((t) => t.token).join('')).toBe(ANSWER);

    upstream.setBehavior({ rawSse: sse() });
    const openai = createOpenAI({ apiKey: token, baseURL });
    const result = streamText({ model: openai.chat('svc01'), prompt: 'When?', maxRetries: 0, providerOptions: { openai: { logprobs: true } } });
    expect(await result.text).toBe(ANSWER);
    const logprobs = (await result.providerMetadata)?.openai?.logprobs as Array<{ token: string }>;
    expect(logprobs.map((l) => l.token).join('')).toBe(ANSWER);
  });
});

describe('a streamed refusal', () => {
  const REFUSAL = "I'm sorry, I can't help with that.";
  // As OpenAI streams one (structured outputs): `refusal` deltas, `content` null, then `stop`.
  const refusing = (): string[] => [
    chunkFrame([{ index: 0, delta: { role: 'assistant', content: null, refusal: '' }, logprobs: null, finish_reason: null }]) +
      chunkFrame([{ index: 0, delta: { refusal: "I'm sorry, " }, logprobs: null, finish_reason: null }]) +
      chunkFrame([{ index: 0, delta: { refusal: "I can't help with that." }, logprobs: null, finish_reason: null }]) +
      chunkFrame([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }], { usage: USAGE }) +
      'data: [DONE]\n\n',
  ];

  it("reaches the client as OpenAI's delta.refusal: the openai stream helper assembles message.refusal", async () => {
    upstream.setBehavior({ rawSse: refusing() });
    const deltas: unknown[] = [];
    const stream = client.chat.completions.stream({ model: 'svc01', messages });
    stream.on('chunk', (chunk) => {
      for (const c of chunk.choices) if ((c.delta as { refusal?: unknown }).refusal !== undefined) deltas.push((c.delta as { refusal?: unknown }).refusal);
    });
    const completion = await stream.finalChatCompletion();
    expect(deltas.join('')).toBe(REFUSAL);
    expect(completion.choices[0]!.message).toMatchObject({ role: 'assistant', refusal: REFUSAL });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
  });
});
