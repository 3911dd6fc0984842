import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { createOpenAI } from '@ai-sdk/openai';
import { convertToModelMessages, generateText, readUIMessageStream, stepCountIs, streamText, tool as aiTool, type ModelMessage, type UIMessage } from 'ai';
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { startTestServer, type TestServer } from './support/test-server.js';
import { chunkFrame, startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

/** The Responses API through the clients built on it: the openai SDK, the Agents SDK and the AI SDK. */

setTracingDisabled(true);

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';

let offline: TestServer;
let token: string;
let otherToken: string;
let receiver: Receiver;
const client = () => new OpenAI({ apiKey: token, baseURL: `${offline.url}/v1`, maxRetries: 0 });

beforeAll(async () => {
  receiver = await startReceiver();
  offline = await startTestServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
  ({ token } = await offline.createKey({ webhookUrl: receiver.url, signingSecret: 'whsec_responses' }));
  ({ token: otherToken } = await offline.createKey());
});

afterAll(async () => {
  await offline?.close();
  await receiver?.close();
});

describe('POST /v1/responses (offline model)', () => {
  it('answers a string input with a message, usage and svc, stores it, and lists its input items', async () => {
    const response = await client().responses.create({ model: 'svc01', instructions: DOC, input: 'Where is the Eiffel Tower?' });
    expect(response.object).toBe('response');
    expect(response.id).toMatch(/^resp_/);
    expect(response.status).toBe('completed');
    expect(response.output_text).toContain('Paris');
    expect(response.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed' });
    expect(response.usage!.input_tokens).toBeGreaterThan(0);
    expect(response.usage!.output_tokens).toBeGreaterThan(0);
    const svc = (response as unknown as { svc: { checked: boolean; grounded: boolean } }).svc;
    expect(svc).toMatchObject({ checked: true, grounded: true });

    const again = await client().responses.retrieve(response.id);
    expect(again.output_text).toBe(response.output_text);
    const items = await client().responses.inputItems.list(response.id);
    expect(items.data).toEqual([
      expect.objectContaining({ type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'Where is the Eiffel Tower?' }] }),
    ]);
  });

  it("serves background: true as OpenAI's background guide has clients poll it: in_progress at once, then completed", async () => {
    let response: OpenAI.Responses.Response = await client().responses.create({ model: 'svc01', instructions: DOC, input: 'Where is the Eiffel Tower?', background: true });
    expect(response).toMatchObject({ background: true, status: 'in_progress', output: [] });
    for (let polls = 0; (response.status === 'queued' || response.status === 'in_progress') && polls < 600; polls++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      response = await client().responses.retrieve(response.id);
    }
    expect(response.status).toBe('completed');
    expect(response.output_text).toContain('Paris');
    expect(await client().responses.retrieve(response.id)).toMatchObject({ background: true, status: 'completed' });
    expect((await client().responses.create({ model: 'svc01', input: 'Hi' })).background).toBe(false);
  });

  it("responses.cancel on a background response returns it in its final status, again on a second call; any other is refused in OpenAI's words", async () => {
    let response = await client().responses.create({ model: 'svc01', instructions: DOC, input: 'Where is the Eiffel Tower?', background: true });
    for (let polls = 0; response.status === 'in_progress' && polls < 600; polls++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      response = await client().responses.retrieve(response.id);
    }
    const cancelled = await client().responses.cancel(response.id);
    expect(cancelled).toMatchObject({ id: response.id, background: true, status: 'completed' });
    expect(cancelled.output).toEqual(response.output);
    expect(await client().responses.cancel(response.id)).toEqual(cancelled);

    const foreground = await client().responses.create({ model: 'svc01', input: 'Hi' });
    const refused = await client().responses.cancel(foreground.id).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_request', param: null });
    expect((refused as Error).message).toContain('Only responses created with background=true can be cancelled');
    const elsewhere = new OpenAI({ apiKey: otherToken, baseURL: `${offline.url}/v1`, maxRetries: 0 });
    for (const missing of [elsewhere.responses.cancel(response.id), client().responses.cancel('resp_nothing')]) {
      expect(await missing.catch((err: unknown) => err)).toBeInstanceOf(OpenAI.NotFoundError);
    }
    expect(await client().responses.retrieve(response.id)).toMatchObject({ status: 'completed' });
  });

  it('refuses background: true with store: false (it could never be polled), naming background', async () => {
    const refused = await client()
      .responses.create({ model: 'svc01', input: 'Where is the Eiffel Tower?', background: true, store: false })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, code: 'invalid_value', param: 'background' });
    expect((refused as Error).message).toContain("background mode requires 'store' to be true");
    const stateless = await client().responses.create({ model: 'svc01', input: 'Hi', store: false });
    expect(stateless.status).toBe('completed');
  });

  it('refuses to stream a stored response again with a 400 naming stream, rather than an empty stream', async () => {
    const response = await client().responses.create({ model: 'svc01', input: 'Hello' });
    const refused = await client()
      .responses.retrieve(response.id, { stream: true })
      .then(async (stream) => {
        for await (const _ of stream);
        return 'an empty stream';
      })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, param: 'stream', code: 'invalid_value' });
    expect((await client().responses.retrieve(response.id, { stream: false })).id).toBe(response.id);
  });

  it('lists the input items of a follow-up with the conversation it carried over, newest first', async () => {
    const first = await client().responses.create({ model: 'svc01', instructions: DOC, input: 'Where is the Eiffel Tower?' });
    const second = await client().responses.create({ model: 'svc01', instructions: DOC, input: 'How high does it stand?', previous_response_id: first.id });
    const items = await client().responses.inputItems.list(second.id);
    expect(items.data).toEqual([
      expect.objectContaining({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'How high does it stand?' }] }),
      expect.objectContaining({ type: 'message', role: 'assistant', id: first.output[0]!.id, content: [expect.objectContaining({ text: first.output_text })] }),
      expect.objectContaining({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Where is the Eiffel Tower?' }] }),
    ]);
    const page = await client().responses.inputItems.list(second.id, { order: 'asc', limit: 1, after: items.data[2]!.id! });
    expect(page.data.map((item) => item.id)).toEqual([first.output[0]!.id]);
    expect(page.has_more).toBe(true);
  });

  it('streams the semantic events in order, numbered, ending with the response and its svc result', async () => {
    const stream = client().responses.stream({ model: 'svc01', instructions: DOC, input: 'When was it completed?' });
    const types: string[] = [];
    const numbers: number[] = [];
    let text = '';
    for await (const event of stream) {
      types.push(event.type);
      numbers.push(event.sequence_number);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    const final = await stream.finalResponse();
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    expect(numbers).toEqual(numbers.map((_, i) => i));
    expect(text).toContain('1889');
    expect(final.output_text).toBe(text);
    expect((final as unknown as { svc: { checked: boolean } }).svc.checked).toBe(true);
    expect((await client().responses.retrieve(final.id)).output_text).toBe(text);
  });

  it('gives structured output for text.format (responses.parse with zodTextFormat)', async () => {
    const Landmark = z.object({ city: z.string(), year: z.number().int() });
    const response = await client().responses.parse({
      model: 'svc01',
      instructions: DOC,
      input: 'Which city is the Eiffel Tower in, and when was it completed?',
      text: { format: zodTextFormat(Landmark, 'landmark') },
    });
    expect(Landmark.parse(response.output_parsed)).toEqual(response.output_parsed);
  });

  it('keeps stored responses to their key, deletes them, and honours store: false', async () => {
    const mine = await client().responses.create({ model: 'svc01', input: 'Hello' });
    const other = new OpenAI({ apiKey: otherToken, baseURL: `${offline.url}/v1`, maxRetries: 0 });
    await expect(other.responses.retrieve(mine.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.inputItems.list(mine.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.delete(mine.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.create({ model: 'svc01', input: 'Go on', previous_response_id: mine.id })).rejects.toMatchObject({
      status: 404,
      param: 'previous_response_id',
    });

    await client().responses.delete(mine.id);
    await expect(client().responses.retrieve(mine.id)).rejects.toMatchObject({ status: 404 });

    const unstored = await client().responses.create({ model: 'svc01', input: 'Hello', store: false });
    await expect(client().responses.retrieve(unstored.id)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses query values given twice or with brackets with a 400 naming the parameter, not reading them as one value', async () => {
    const response = await client().responses.create({ model: 'svc01', instructions: DOC, input: 'Where is the Eiffel Tower?' });
    const cases = [
      [`${response.id}/input_items?limit[]=5`, 'limit', "'limit' must be given as limit=…, without brackets."],
      [`${response.id}/input_items?limit=5&limit=6`, 'limit', "'limit' must be given once."],
      [`${response.id}/input_items?order[a]=asc`, 'order', "'order' must be given as order=…, without brackets."],
      [`${response.id}/input_items?after[]=x`, 'after', "'after' must be given as after=…, without brackets."],
      [`${response.id}?stream[a]=1`, 'stream', "'stream' must be given as stream=…, without brackets."],
    ] as const;
    for (const [path, param, message] of cases) {
      const res = await fetch(`${offline.url}/v1/responses/${path}`, { headers: { authorization: `Bearer ${token}` } });
      expect({ path, status: res.status, error: ((await res.json()) as { error: unknown }).error }).toEqual({
        path,
        status: 400,
        error: expect.objectContaining({ param, message, code: 'invalid_value' }),
      });
    }
  });

  it('refuses a follow-up whose conversation is past the body limit with 400 context_length_exceeded, and serves the rest', async () => {
    // Two turns of 6 MiB each: either could be sent inline, the two together could not.
    const turn = 'The tower was finished in 1889. '.repeat((6 * 1024 * 1024) / 32);
    const first = await client().responses.create({ model: 'svc01', input: turn, svc: { dehallucinate: false } } as never);
    const second = await client().responses.create({ model: 'svc01', input: turn, previous_response_id: first.id, svc: { dehallucinate: false } } as never);
    const refused = await client()
      .responses.create({ model: 'svc01', input: 'When was it finished?', previous_response_id: second.id })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, code: 'context_length_exceeded', param: 'previous_response_id', type: 'invalid_request_error' });
    expect((refused as Error).message).toMatch(/at most 10485760 \(the request body limit\)/);
    // Each turn is still read back, and a follow-up to the first alone is answered.
    expect((await client().responses.retrieve(second.id)).previous_response_id).toBe(first.id);
    const items = await client().responses.inputItems.list(first.id);
    expect(items.data).toHaveLength(1);
    const followUp = await client().responses.create({ model: 'svc01', input: 'When was it finished?', previous_response_id: first.id });
    expect(followUp.status).toBe('completed');
  });

  it.each([
    [{ tools: [{ type: 'web_search' }] }, 'tools[0].type', /built-in tool type 'web_search'/],
    [{ model: 'gpt-4o' }, 'model', /does not exist/],
    [{ input: 5 }, 'input', /Invalid type/],
    [{ truncation: 'automatic' }, 'truncation', /Invalid value for 'truncation'/],
  ])('refuses %j with a 400/404 in the OpenAI error shape naming %s', async (patch, param, message) => {
    const res = await fetch(`${offline.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', input: 'Hi', ...patch }),
    });
    expect([400, 404]).toContain(res.status);
    const body = (await res.json()) as { error: { message: string; param: string; type: string } };
    expect(body.error.param).toBe(param);
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toMatch(message);
  });

  it('accepts every documented include value and refuses another with a 400 naming include[i] (openai SDK)', async () => {
    const include = ['file_search_call.results', 'web_search_call.results', 'web_search_call.action.sources', 'message.input_image.image_url',
      'computer_call_output.output.image_url', 'code_interpreter_call.outputs', 'reasoning.encrypted_content', 'message.output_text.logprobs'] as const;
    const response = await client().responses.create({ model: 'svc01', instructions: DOC, input: 'Where is it?', include: [...include], store: false });
    expect(response.status).toBe('completed');

    const refused = await client()
      .responses.create({ model: 'svc01', input: 'Hi', include: ['message.output_text.logprobs', 'output_text.logprobs'] as never })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'include[1]' });
    expect((refused as Error).message).toMatch(/Invalid value for 'include\[1\]'.*"reasoning\.encrypted_content"/);
  });

  it('needs a key like every other route', async () => {
    const res = await fetch(`${offline.url}/v1/responses`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(401);
  });

  it('audits every call with the same webhook, the prompt rendered from the instructions and input items', async () => {
    const response = await client().responses.create({ model: 'svc01', instructions: DOC, input: [{ role: 'user', content: 'How tall is it?' }] });
    const received = await receiver.waitFor((all) => all.some((d) => d.raw.toString('utf8').includes('How tall is it?')));
    const payload = received.map((d) => JSON.parse(d.raw.toString('utf8')) as Record<string, unknown>).find((p) => String(p.prompt).includes('How tall is it?'))!;
    expect(payload.event).toBe('llm.request.completed');
    expect(payload.prompt).toContain('Eiffel Tower');
    expect(payload.response_text).toBe(response.output_text);
    expect(payload.status_code).toBe(200);
    expect(payload.streaming).toBe(false);
    expect(payload.grounding_checked).toBe(true);
    expect(payload.input_tokens).toBe(response.usage!.input_tokens);
  });

  it("names the response's id in its audit delivery (response_id), plain and streamed, beside the request's id", async () => {
    const { data: plain, response: res } = await client().responses.create({ model: 'svc01', input: 'Audit me plainly' }).withResponse();
    const stream = await client().responses.create({ model: 'svc01', input: 'Audit me streamed', stream: true });
    let streamedId = '';
    for await (const event of stream) if (event.type === 'response.created') streamedId = event.response.id;
    const received = await receiver.waitFor((all) => ['Audit me plainly', 'Audit me streamed'].every((text) => all.some((d) => d.raw.toString('utf8').includes(text))));
    const payloads = received.map((d) => JSON.parse(d.raw.toString('utf8')) as Record<string, unknown>);
    const of = (text: string) => payloads.find((p) => String(p.prompt).includes(text))!;
    expect(of('Audit me plainly')).toMatchObject({ response_id: plain.id, request_id: res.headers.get('x-request-id') });
    expect(streamedId).toMatch(/^resp_/);
    expect(of('Audit me streamed')).toMatchObject({ response_id: streamedId, streaming: true });
  });

  it('runs an Agents SDK agent with one function tool to completion', async () => {
    const calls: string[] = [];
    const lookup = tool({
      name: 'lookup_landmark',
      description: 'Look up a landmark: where it is and when it was completed',
      parameters: z.object({ name: z.string() }),
      execute: async ({ name }) => {
        calls.push(name);
        return 'The Eiffel Tower was completed in 1889. It stands on the Champ de Mars in Paris.';
      },
    });
    const agent = new Agent({
      name: 'guide',
      instructions: 'Use lookup_landmark, then answer from what it returns.',
      model: new OpenAIResponsesModel(client(), 'svc01'),
      modelSettings: { toolChoice: 'required' },
      resetToolChoice: true,
      tools: [lookup],
    });
    const result = await run(agent, 'Look up the landmark Eiffel Tower, then tell me: when was it completed?');
    expect(calls.length).toBe(1);
    expect(String(result.finalOutput)).toContain('1889');
  });

  it('serves the AI SDK responses provider, plain and streamed', async () => {
    const openai = createOpenAI({ apiKey: token, baseURL: `${offline.url}/v1` });
    const plain = await generateText({ model: openai.responses('svc01'), system: DOC, prompt: 'Where is the Eiffel Tower?' });
    expect(plain.text).toContain('Paris');
    const streamed = streamText({ model: openai.responses('svc01'), system: DOC, prompt: 'When was it completed?' });
    let text = '';
    for await (const delta of streamed.textStream) text += delta;
    expect(text).toContain('1889');
  });
});

describe('POST /v1/responses over an upstream', () => {
  let upstream: FakeUpstream;
  let server: TestServer;
  let upstreamClient: OpenAI;
  let upstreamToken: string;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
    ({ token: upstreamToken } = await server.createKey());
    upstreamClient = new OpenAI({ apiKey: upstreamToken, baseURL: `${server.url}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await server?.close();
    await upstream?.close();
  });

  it('responses.cancel of a foreground stream still running says only background responses can be (not a 404)', async () => {
    let speak!: () => void;
    upstream.nextBehavior({ answer: 'The tower is in Paris.', silentUntil: new Promise<void>((resolve) => (speak = resolve)) });
    const stream = await upstreamClient.responses.create({ model: 'svc01', input: 'Where is the tower?', stream: true });
    let id = '';
    let refused: unknown;
    for await (const event of stream) {
      if (event.type !== 'response.created') continue;
      id = event.response.id;
      refused = await upstreamClient.responses.cancel(id).catch((err: unknown) => err);
      speak();
    }
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, code: 'invalid_request' });
    expect((refused as Error).message).toContain('Only responses created with background=true can be cancelled');
    expect(await upstreamClient.responses.retrieve(id)).toMatchObject({ id, status: 'completed', background: false });
  });

  it('round-trips a tool call through previous_response_id, as chat messages upstream', async () => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_w', name: 'get_weather', arguments: { city: 'Paris' } }] });
    const tools = [{ type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }];
    const first = await upstreamClient.responses.create({ model: 'svc01', input: 'Weather in Paris?', tools });
    expect(first.output).toEqual([expect.objectContaining({ type: 'function_call', call_id: 'call_w', name: 'get_weather', arguments: '{"city":"Paris"}' })]);

    upstream.nextBehavior({ answer: 'It is 18 degrees in Paris.' });
    const second = await upstreamClient.responses.create({
      model: 'svc01',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: 'call_w', output: '18C' }],
      tools,
    });
    expect(second.output_text).toBe('It is 18 degrees in Paris.');
    const sent = upstream.requests.at(-1)!.body as { messages: unknown[]; tools: unknown[] };
    expect(sent.messages).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_w', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_w', content: '18C' },
    ]);
    expect(sent.tools).toEqual([{ type: 'function', function: { name: 'get_weather', parameters: tools[0]!.parameters, strict: false } }]);
    // Listed as OpenAI lists them: the function call and its output (whose types require it) with their status.
    const items = await upstreamClient.responses.inputItems.list(second.id, { order: 'asc' });
    expect(items.data.map((item) => [item.type, 'status' in item && item.status])).toEqual([
      ['message', 'completed'],
      ['function_call', 'completed'],
      ['function_call_output', 'completed'],
    ]);
  });

  it('runs function tools strict unless they say otherwise, as the Responses API does (chat completions would not)', async () => {
    const closed = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
    const open = { type: 'object', properties: { city: { type: 'string' } } };
    upstream.nextBehavior({ answer: 'Sunny.' });
    const response = await upstreamClient.responses.create({
      model: 'svc01',
      input: 'Weather in Paris?',
      // The openai SDK's type asks for `strict`; a client that leaves it out (raw JSON, other SDKs) gets the default.
      tools: [
        { type: 'function', name: 'closed', parameters: closed },
        { type: 'function', name: 'open', parameters: open },
        { type: 'function', name: 'loose', parameters: closed, strict: false },
      ] as unknown as OpenAI.Responses.FunctionTool[],
    });
    const sent = upstream.requests.at(-1)!.body as { tools: Array<{ function: { name: string; strict?: boolean } }> };
    expect(sent.tools.map((tool) => [tool.function.name, tool.function.strict])).toEqual([
      ['closed', true],
      ['open', false],
      ['loose', false],
    ]);
    expect(response.tools.map((tool) => (tool as OpenAI.Responses.FunctionTool).strict)).toEqual([true, false, false]);
  });

  it('refuses a follow-up that leaves a function call unanswered, or answers a call never made, as OpenAI does, before the upstream', async () => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_u', name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const tools = [{ type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }];
    const first = await upstreamClient.responses.create({ model: 'svc01', input: 'Weather in Oslo?', tools });
    const sent = upstream.requests.length;

    const unanswered = await upstreamClient.responses.create({ model: 'svc01', previous_response_id: first.id, input: 'Well?', tools }).catch((err: unknown) => err);
    expect(unanswered).toBeInstanceOf(OpenAI.BadRequestError);
    expect(unanswered).toMatchObject({ status: 400, type: 'invalid_request_error', param: 'input', message: '400 No tool output found for function call call_u.' });

    const stray = await upstreamClient.responses
      .create({ model: 'svc01', input: [{ type: 'function_call_output', call_id: 'call_nope', output: '18C' }], tools })
      .catch((err: unknown) => err);
    expect(stray).toMatchObject({ status: 400, param: 'input', message: '400 No tool call found for function call output with call_id call_nope.' });
    expect(upstream.requests.length).toBe(sent);

    // Answered in the same input (the stateless way: the output items sent back with the call's output), it is served.
    upstream.nextBehavior({ answer: 'It is 4 degrees in Oslo.' });
    const stateless = await upstreamClient.responses.create({
      model: 'svc01',
      store: false,
      tools,
      input: [{ role: 'user', content: 'Weather in Oslo?' }, ...(first.output as OpenAI.Responses.ResponseInputItem[]), { type: 'function_call_output', call_id: 'call_u', output: '4C' }],
    });
    expect(stateless.output_text).toBe('It is 4 degrees in Oslo.');
  });

  it("continues the AI SDK's conversations (openai('svc01'), store on): earlier answers come back as item_reference and reach the upstream as the assistant's turns", async () => {
    // The AI SDK's default provider is the Responses API; with `store` on (its default) it sends an earlier
    // turn's answer as `{ type: 'item_reference', id }`, not its text.
    const openai = createOpenAI({ apiKey: upstreamToken, baseURL: `${server.url}/v1` });
    const messages: ModelMessage[] = [{ role: 'user', content: 'Where is the Eiffel Tower?' }];
    upstream.nextBehavior({ answer: 'It is in Paris.' });
    const first = await generateText({ model: openai('svc01'), messages });
    messages.push(...first.response.messages, { role: 'user', content: 'When was it completed?' });
    upstream.nextBehavior({ answer: 'In 1889.' });
    const second = streamText({ model: openai('svc01'), messages });
    expect(await second.text).toBe('In 1889.');
    const sent = upstream.requests.at(-1)!.body as { messages: unknown[] };
    expect(sent.messages).toEqual([
      { role: 'user', content: 'Where is the Eiffel Tower?' },
      { role: 'assistant', content: 'It is in Paris.' },
      { role: 'user', content: 'When was it completed?' },
    ]);
    messages.push(...(await second.response).messages, { role: 'user', content: 'How tall is it?' });
    upstream.nextBehavior({ answer: '330 metres.' });
    const third = await generateText({ model: openai('svc01'), messages });
    expect(third.text).toBe('330 metres.');
    expect((upstream.requests.at(-1)!.body as { messages: unknown[] }).messages).toHaveLength(5);
  });

  it('carries a useChat conversation (UI messages, a step of text and a tool call, then the answer) into its next turn', async () => {
    const openai = createOpenAI({ apiKey: upstreamToken, baseURL: `${server.url}/v1` });
    const tools = { weather: aiTool({ inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `Sunny in ${city}.` }) };
    upstream.nextBehavior({
      rawSse: [
        chunkFrame([{ index: 0, delta: { role: 'assistant', content: 'Let me check. ' }, finish_reason: null }]),
        chunkFrame([{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_ui', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] }, finish_reason: null }]),
        chunkFrame([{ index: 0, delta: {}, finish_reason: 'tool_calls' }]),
        'data: [DONE]\n\n',
      ],
    });
    upstream.nextBehavior({ answer: 'It is sunny in Paris.' });
    const ui: UIMessage[] = [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Weather in Paris?' }] }];
    // What a route handler does with each request of useChat: the UI messages in, a UI message stream out.
    const turn = async () => {
      const result = streamText({ model: openai('svc01'), messages: await convertToModelMessages(ui), tools, stopWhen: stepCountIs(3) });
      let answer: UIMessage | undefined;
      for await (const message of readUIMessageStream({ stream: result.toUIMessageStream({ onError: (err) => { throw err; } }) })) answer = message;
      return answer!;
    };
    const first = await turn();
    expect(first.parts.filter((part) => part.type === 'text').map((part) => part.text)).toEqual(['Let me check. ', 'It is sunny in Paris.']);
    ui.push(first, { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'And tomorrow?' }] });
    upstream.nextBehavior({ answer: 'Sunny too.' });
    const second = await turn();
    expect(second.parts.filter((part) => part.type === 'text').map((part) => part.text)).toEqual(['Sunny too.']);
    expect((upstream.requests.at(-1)!.body as { messages: unknown[] }).messages).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: 'Let me check. ', tool_calls: [{ id: 'call_ui', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_ui', content: 'Sunny in Paris.' },
      { role: 'assistant', content: 'It is sunny in Paris.' },
      { role: 'user', content: 'And tomorrow?' },
    ]);
  });

  it("passes an image a tool returned (the AI SDK's toModelOutput) to the upstream after the tool's message, where a chat model reads it", async () => {
    const openai = createOpenAI({ apiKey: upstreamToken, baseURL: `${server.url}/v1` });
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    const screenshot = aiTool({
      inputSchema: z.object({}),
      execute: async () => png,
      toModelOutput: ({ output }) => ({ type: 'content', value: [{ type: 'text', text: 'The screen:' }, { type: 'image-data', data: output, mediaType: 'image/png' }] }),
    });
    upstream.nextBehavior({ toolCalls: [{ id: 'call_img', name: 'screenshot', arguments: {} }] });
    upstream.nextBehavior({ answer: 'A white dot.' });
    const result = await generateText({ model: openai('svc01'), prompt: 'What is on the screen?', tools: { screenshot }, stopWhen: stepCountIs(2) });
    expect(result.text).toBe('A white dot.');
    expect((upstream.requests.at(-1)!.body as { messages: unknown[] }).messages.slice(-2)).toEqual([
      { role: 'tool', tool_call_id: 'call_img', content: 'The screen:' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }] },
    ]);
  });

  it("reads an item_reference as the stored output item it names (a function call too), of this key only; another's, a deleted or unstored one is a 404 naming input[i]", async () => {
    const tools = [{ type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }];
    upstream.nextBehavior({ toolCalls: [{ id: 'call_ref', name: 'get_weather', arguments: { city: 'Paris' } }] });
    const first = await upstreamClient.responses.create({ model: 'svc01', input: 'Weather in Paris?', tools });
    const call = first.output[0]!;
    upstream.nextBehavior({ answer: 'It is 18 degrees in Paris.' });
    const second = await upstreamClient.responses.create({
      model: 'svc01',
      tools,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'item_reference', id: call.id! },
        { type: 'function_call_output', call_id: 'call_ref', output: '18C' },
      ],
    });
    expect(second.output_text).toBe('It is 18 degrees in Paris.');
    expect((upstream.requests.at(-1)!.body as { messages: unknown[] }).messages).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_ref', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_ref', content: '18C' },
    ]);
    // Listed as the item it named.
    const listed = await upstreamClient.responses.inputItems.list(second.id, { order: 'asc' });
    expect(listed.data[1]).toMatchObject({ type: 'function_call', id: call.id, call_id: 'call_ref' });

    const sent = upstream.requests.length;
    const refused = (id: string, client = upstreamClient) =>
      client.responses.create({ model: 'svc01', input: [{ role: 'user', content: 'Hi' }, { type: 'item_reference', id }] }).catch((err: unknown) => err);
    const message = second.output[0]!.id!;
    const { token: otherKey } = await server.createKey();
    const other = new OpenAI({ apiKey: otherKey, baseURL: `${server.url}/v1`, maxRetries: 0 });
    expect(await refused(message, other)).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await refused(message, other)).toMatchObject({ status: 404, param: 'input[1]', message: expect.stringMatching(new RegExp(`^404 Item with id '${message}' not found\\.`)) });
    upstream.nextBehavior({ answer: 'Not kept.' });
    const unstored = await upstreamClient.responses.create({ model: 'svc01', input: 'Hi', store: false });
    expect(await refused(unstored.output[0]!.id!)).toMatchObject({ status: 404, param: 'input[1]' });
    await upstreamClient.responses.delete(second.id);
    expect(await refused(message)).toMatchObject({ status: 404, param: 'input[1]' });
    expect(upstream.requests.length).toBe(sent + 1);

    // References name at most what one request body may hold, counted at each: one large answer named 120 times
    // (12 MB upstream from 6 KB sent) is refused as a conversation past that is, before the upstream.
    upstream.nextBehavior({ answer: 'x'.repeat(100_000) });
    const large = await upstreamClient.responses.create({ model: 'svc01', input: 'Write a lot.' });
    const many = await upstreamClient.responses
      .create({ model: 'svc01', input: [{ role: 'user', content: 'Again?' }, ...Array.from({ length: 120 }, () => ({ type: 'item_reference' as const, id: large.output[0]!.id! }))] })
      .catch((err: unknown) => err);
    expect(many).toBeInstanceOf(OpenAI.BadRequestError);
    expect(many).toMatchObject({ status: 400, code: 'context_length_exceeded', param: 'input' });
    expect(upstream.requests.length).toBe(sent + 2);
  });

  it('refuses a tool_choice naming a function not in tools with a 400 naming tool_choice, as OpenAI does, before the upstream', async () => {
    const tools = [{ type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: {} }, strict: false }];
    const sent = upstream.requests.length;
    const wrong = await upstreamClient.responses
      .create({ model: 'svc01', input: 'Weather?', tools, tool_choice: { type: 'function', name: 'get_time' } })
      .catch((err: unknown) => err);
    expect(wrong).toBeInstanceOf(OpenAI.BadRequestError);
    expect(wrong).toMatchObject({ status: 400, type: 'invalid_request_error', param: 'tool_choice', message: "400 Tool choice 'get_time' not found in 'tools' parameter." });
    const none = await upstreamClient.responses.create({ model: 'svc01', input: 'Weather?', tool_choice: { type: 'function', name: 'get_weather' } }).catch((err: unknown) => err);
    expect(none).toMatchObject({ status: 400, param: 'tool_choice' });
    expect(upstream.requests.length).toBe(sent);

    // A mode without tools is taken (OpenAI's Responses API does) and not sent on: a chat upstream refuses it.
    upstream.nextBehavior({ answer: 'No tools needed.' });
    const auto = await upstreamClient.responses.create({ model: 'svc01', input: 'Hi', tool_choice: 'auto' });
    expect(auto.output_text).toBe('No tools needed.');
    expect(upstream.requests.at(-1)!.body).not.toHaveProperty('tool_choice');
  });

  it("takes tool_choice allowed_tools: the model is offered only the tools it names, in the mode asked; one not in tools is a 400 naming it", async () => {
    const params = { type: 'object', properties: {}, required: [], additionalProperties: false };
    const tools = ['get_weather', 'get_time', 'search'].map((name) => ({ type: 'function' as const, name, parameters: params, strict: true }));
    const tool_choice = { type: 'allowed_tools' as const, mode: 'required' as const, tools: [{ type: 'function', name: 'get_time' }] };
    upstream.nextBehavior({ toolCalls: [{ id: 'call_t', name: 'get_time', arguments: {} }] });
    const response = await upstreamClient.responses.create({ model: 'svc01', input: 'What time is it?', tools, tool_choice });
    const sent = upstream.requests.at(-1)!.body as { tools: Array<{ function: { name: string } }>; tool_choice: unknown };
    expect(sent.tools.map((tool) => tool.function.name)).toEqual(['get_time']);
    expect(sent.tool_choice).toBe('required');
    expect(response.tool_choice).toEqual(tool_choice);
    expect(response.tools).toHaveLength(3);

    const before = upstream.requests.length;
    const wrong = await upstreamClient.responses
      .create({ model: 'svc01', input: 'Hi', tools, tool_choice: { ...tool_choice, tools: [{ type: 'function', name: 'get_time' }, { type: 'function', name: 'get_date' }] } })
      .catch((err: unknown) => err);
    expect(wrong).toMatchObject({ status: 400, param: 'tool_choice.tools[1]', message: "400 Tool choice 'get_date' not found in 'tools' parameter." });
    expect(upstream.requests.length).toBe(before);
  });

  it('refuses a conversation or a stored prompt (400 naming it) rather than answering without its turns or instructions', async () => {
    const sent = upstream.requests.length;
    const conversation = await upstreamClient.responses.create({ model: 'svc01', conversation: 'conv_123', input: 'And tomorrow?' }).catch((err: unknown) => err);
    expect(conversation).toBeInstanceOf(OpenAI.BadRequestError);
    expect(conversation).toMatchObject({ status: 400, code: 'invalid_value', param: 'conversation' });
    const prompt = await upstreamClient.responses.create({ model: 'svc01', prompt: { id: 'pmpt_123', variables: { city: 'Paris' } } }).catch((err: unknown) => err);
    expect(prompt).toMatchObject({ status: 400, code: 'invalid_value', param: 'prompt' });
    expect(upstream.requests.length).toBe(sent);
  });

  it('streams tool calls as function_call items', async () => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_s', name: 'get_weather', arguments: { city: 'Rome' } }] });
    const stream = upstreamClient.responses.stream({
      model: 'svc01',
      input: 'Weather in Rome?',
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} }, strict: false }],
    });
    const types = new Set<string>();
    for await (const event of stream) types.add(event.type);
    const final = await stream.finalResponse();
    expect(types).toContain('response.function_call_arguments.delta');
    expect(types).toContain('response.function_call_arguments.done');
    expect(final.output).toEqual([expect.objectContaining({ type: 'function_call', call_id: 'call_s', arguments: '{"city":"Rome"}', status: 'completed' })]);
  });

  it('streams parallel function calls one item at a time: the second is added after the first is done', async () => {
    upstream.nextBehavior({
      toolCalls: [
        { id: 'call_p', name: 'get_weather', arguments: { city: 'Paris' } },
        { id: 'call_r', name: 'get_weather', arguments: { city: 'Rome' } },
      ],
    });
    const stream = upstreamClient.responses.stream({
      model: 'svc01',
      input: 'Weather in Paris and Rome?',
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }],
    });
    const events: string[] = [];
    const args = new Map<number, string>();
    for await (const event of stream) {
      if ('output_index' in event) events.push(`${event.type.replace('response.', '')}#${event.output_index}`);
      if (event.type === 'response.function_call_arguments.delta') args.set(event.output_index, (args.get(event.output_index) ?? '') + event.delta);
    }
    // As OpenAI streams them, and as clients that keep one "current" call rely on.
    const item = (i: number) => [`output_item.added#${i}`, `function_call_arguments.delta#${i}`, `function_call_arguments.done#${i}`, `output_item.done#${i}`];
    expect(events.filter((e, i) => e !== events[i - 1])).toEqual([...item(0), ...item(1)]);
    expect([...args.values()]).toEqual(['{"city":"Paris"}', '{"city":"Rome"}']);
    const final = await stream.finalResponse();
    expect(final.output).toEqual([
      expect.objectContaining({ type: 'function_call', call_id: 'call_p', arguments: '{"city":"Paris"}', status: 'completed' }),
      expect.objectContaining({ type: 'function_call', call_id: 'call_r', arguments: '{"city":"Rome"}', status: 'completed' }),
    ]);
    // As stored (the stream's final response also carries the SDK's `parsed_arguments`).
    expect(final.output).toMatchObject((await upstreamClient.responses.retrieve(final.id)).output);
  });

  it('runs an Agents SDK agent through a tool call to the final answer', async () => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_a', name: 'lookup_landmark', arguments: { name: 'Eiffel Tower' } }] });
    upstream.nextBehavior({ answer: 'It was completed in 1889.' });
    let called = 0;
    const agent = new Agent({
      name: 'guide',
      model: new OpenAIResponsesModel(upstreamClient, 'svc01'),
      tools: [tool({ name: 'lookup_landmark', description: 'Look up a landmark', parameters: z.object({ name: z.string() }), execute: async () => (called++, DOC) })],
    });
    const result = await run(agent, 'When was the Eiffel Tower completed?');
    expect(called).toBe(1);
    expect(result.finalOutput).toBe('It was completed in 1889.');
  });

  it('runs an Agents SDK agent streamed through parallel tool calls, then continues it with previousResponseId', async () => {
    upstream.nextBehavior({
      toolCalls: [
        { id: 'call_p', name: 'weather', arguments: { city: 'Paris' } },
        { id: 'call_o', name: 'weather', arguments: { city: 'Oslo' } },
      ],
    });
    upstream.nextBehavior({ answer: 'Sunny in both.' });
    const cities: string[] = [];
    const weather = tool({ name: 'weather', description: 'The weather in a city', parameters: z.object({ city: z.string() }), execute: async ({ city }) => (cities.push(city), `Sunny in ${city}.`) });
    const agent = new Agent({ name: 'forecaster', instructions: 'Use the weather tool.', model: new OpenAIResponsesModel(upstreamClient, 'svc01'), tools: [weather] });
    const first = await run(agent, 'Weather in Paris and Oslo?', { stream: true });
    for await (const _ of first.toStream());
    await first.completed;
    expect(cities.sort()).toEqual(['Oslo', 'Paris']);
    expect(first.finalOutput).toBe('Sunny in both.');

    upstream.nextBehavior({ answer: 'Sunny tomorrow too.' });
    const second = await run(agent, 'And tomorrow?', { previousResponseId: first.lastResponseId });
    expect(second.finalOutput).toBe('Sunny tomorrow too.');
    expect((upstream.requests.at(-1)!.body as { messages: unknown[] }).messages).toEqual([
      { role: 'system', content: 'Use the weather tool.' },
      { role: 'user', content: 'Weather in Paris and Oslo?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_p', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_o', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_p', content: 'Sunny in Paris.' },
      { role: 'tool', tool_call_id: 'call_o', content: 'Sunny in Oslo.' },
      { role: 'assistant', content: 'Sunny in both.' },
      { role: 'user', content: 'And tomorrow?' },
    ]);
  });

  it('returns thinking mode\'s reasoning as a reasoning item, plain and streamed, and does not send it back upstream', async () => {
    upstream.nextBehavior({ reasoning: 'Paris is the capital of France.', answer: 'Paris.' });
    const plain = await upstreamClient.responses.create({ model: 'svc01', input: 'Capital of France?', svc: { thinking: true } } as never);
    expect(plain.output.map((item) => item.type)).toEqual(['reasoning', 'message']);
    expect(plain.output[0]).toMatchObject({ type: 'reasoning', summary: [{ type: 'summary_text', text: 'Paris is the capital of France.' }] });
    expect(plain.output_text).toBe('Paris.');

    upstream.nextBehavior({ reasoning: 'Paris is the capital of France.', answer: 'Paris.' });
    const stream = upstreamClient.responses.stream({ model: 'svc01', input: 'Capital of France?', svc: { thinking: true } } as never);
    const types: string[] = [];
    let summary = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.reasoning_summary_text.delta') summary += event.delta;
    }
    expect(summary).toBe('Paris is the capital of France.');
    expect(types.indexOf('response.reasoning_summary_text.done')).toBeLessThan(types.indexOf('response.output_text.delta'));
    const final = await stream.finalResponse();
    expect(final.output.map((item) => item.type)).toEqual(['reasoning', 'message']);

    upstream.nextBehavior({ answer: 'You asked about Paris.' });
    await upstreamClient.responses.create({ model: 'svc01', previous_response_id: final.id, input: 'What did I ask?' });
    const sent = upstream.requests.at(-1)!.body as { messages: Array<{ role: string; content: unknown }> };
    expect(sent.messages).toEqual([
      { role: 'user', content: 'Capital of France?' },
      { role: 'assistant', content: 'Paris.' },
      { role: 'user', content: 'What did I ask?' },
    ]);
  });

  it('passes an upstream failure on as the chat route does, and a failed stream ends with response.failed', async () => {
    upstream.nextBehavior({ status: 500, errorMessage: 'upstream broke' });
    await expect(upstreamClient.responses.create({ model: 'svc01', input: 'Hi' })).rejects.toMatchObject({ status: 502 });
    upstream.nextBehavior({ resetMidStream: 2 });
    const stream = upstreamClient.responses.stream({ model: 'svc01', input: 'Hi' });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect((await stream.finalResponse()).status).toBe('failed');
    expect(types).toContain('response.failed');
  });

  it.each([
    ['an upstream error event', { errorEvent: true, errorMessage: 'The model fell over.' }],
    ['an upstream connection cut', { resetMidStream: 3 }],
  ])('stores a stream that fails after some output (%s) as failed, with its error, and GET returns it', async (_name, behavior) => {
    upstream.nextBehavior({ answer: 'The Eiffel Tower was completed in 1889 and stands in Paris.', ...behavior });
    const stream = upstreamClient.responses.stream({ model: 'svc01', input: 'When was the tower completed?' });
    let text = '';
    let failedEvent: { response: { id: string; status?: string; error: unknown } } | undefined;
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.failed') failedEvent = event;
    }
    expect(text).not.toBe('');
    expect(failedEvent!.response.status).toBe('failed');
    const error = failedEvent!.response.error as { code: string; message: string };
    expect(error).toEqual({ code: expect.any(String), message: expect.any(String) });

    const stored = await upstreamClient.responses.retrieve(failedEvent!.response.id);
    expect(stored.status).toBe('failed');
    expect(stored.error).toEqual(error);
    expect(stored.output).toEqual([expect.objectContaining({ type: 'message', status: 'incomplete', content: [expect.objectContaining({ text })] })]);
    const items = await upstreamClient.responses.inputItems.list(stored.id);
    expect(items.data).toEqual([expect.objectContaining({ role: 'user', content: [{ type: 'input_text', text: 'When was the tower completed?' }] })]);
  });

  it('carries a failed response\'s input over to a follow-up, not its cut-off output; store: false keeps nothing', async () => {
    upstream.nextBehavior({ answer: 'The Eiffel Tower was completed in 1889 and stands in Paris.', resetMidStream: 3 });
    const stream = upstreamClient.responses.stream({ model: 'svc01', input: 'When was the tower completed?' });
    for await (const _ of stream);
    const failed = await stream.finalResponse();
    expect(failed.status).toBe('failed');

    upstream.nextBehavior({ answer: 'In 1889.' });
    const followUp = await upstreamClient.responses.create({ model: 'svc01', input: 'Please answer again.', previous_response_id: failed.id });
    expect(followUp.output_text).toBe('In 1889.');
    expect((upstream.requests.at(-1)!.body as { messages: unknown[] }).messages).toEqual([
      { role: 'user', content: 'When was the tower completed?' },
      { role: 'user', content: 'Please answer again.' },
    ]);

    upstream.nextBehavior({ answer: 'The Eiffel Tower was completed in 1889.', resetMidStream: 3 });
    const unstored = upstreamClient.responses.stream({ model: 'svc01', input: 'Hi', store: false });
    for await (const _ of unstored);
    const gone = await unstored.finalResponse();
    expect(gone.status).toBe('failed');
    await expect(upstreamClient.responses.retrieve(gone.id)).rejects.toMatchObject({ status: 404 });
  });
});
