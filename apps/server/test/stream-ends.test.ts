import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { chunkFrame, type FakeUpstream } from './support/fake-upstream.js';
import type { TestServer } from './support/test-server.js';
import type { Receiver } from './support/webhooks.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';
import { countUsage } from '../src/chat/prompt.js';

/**
 * What is left at a stream's end, through the openai SDK: the text an upstream sent last, a client that leaves
 * a Responses API stream, tokens counted when upstream counts none.
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let client: OpenAI;
let rig: AuditedServer;

beforeAll(async () => {
  rig = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'gpt-4o-audio-preview' });
  ({ upstream, server, receiver, client } = rig);
});

afterAll(() => rig?.close());

beforeEach(() => upstream.setBehavior({}));

/** The webhook payload that `matches`. */
async function deliveredWhere(matches: (payload: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const parse = (d: { raw: Buffer }) => JSON.parse(d.raw.toString()) as Record<string, unknown>;
  const all = await receiver.waitFor((received) => received.some((d) => matches(parse(d))));
  return parse(all.find((d) => matches(parse(d)))!);
}

const text = (content: string, index = 0) => chunkFrame([{ index, delta: { content }, finish_reason: null }]);
const role = (index = 0) => chunkFrame([{ index, delta: { role: 'assistant', content: '' }, finish_reason: null }]);

describe('a Responses API stream the client leaves', () => {
  it('is stored as incomplete with what was generated, reads back by its id, and is audited', async () => {
    const partial = 'The Eiffel Tower stands in Paris, ';
    upstream.setBehavior({ rawSse: [role(), text('The Eiffel Tower '), text('stands in Paris, ')], hangMidStream: true });
    const stream = await client.responses.create({ model: 'svc01', instructions: DOC, input: 'Where is it?', stream: true });
    let id = '';
    let seen = '';
    const aborted = upstream.waitForAbort(10_000);
    for await (const event of stream) {
      if (event.type === 'response.created') id = event.response.id;
      if (event.type === 'response.output_text.delta') seen += event.delta;
      if (seen === partial) stream.controller.abort();
    }
    expect(id).toMatch(/^resp_/);
    await aborted;
    const payload = await deliveredWhere((p) => p.response_text === partial);
    expect(payload).toMatchObject({ status_code: 499, streaming: true });

    const stored = await client.responses.retrieve(id);
    expect(stored).toMatchObject({ id, status: 'incomplete', error: null });
    expect(stored.output).toEqual([
      expect.objectContaining({ type: 'message', status: 'incomplete', content: [expect.objectContaining({ type: 'output_text', text: partial })] }),
    ]);
    expect(stored.output_text).toBe(partial);
    expect(stored.usage!.output_tokens).toBe(payload.output_tokens);
    expect(stored.usage!.output_tokens).toBeGreaterThan(0);
    // The conversation goes on from it, as from any stored response.
    upstream.setBehavior({ answer: 'It is in Paris.' });
    const next = await client.responses.create({ model: 'svc01', input: 'Go on.', previous_response_id: id });
    expect(next.status).toBe('completed');
    const sent = upstream.requests.at(-1)!.body.messages as Array<{ role: string; content: unknown }>;
    expect(sent.some((m) => m.role === 'assistant' && JSON.stringify(m.content).includes('stands in Paris'))).toBe(true);
  });

  it('after the upstream finished the answer (the client left during the grounding check) is stored as completed', async () => {
    const answer = 'It stands in Paris and is 330 metres tall.';
    // The text and its finish in one write: read together, the finish is known before the client sees the text.
    upstream.setBehavior({ rawSse: [role(), text(answer) + chunkFrame([{ index: 0, delta: {}, finish_reason: 'stop' }])], hangMidStream: true });
    const stream = await client.responses.create({ model: 'svc01', instructions: DOC, input: 'Where is it?', stream: true });
    let id = '';
    for await (const event of stream) {
      if (event.type === 'response.created') id = event.response.id;
      if (event.type === 'response.output_text.delta') stream.controller.abort();
    }
    const payload = await deliveredWhere((p) => p.response_text === answer);
    expect(payload).toMatchObject({ status_code: 499, grounding_checked: true });
    const stored = await client.responses.retrieve(id);
    expect(stored).toMatchObject({ status: 'completed', output_text: answer, svc: { checked: true } });
    expect(stored.output[0]).toMatchObject({ type: 'message', status: 'completed' });
  });

  it('with store: false is not kept', async () => {
    upstream.setBehavior({ rawSse: [role(), text('Not '), text('kept at all. ')], hangMidStream: true });
    const stream = await client.responses.create({ model: 'svc01', input: 'Hi', stream: true, store: false });
    let id = '';
    for await (const event of stream) {
      if (event.type === 'response.created') id = event.response.id;
      if (event.type === 'response.output_text.delta' && event.delta === 'kept at all. ') stream.controller.abort();
    }
    await deliveredWhere((p) => p.response_text === 'Not kept at all. ');
    const read = await client.responses.retrieve(id).catch((err: unknown) => err);
    expect(read).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('a Responses API stream the upstream breaks', () => {
  it('is stored as failed with the usage of what was generated, as the webhook counts it', async () => {
    const partial = 'The Eiffel Tower was completed in ';
    upstream.setBehavior({ rawSse: [role(), text('The Eiffel Tower was '), text('completed in ')], usage: false });
    const stream = await client.responses.create({ model: 'svc01', instructions: DOC, input: 'When?', stream: true });
    let id = '';
    let failed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      if (event.type === 'response.created') id = event.response.id;
      if (event.type === 'response.failed') failed = event.response;
    }
    expect(failed).toMatchObject({ id, status: 'failed' });
    const payload = await deliveredWhere((p) => p.response_text === partial);
    expect(payload.output_tokens).toBeGreaterThan(0);
    expect(failed!.usage).toMatchObject({ output_tokens: payload.output_tokens, input_tokens: payload.input_tokens });
    expect((await client.responses.retrieve(id)).usage).toMatchObject({ output_tokens: payload.output_tokens });
  });
});

describe('text the <think> tag detection held back', () => {
  const messages = [{ role: 'user' as const, content: 'Is 2 less than 3? Answer with the symbol only.' }];

  /** The streamed content and reasoning_content of choice 0, and the request id. */
  async function streamed(): Promise<{ content: string; reasoning: string; id: string; usage: OpenAI.CompletionUsage | null | undefined }> {
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, stream_options: { include_usage: true } });
    let content = '';
    let reasoning = '';
    let id = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      id = chunk.id;
      const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
      content += delta?.content ?? '';
      reasoning += delta?.reasoning_content ?? '';
      usage ??= chunk.usage;
    }
    return { content, reasoning, id, usage };
  }

  it('an answer that could still open the tag ("<"), ended by [DONE] without a finish_reason, is the answer, counted and audited', async () => {
    upstream.setBehavior({ rawSse: [role(), text('<'), 'data: [DONE]\n\n'] });
    const got = await streamed();
    expect(got).toMatchObject({ content: '<', reasoning: '' });
    expect(got.usage!.completion_tokens).toBe((await countUsage(messages, ['<'])).completion_tokens);
    expect(await deliveredWhere((p) => p.request_id === got.id)).toMatchObject({ response_text: '<', status_code: 200 });

    // As the same answer non-streamed is given.
    upstream.setBehavior({ rawJson: { id: 'up', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: '<' }, finish_reason: 'stop' }] } });
    expect((await client.chat.completions.create({ model: 'svc01', messages })).choices[0]!.message.content).toBe('<');
  });

  it('reasoning that ends in what could begin </think>, ended by [DONE], keeps its last characters', async () => {
    upstream.setBehavior({ rawSse: [role(), text('<think>Compare 2 and 3: 2 '), text('</'), 'data: [DONE]\n\n'] });
    const got = await streamed();
    expect(got).toMatchObject({ content: '', reasoning: 'Compare 2 and 3: 2 </' });
    expect(got.usage!.completion_tokens).toBe((await countUsage(messages, ['', 'Compare 2 and 3: 2 </'])).completion_tokens);
  });

  it('n > 1: every choice gets what was held for it', async () => {
    upstream.setBehavior({ rawSse: [role(0), role(1), text('<', 0), text(' <th', 1), 'data: [DONE]\n\n'] });
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, n: 2 });
    const content = ['', ''];
    for await (const chunk of stream) for (const c of chunk.choices) content[c.index] += c.delta.content ?? '';
    expect(content).toEqual(['<', ' <th']);
  });

  it('a stream cut before its finish sends what was held before its error', async () => {
    upstream.setBehavior({ rawSse: [role(), text('<')] });
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true });
    let content = '';
    const error = await (async () => {
      for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    })().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(content).toBe('<');
  });
});

