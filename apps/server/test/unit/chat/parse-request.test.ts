import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ChatCompletionRequestSchema, ResponseCreateWireRequestSchema } from '@svc/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CHAT_REQUEST, firstProblem, parseChatRequest, parseRequestBodyInTurns } from '../../../src/chat/request.js';
import { RESPONSES_REQUEST } from '../../../src/responses/create.js';
import { ApiError } from '../../../src/http/errors.js';
import { turns } from '../../../src/turns.js';

/** What one schema pass over the whole body answers: the data, or the error's code, param and message. */
function onePass(schema: typeof ChatCompletionRequestSchema | typeof ResponseCreateWireRequestSchema, body: unknown) {
  const parsed = schema.safeParse(body);
  if (parsed.success) return { data: parsed.data };
  const error = firstProblem(parsed.error.issues, body);
  return { error: { code: error.code, param: error.param, message: error.message } };
}

async function inTurns(run: () => Promise<unknown>) {
  try {
    return { data: await run() };
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return { error: { code: err.code, param: err.param, message: err.message } };
  }
}

/** A turn clock that runs out every `every` calls, so that short lists cross turns too. */
function everyNth(every: number): () => boolean {
  let calls = 0;
  return () => ++calls % every === 0;
}

const goodMessage = fc.constantFrom<unknown>(
  { role: 'user', content: 'How tall is the tower?' },
  { role: 'system', content: [{ type: 'text', text: 'Answer briefly.' }] },
  { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
  { role: 'tool', content: 'ok', tool_call_id: 'c1', extra: 1 },
);
const badMessage = fc.constantFrom<unknown>(
  { role: 'user' },
  { role: 'user', content: 5 },
  { role: 'wizard', content: 'hi' },
  { content: 'hi' },
  { role: 'tool', content: 'ok' },
  'hello',
  null,
  { role: 'assistant', tool_calls: [{ id: 1 }] },
);
const CHAT = CHAT_REQUEST;
const RESPONSES = RESPONSES_REQUEST;
/** Every list read a slice of `perStep` items at a time, however short: the path long lists take. */
const sliced = (perStep: number) => ({ onePassItems: 0, perStep });

const tool = fc.constantFrom<unknown>(
  { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } },
  { type: 'function', function: { name: 'weather', description: 'Weather now', strict: true } },
  { type: 'function', function: { name: 'bad name!' } },
  { type: 'function', function: { name: 'f', parameters: 'none' } },
  { type: 'web_search' },
  5,
);
const field = fc.constantFrom<[string, unknown]>(
  ['temperature', 5],
  ['temperature', 'hot'],
  ['max_tokens', 0],
  ['stream', 'yes'],
  ['n', 2],
  ['tools', 'none'],
  ['metadata', { a: 1 }],
  ['svc', { thinkng: true }],
  ['user', 'u-1'],
  ['seed', 1.5],
);

