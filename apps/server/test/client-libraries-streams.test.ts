import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { ChatOpenAI } from '@langchain/openai';
import { createOpenAI } from '@ai-sdk/openai';
import { streamText } from 'ai';
import { SvcResultSchema } from '@svc/protocol';
import { type FakeUpstream } from './support/fake-upstream.js';
import type { TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';

/**
 * What an app moving from api.openai.com to svc reads from streams through the official `openai` client, the
 * AI SDK and LangChain: token log probabilities, several choices (`n`), usage, and what the SDKs' own retries
 * of a failed request leave in the audit.
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889.';
const ANSWER = 'It was completed in 1889.';
const messages = [
  { role: 'system' as const, content: DOC },
  { role: 'user' as const, content: 'When was the Eiffel Tower completed?' },
];

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
  upstream.requests.length = 0;
});

describe('logprobs through a stream', () => {
  it('openai: every content chunk carries its tokens with top_logprobs; the tokens join to the answer', async () => {
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, logprobs: true, top_logprobs: 2 });
    const tokens: string[] = [];
    let text = '';
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        text += choice.delta.content ?? '';
        for (const entry of choice.logprobs?.content ?? []) {
          expect(entry.top_logprobs).toHaveLength(2);
          expect(entry.logprob).toBeLessThanOrEqual(0);
          tokens.push(entry.token);
        }
      }
    }
    expect(text).toBe(ANSWER);
    expect(tokens.join('')).toBe(ANSWER);
    expect(upstream.requests[0]!.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
  });

  it('AI SDK: providerMetadata.openai.logprobs of streamText', async () => {
    const openai = createOpenAI({ apiKey: token, baseURL });
    const result = streamText({ model: openai.chat('svc01'), messages, maxRetries: 0, providerOptions: { openai: { logprobs: 2 } } });
    let text = '';
    for await (const part of result.textStream) text += part;
    const logprobs = (await result.providerMetadata)?.openai?.logprobs as Array<{ token: string; top_logprobs: unknown[] }>;
    expect(text).toBe(ANSWER);
    expect(logprobs.map((l) => l.token).join('')).toBe(ANSWER);
    expect(logprobs.every((l) => l.top_logprobs.length === 2)).toBe(true);
  });

  it('LangChain: response_metadata.logprobs of each streamed chunk', async () => {
    const llm = new ChatOpenAI({ model: 'svc01', apiKey: token, configuration: { baseURL }, maxRetries: 0, logprobs: true, topLogprobs: 1 });
    const tokens: string[] = [];
    for await (const chunk of await llm.stream(messages)) {
      const logprobs = chunk.response_metadata.logprobs as { content?: Array<{ token: string }> } | null | undefined;
      for (const entry of logprobs?.content ?? []) tokens.push(entry.token);
    }
    expect(tokens.join('')).toBe(ANSWER);
  });
});

describe('n > 1 streamed', () => {
  it('openai stream helper: finalChatCompletion has every choice, each finish chunk carries svc, usage counts them all', async () => {
    const finishes: Array<{ index: number; svc: unknown }> = [];
    const stream = client.chat.completions.stream({ model: 'svc01', messages, n: 3, stream_options: { include_usage: true } });
    stream.on('chunk', (chunk) => {
      for (const choice of chunk.choices) if (choice.finish_reason) finishes.push({ index: choice.index, svc: (chunk as { svc?: unknown }).svc });
    });
    const completion = await stream.finalChatCompletion();
    expect(completion.choices.map((c) => [c.index, c.message.content])).toEqual([
      [0, ANSWER],
      [1, ANSWER],
      [2, ANSWER],
    ]);
    expect(finishes.map((f) => f.index).sort()).toEqual([0, 1, 2]);
    for (const f of finishes) expect(SvcResultSchema.parse(f.svc)).toMatchObject({ checked: true, grounded: true });
    expect(completion.usage?.completion_tokens).toBeGreaterThanOrEqual(3 * ANSWER.split(' ').length);
  });

  it('openai stream helper: with n: 2 and parallel tool calls, each choice gets its own calls, whole', async () => {
    upstream.setBehavior({ toolCalls: [{ name: 'weather', arguments: { city: 'Paris' } }, { name: 'time', arguments: { zone: 'Europe/Paris' } }] });
    const tools = ['weather', 'time'].map((name) => ({ type: 'function' as const, function: { name, parameters: { type: 'object', properties: {} } } }));
    const completion = await client.chat.completions.stream({ model: 'svc01', messages, n: 2, tools }).finalChatCompletion();
    expect(completion.choices).toHaveLength(2);
    for (const choice of completion.choices) {
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.tool_calls?.map((c) => (c.type === 'function' ? [c.function.name, JSON.parse(c.function.arguments)] : null))).toEqual([
        ['weather', { city: 'Paris' }],
        ['time', { zone: 'Europe/Paris' }],
      ]);
    }
  });

  // Not with `streaming: true`: LangChain JS (1.5) then never settles, against an OpenAI-shaped upstream alone too.
  it('LangChain generate with n: 2 gets two generations', async () => {
    const llm = new ChatOpenAI({ model: 'svc01', apiKey: token, configuration: { baseURL }, maxRetries: 0, n: 2 });
    const result = await llm.generate([messages]);
    expect(result.generations[0]!.map((g) => g.text)).toEqual([ANSWER, ANSWER]);
  });
});

describe('usage and retries', () => {
  it("AI SDK streamText: usage is the upstream's, from the include_usage chunk svc passes on", async () => {
    const openai = createOpenAI({ apiKey: token, baseURL });
    const result = streamText({ model: openai.chat('svc01'), messages, maxRetries: 0 });
    await result.consumeStream();
    const usage = await result.usage;
    expect(upstream.requests[0]!.body.stream_options).toEqual({ include_usage: true });
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.outputTokens).toBe(ANSWER.split(' ').length);
    expect(usage.totalTokens).toBe(usage.inputTokens! + usage.outputTokens!);
  });

  it("the SDK's retries of an upstream 503 are separate requests: each is audited once, under its own request id", async () => {
    // A key of its own: the other tests' deliveries go to the shared receiver.
    const own = await startReceiver();
    try {
      const retrying = new OpenAI({ apiKey: (await server.createKey({ webhookUrl: own.url })).token, baseURL, maxRetries: 2 });
      upstream.nextBehavior({ status: 503 });
      upstream.nextBehavior({ status: 503 });
      const { data, response } = await retrying.chat.completions.create({ model: 'svc01', messages }).withResponse();
      expect(data.choices[0]!.message.content).toBe(ANSWER);
      expect(upstream.requests).toHaveLength(3);
      const deliveries = await own.waitFor((r) => r.length >= 3);
      const audited = deliveries.map((d) => JSON.parse(d.raw.toString('utf8')) as { request_id: string; status_code: number });
      expect(audited.map((a) => a.status_code).sort()).toEqual([200, 502, 502]);
      expect(new Set(audited.map((a) => a.request_id)).size).toBe(3);
      expect(audited.find((a) => a.status_code === 200)!.request_id).toBe(response.headers.get('x-request-id'));
    } finally {
      await own.close();
    }
  });
});