describe('usage svc counts for an answer given only as audio (an upstream that reports none)', () => {
  const messages = [
    { role: 'system' as const, content: DOC },
    { role: 'user' as const, content: 'When was the Eiffel Tower completed?' },
  ];
  const spoken = { modalities: ['text', 'audio'] as Array<'text' | 'audio'>, audio: { voice: 'alloy' as const, format: 'pcm16' as const } };
  const ANSWER = 'It was completed in 1889, and it is 330 metres tall.';

  it('counts the transcript as the completion tokens, streamed or not, and the webhook reports the same', async () => {
    const expected = await countUsage(messages, [ANSWER]);
    upstream.setBehavior({ answer: ANSWER, usage: false });
    const plain = await client.chat.completions.create({ model: 'svc01', messages, ...spoken });
    expect(plain.choices[0]!.message.content).toBeNull();
    expect(plain.usage).toEqual(expected);
    expect(await deliveredWhere((p) => p.request_id === plain.id)).toMatchObject({ output_tokens: expected.completion_tokens });

    const stream = await client.chat.completions.create({ model: 'svc01', messages, ...spoken, stream: true, stream_options: { include_usage: true } });
    let usage: OpenAI.CompletionUsage | null | undefined;
    let id = '';
    for await (const chunk of stream) {
      id = chunk.id;
      usage ??= chunk.usage;
    }
    expect(usage).toEqual(expected);
    expect(await deliveredWhere((p) => p.request_id === id)).toMatchObject({ output_tokens: expected.completion_tokens, streaming: true });
  });
});

