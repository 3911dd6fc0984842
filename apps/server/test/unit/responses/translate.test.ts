import { describe, expect, it } from 'vitest';
import { outputAsInput, ResponseCreateRequestSchema, type ChatCompletion } from '@svc/protocol';
import { completedResponse, declaredTools, outputText, toChatRequest } from '../../../src/responses/translate.js';
import { ApiError } from '../../../src/http/errors.js';

const parse = (body: unknown) => ResponseCreateRequestSchema.parse(body);
let n = 0;
const newItemId = (prefix: string) => `${prefix}_${++n}`;

describe('toChatRequest', () => {
  it('puts instructions first as a system message and a string input as the user message, with the defaults', async () => {
    const chat = await toChatRequest(parse({ model: 'svc01', input: 'Hi', instructions: 'Be brief.' }), []);
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ]);
    expect(chat.max_tokens).toBe(4096);
    expect(chat.stream).toBeUndefined();
  });

  it('maps function tools, tool_choice, text.format, reasoning, max_output_tokens, svc, and passes service_tier, prompt_cache_key and safety_identifier on', async () => {
    const chat = await toChatRequest(
      parse({
        model: 'svc01',
        input: 'Weather in Paris?',
        tools: [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: {} }, strict: true }],
        tool_choice: { type: 'function', name: 'get_weather' },
        parallel_tool_calls: false,
        text: { format: { type: 'json_schema', name: 'w', schema: { type: 'object' }, strict: true } },
        reasoning: { effort: 'low' },
        max_output_tokens: 100,
        temperature: 0.5,
        svc: { thinking: true, dehallucinate: false },
        stream: true,
        service_tier: 'flex',
        prompt_cache_key: 'weather-v1',
        safety_identifier: 'user-42',
      }),
      [],
    );
    expect(chat).toMatchObject({ service_tier: 'flex', prompt_cache_key: 'weather-v1', safety_identifier: 'user-42' });
    expect(chat.tools).toEqual([
      { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: {} }, strict: true } },
    ]);
    expect(chat.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    expect(chat.parallel_tool_calls).toBe(false);
    expect(chat.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'w', schema: { type: 'object' }, strict: true } });
    expect(chat.reasoning_effort).toBe('low');
    expect(chat.max_tokens).toBe(100);
    expect(chat.temperature).toBe(0.5);
    expect(chat.svc).toEqual({ thinking: true, dehallucinate: false });
    expect(chat.stream).toBe(true);
  });

  it('joins a turn\'s function calls into one assistant message and their outputs into tool messages', async () => {
    const history = [
      { type: 'message' as const, role: 'user' as const, content: 'Weather in Paris and Rome?' },
      { type: 'function_call' as const, call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call' as const, call_id: 'call_2', name: 'get_weather', arguments: '{"city":"Rome"}' },
    ];
    const chat = await toChatRequest(
      parse({
        model: 'svc01',
        previous_response_id: 'resp_1',
        input: [
          { type: 'function_call_output', call_id: 'call_1', output: '18C' },
          { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: '24C' }] },
        ],
      }),
      history,
    );
    expect(chat.messages).toEqual([
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '18C' },
      { role: 'tool', tool_call_id: 'call_2', content: '24C' },
    ]);
  });

  it("sends the images and files a function returned (as the AI SDK sends a tool's image) after the turn's tool messages, as a user message", async () => {
    const image = { type: 'input_image' as const, image_url: 'data:image/png;base64,iVBORw0KGgo=' };
    const chat = await toChatRequest(
      parse({
        model: 'svc01',
        input: [
          { role: 'user', content: 'What is on the screens?' },
          { type: 'function_call', call_id: 'call_1', name: 'screenshot', arguments: '{}' },
          { type: 'function_call', call_id: 'call_2', name: 'screenshot', arguments: '{}' },
          { type: 'function_call_output', call_id: 'call_1', output: [{ type: 'input_text', text: 'Screen 1:' }, image] },
          { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_file', file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' }] },
          { role: 'user', content: 'Describe them.' },
        ],
      }),
      [],
    );
    expect(chat.messages.slice(2)).toEqual([
      { role: 'tool', tool_call_id: 'call_1', content: 'Screen 1:' },
      { role: 'tool', tool_call_id: 'call_2', content: '(returned in the next user message)' },
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: image.image_url } },
          { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' } },
        ],
      },
      { role: 'user', content: 'Describe them.' },
    ]);
    // The last item of the input too.
    const last = await toChatRequest(parse({ model: 'svc01', input: [{ type: 'function_call', call_id: 'c', name: 'shot', arguments: '{}' }, { type: 'function_call_output', call_id: 'c', output: [image] }] }), []);
    expect(last.messages.at(-1)).toEqual({ role: 'user', content: [{ type: 'image_url', image_url: { url: image.image_url } }] });
  });

  it('reads content parts: text and images for a user, output_text for an assistant; skips reasoning items', async () => {
    const chat = await toChatRequest(
      parse({
        model: 'svc01',
        input: [
          { role: 'developer', content: [{ type: 'input_text', text: 'Answer in French.' }] },
          { role: 'user', content: [{ type: 'input_text', text: 'What is this?' }, { type: 'input_image', image_url: 'https://example.com/a.png', detail: 'low' }] },
          { type: 'reasoning', id: 'rs_1', summary: [] },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Un chat.', annotations: [] }] },
        ],
      }),
      [],
    );
    expect(chat.messages).toEqual([
      { role: 'developer', content: 'Answer in French.' },
      { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'low' } }] },
      { role: 'assistant', content: 'Un chat.' },
    ]);
  });

  it.each([
    [{ tools: [{ type: 'web_search' }], input: 'x' }, 'tools[0].type', /built-in tool type 'web_search'/],
    [{ tools: [{ type: 'function', name: 'bad name' }], input: 'x' }, 'tools[0].name', /1-64 characters/],
    [{ input: [] }, 'input', /Missing required parameter: 'input'/],
    [{ input: 'x', conversation: 'conv_1' }, 'conversation', /does not serve the Conversations API/],
    [{ input: 'x', conversation: { id: 'conv_1' } }, 'conversation', /previous_response_id/],
    [{ input: 'x', prompt: { id: 'pmpt_1', variables: { city: 'Paris' } } }, 'prompt', /does not serve stored prompts/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }, 'input[0].content[0].image_url', /file ids/],
    [{ input: [{ role: 'system', content: [{ type: 'input_image', image_url: 'https://x' }] }] }, 'input[0].content[0].type', /only accepted in a user message/],
    [
      { input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }, { type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', file_id: 'file_1' }] }] },
      'input[1].output[0].image_url',
      /file ids/,
    ],
  ])('refuses %j with a 400 naming %s', async (body, param, message) => {
    const error = await toChatRequest(parse({ model: 'svc01', ...body }), []).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(400);
    expect((error as ApiError).param).toBe(param);
    expect((error as ApiError).message).toMatch(message);
  });
});