describe('parseRequestBodyInTurns', () => {
  it('answers what one pass over the whole chat body answers: the same data, or the same first problem', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof({ weight: 4, arbitrary: goodMessage }, { weight: 1, arbitrary: badMessage }), { maxLength: 12 }),
        fc.option(fc.array(tool, { maxLength: 6 }), { nil: undefined }),
        fc.array(field, { maxLength: 3 }),
        fc.constantFrom<unknown>('svc01', 5, undefined),
        fc.boolean(),
        fc.integer({ min: 1, max: 5 }),
        async (messages, tools, fields, model, messagesFirst, every) => {
          const body: Record<string, unknown> = {};
          if (!messagesFirst && model !== undefined) body.model = model;
          if (tools !== undefined && !messagesFirst) body.tools = tools;
          body.messages = messages;
          if (messagesFirst && model !== undefined) body.model = model;
          if (tools !== undefined && messagesFirst) body.tools = tools;
          for (const [k, v] of fields) body[k] = v;
          expect(await inTurns(() => parseRequestBodyInTurns(CHAT, body, everyNth(every), sliced(every)))).toEqual(onePass(ChatCompletionRequestSchema, body));
        },
      ),
      { numRuns: 400 },
    );
  });

  it('checks the lists themselves as one pass does: missing, not an array, empty, too long', async () => {
    const hi = [{ role: 'user', content: 'Hi' }];
    const tools = (n: number) => Array.from({ length: n }, (_, i) => ({ type: 'function', function: { name: `f${i}` } }));
    for (const body of [
      { model: 'svc01' },
      { model: 'svc01', messages: 'hi' },
      { model: 'svc01', messages: [] },
      { messages: [{ role: 'user' }] },
      { model: 'svc01', messages: hi, tools: tools(129) },
      // Too long, with a tool missing a field: one pass refuses the length and reads no tool.
      { model: 'svc01', messages: hi, tools: [...tools(128), { type: 'function', function: {} }] },
      { model: 'svc01', messages: [{ role: 'user' }], tools: [...tools(128), 5] },
    ]) {
      const answer = await inTurns(() => parseRequestBodyInTurns(CHAT, body, turns(), sliced(7)));
      expect(answer.error).toBeDefined();
      expect(answer).toEqual(onePass(ChatCompletionRequestSchema, body));
    }
  });

  it('validates a Responses input as one pass does, and names the item that is wrong', async () => {
    const items = [
      { role: 'user', content: 'Hi' },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      { type: 'reasoning', id: 'rs_1' },
    ];
    for (const input of ['Hi', items, []]) {
      const body = { model: 'svc01', input, temperature: 1 };
      expect(await inTurns(() => parseRequestBodyInTurns(RESPONSES, body, everyNth(2), sliced(3)))).toEqual(onePass(ResponseCreateWireRequestSchema, body));
    }
    // A bad item is named, in one pass (the input is a list: the list alternative judges it) and a slice at a time.
    const bad = { model: 'svc01', input: [...items, { role: 'user', content: 5 }] };
    const answer = await inTurns(() => parseRequestBodyInTurns(RESPONSES, bad, turns(), sliced(3)));
    expect(answer.error).toMatchObject({ code: 'invalid_type', param: 'input[4].content' });
    expect(onePass(ResponseCreateWireRequestSchema, bad).error).toEqual(answer.error);
    // A field before the input that is wrong comes first, as in one pass.
    expect((await inTurns(() => parseRequestBodyInTurns(RESPONSES, { ...bad, model: 5 }, turns(), sliced(3)))).error).toMatchObject({ param: 'model' });
  });

  it.each([
    [{ type: 'function_call_output', output: 'ok' }, 'missing_required_parameter', 'input[1].call_id', "Missing required parameter: 'input[1].call_id'."],
    [{ type: 'function_call', call_id: 'c1', name: 'f', arguments: {} }, 'invalid_type', 'input[1].arguments', /^Invalid type for 'input\[1\]\.arguments': expected string/],
    [{ type: 'item_reference' }, 'missing_required_parameter', 'input[1].id', "Missing required parameter: 'input[1].id'."],
    [{ role: 'user', content: [{ type: 'input_text', text: 5 }] }, 'invalid_type', 'input[1].content[0].text', /expected string/],
    [
      { type: 'function_call_outptu', call_id: 'c1', output: 'ok' },
      'invalid_value',
      'input[1].type',
      `Invalid value for 'input[1].type': "function_call_outptu". Supported values are: 'message', 'function_call', 'function_call_output', 'custom_tool_call', 'custom_tool_call_output', 'reasoning', 'item_reference'.`,
    ],
  ])('names the field of a Responses input item that is wrong, as OpenAI does (%j)', async (item, code, param, message) => {
    const body = { model: 'svc01', input: [{ role: 'user', content: 'Hi' }, item] };
    const answer = await inTurns(() => parseRequestBodyInTurns(RESPONSES, body, turns()));
    expect(answer.error).toMatchObject({ code, param, message });
    expect(await inTurns(() => parseRequestBodyInTurns(RESPONSES, body, turns(), sliced(1)))).toEqual(answer);
  });

  it('lets the event loop run while 100,000 messages are validated', async () => {
    const messages = Array.from({ length: 100_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Message ${i}.` }));
    let served = 0;
    let parsing = true;
    const other = (async () => {
      while (parsing) {
        await yieldToEventLoop();
        served++;
      }
    })();
    const request = await parseChatRequest({ model: 'svc01', messages }, turns());
    parsing = false;
    await other;
    expect(request.messages).toEqual(messages);
    // One pass in one step lets the other loop run once, after it; item by item, it ran in between too.
    expect(served).toBeGreaterThan(1);
  });
});