describe('an upstream that ends with [DONE] and no finish_reason', () => {
  const messages = [{ role: 'user' as const, content: 'Say something twice.' }];

  it('n > 1: every choice is finished, so the SDK assembles the completion', async () => {
    upstream.setBehavior({ rawSse: [role(0), role(1), text('First.', 0), text('Second.', 1), 'data: [DONE]\n\n'] });
    const completion = await client.chat.completions.stream({ model: 'svc01', messages, n: 2 }).finalChatCompletion();
    expect(completion.choices.map((c) => [c.index, c.message.content, c.finish_reason])).toEqual([
      [0, 'First.', 'stop'],
      [1, 'Second.', 'stop'],
    ]);

    // Choice 0 finished, choice 1 not.
    upstream.setBehavior({
      rawSse: [role(0), role(1), text('First.', 0), chunkFrame([{ index: 0, delta: {}, finish_reason: 'stop' }]), text('Second.', 1), 'data: [DONE]\n\n'],
    });
    const other = await client.chat.completions.stream({ model: 'svc01', messages, n: 2 }).finalChatCompletion();
    expect(other.choices.map((c) => [c.index, c.message.content, c.finish_reason])).toEqual([
      [0, 'First.', 'stop'],
      [1, 'Second.', 'stop'],
    ]);
  });

  it('after a tool call, the choice finishes with tool_calls, as OpenAI ends one', async () => {
    const call = (fields: object) => chunkFrame([{ index: 0, delta: { tool_calls: [{ index: 0, ...fields }] }, finish_reason: null }]);
    upstream.setBehavior({
      rawSse: [role(), call({ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }), call({ function: { arguments: '{"city":"Paris"}' } }), 'data: [DONE]\n\n'],
    });
    const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const completion = await client.chat.completions.stream({ model: 'svc01', messages, tools }).finalChatCompletion();
    expect(completion.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: { tool_calls: [{ id: 'call_1', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    });
  });
});