describe('a function output of images', () => {
  it('of more parts than a call takes as arguments (150,000, 9 MB) goes upstream whole', async () => {
    const image = { type: 'input_image', image_url: 'https://example.com/a.png' };
    const chat = await toChatRequest(
      parse({ model: 'svc01', input: [{ type: 'function_call', call_id: 'c', name: 'shot', arguments: '{}' }, { type: 'function_call_output', call_id: 'c', output: Array(150_000).fill(image) }] }),
      [],
    );
    expect(chat.messages.map((m) => m.role)).toEqual(['assistant', 'tool', 'user']);
    expect(chat.messages[2]!.content).toHaveLength(150_000);
  });
});

describe('completedResponse', () => {
  const svc = { dehallucinate_requested: true, grounded: true, score: 0.9, flagged_spans: [], checked: true };
  const completion = (message: ChatCompletion['choices'][number]['message'], finish_reason: 'stop' | 'length' | 'tool_calls'): ChatCompletion => ({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'svc01',
    choices: [{ index: 0, message, finish_reason, logprobs: null }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 2 } },
    svc,
  });
  const base = { id: 'resp_1', createdAt: 100, request: parse({ model: 'svc01', input: 'Hi', metadata: { run: '7' } }) };

  it('makes the message an output_text item, renames usage and keeps svc', async () => {
    const response = completedResponse(base, completion({ role: 'assistant', content: 'Hello.' }, 'stop'), 101, newItemId);
    expect(response).toMatchObject({
      id: 'resp_1',
      object: 'response',
      status: 'completed',
      created_at: 100,
      completed_at: 101,
      model: 'svc01',
      metadata: { run: '7' },
      usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 2 }, output_tokens: 5, total_tokens: 15 },
      svc,
    });
    expect(response.output).toEqual([
      { type: 'message', id: expect.stringMatching(/^msg_/), status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello.', annotations: [], logprobs: [] }] },
    ]);
    expect(outputText(response.output)).toBe('Hello.');
  });

  it('makes tool calls function_call items that the next turn reads back as input', async () => {
    const response = completedResponse(
      base,
      completion({ role: 'assistant', content: null, tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'f', arguments: '{}' } }] }, 'tool_calls'),
      101,
      newItemId,
    );
    expect(response.output).toEqual([{ type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: 'call_9', name: 'f', arguments: '{}', status: 'completed' }]);
    const next = await toChatRequest(parse({ model: 'svc01', input: [{ type: 'function_call_output', call_id: 'call_9', output: 'ok' }] }), [
      { type: 'message', role: 'user', content: 'Hi' },
      ...outputAsInput(response.output),
    ]);
    expect(next.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
  });

  it('says a cut answer is incomplete for max_output_tokens', async () => {
    const response = completedResponse(base, completion({ role: 'assistant', content: 'Hel' }, 'length'), 101, newItemId);
    expect(response.status).toBe('incomplete');
    expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(response.output[0]).toMatchObject({ status: 'incomplete' });
  });
});

describe('declaredTools: strict left out', () => {
  it('reads an object of 200,000 required properties in one pass (the required list was searched once per property)', () => {
    const names = Array.from({ length: 200_000 }, (_, i) => `field_${i}`);
    const properties = Object.fromEntries(names.map((name) => [name, { type: 'string' }]));
    const tool = (required: string[]) => ({ type: 'function', name: 'fill', parameters: { type: 'object', properties, required, additionalProperties: false } });
    const [closed, open] = declaredTools(parse({ model: 'svc01', input: 'Hi', tools: [tool(names), tool(names.slice(1))] }));
    expect([closed!.strict, open!.strict]).toEqual([true, false]);
  });
});
