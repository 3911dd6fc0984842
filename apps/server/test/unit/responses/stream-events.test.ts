import { describe, expect, it } from 'vitest';
import { ResponseCreateRequestSchema, type ChatCompletionChunk } from '@svc/protocol';
import { EscapedString } from '../../../src/json-in-turns.js';
import { ResponseEvents } from '../../../src/responses/stream-events.js';
import { pendingResponse } from '../../../src/responses/translate.js';

interface Event {
  type: string;
  sequence_number: number;
  [key: string]: unknown;
}

function parseSse(text: string): Event[] {
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((block) => {
      const [eventLine, dataLine] = block.split('\n');
      const event = JSON.parse(dataLine!.slice('data: '.length)) as Event;
      expect(eventLine).toBe(`event: ${event.type}`);
      return event;
    });
}

const chunk = (choices: ChatCompletionChunk['choices'], extra: Partial<ChatCompletionChunk> = {}): ChatCompletionChunk => ({
  id: 'c',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'svc01',
  choices,
  ...extra,
});
const svc = { dehallucinate_requested: true, grounded: true, score: 1, flagged_spans: [], checked: true };

function run(chunks: ChatCompletionChunk[]): Event[] {
  let n = 0;
  const base = { id: 'resp_1', createdAt: 1, request: ResponseCreateRequestSchema.parse({ model: 'svc01', input: 'Hi', stream: true }) };
  const events = new ResponseEvents(pendingResponse(base), (prefix) => `${prefix}_${++n}`, () => 2);
  let text = events.start();
  for (const c of chunks) text += events.chunk(c);
  text += events.finish();
  return parseSse(text);
}

/** The SSE text of a stream whose request has `instructions`, with them escaped once beforehand or not. */
async function streamed(instructions: string, escapedOnce: boolean): Promise<string> {
  let n = 0;
  const base = { id: 'resp_1', createdAt: 1, request: ResponseCreateRequestSchema.parse({ model: 'svc01', input: 'Hi', instructions, stream: true }) };
  const escaped = escapedOnce ? await EscapedString.of(instructions, () => true) : undefined;
  const events = new ResponseEvents(pendingResponse(base), (prefix) => `${prefix}_${++n}`, () => 2, escaped);
  let text = events.start();
  text += events.chunk(chunk([{ index: 0, delta: { role: 'assistant', content: instructions.slice(0, 20) }, finish_reason: null }]));
  text += events.chunk(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }], { svc }));
  return text + events.finish();
}

describe('ResponseEvents', () => {
  it('writes the same events with instructions escaped once as with each event escaping them', async () => {
    const instructions = 'Answer "briefly".\n\u0001 😀 '.repeat(20_000);
    const once = await streamed(instructions, true);
    expect(once).toBe(await streamed(instructions, false));
    expect(parseSse(once).filter((e) => (e as { response?: { instructions?: string } }).response?.instructions === instructions)).toHaveLength(3);
  });

  it('streams text in OpenAI\'s order, numbers every event, and ends with the whole response, usage and svc', () => {
    const events = run([
      chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]),
      chunk([{ index: 0, delta: { content: 'Hel' }, finish_reason: null }]),
      chunk([{ index: 0, delta: { content: 'lo.' }, finish_reason: null }]),
      chunk([{ index: 0, delta: {}, finish_reason: 'stop' }], { svc }),
      chunk([], { usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }),
    ]);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]).toMatchObject({ response: { id: 'resp_1', status: 'in_progress', output: [] } });
    expect(events[4]).toMatchObject({ item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hel' });
    expect(events[6]).toMatchObject({ text: 'Hello.' });
    const completed = events.at(-1)!.response as Record<string, unknown>;
    expect(completed).toMatchObject({
      status: 'completed',
      completed_at: 2,
      output: [{ type: 'message', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'Hello.' }] }],
      usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
      svc,
    });
  });

  it('streams parallel tool calls as function_call items one at a time, the first as it comes, the second whole after it', () => {
    const events = run([
      chunk([{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '' } }] }, finish_reason: null }]),
      chunk([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] }, finish_reason: null }]),
      chunk([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '1}' } }] }, finish_reason: null }]),
      chunk([{ index: 0, delta: { tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'g', arguments: '{}' } }] }, finish_reason: null }]),
      chunk([{ index: 0, delta: {}, finish_reason: 'tool_calls' }], { svc }),
    ]);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[2]).toMatchObject({ output_index: 0, item: { type: 'function_call', id: 'fc_1', call_id: 'call_a', name: 'f', arguments: '', status: 'in_progress' } });
    expect(events[5]).toMatchObject({ item_id: 'fc_1', output_index: 0, arguments: '{"x":1}', name: 'f' });
    expect(events[7]).toMatchObject({ output_index: 1, item: { type: 'function_call', id: 'fc_2', call_id: 'call_b', name: 'g', arguments: '', status: 'in_progress' } });
    expect(events[8]).toMatchObject({ item_id: 'fc_2', output_index: 1, delta: '{}' });
    expect((events.at(-1)!.response as { output: unknown[] }).output).toEqual([
      { type: 'function_call', id: 'fc_1', call_id: 'call_a', name: 'f', arguments: '{"x":1}', status: 'completed' },
      { type: 'function_call', id: 'fc_2', call_id: 'call_b', name: 'g', arguments: '{}', status: 'completed' },
    ]);
  });

  it("keeps every call's arguments whole when an upstream interleaves the deltas of parallel calls", () => {
    const call = (index: number, fn: Record<string, string>, id?: string) =>
      chunk([{ index: 0, delta: { tool_calls: [{ index, ...(id && { id, type: 'function' }), function: fn }] }, finish_reason: null }]);
    const events = run([
      call(0, { name: 'f', arguments: '{"a":' }, 'call_a'),
      call(1, { name: 'g', arguments: '{"b":' }, 'call_b'),
      call(0, { arguments: '1}' }),
      call(1, { arguments: '2}' }),
      chunk([{ index: 0, delta: {}, finish_reason: 'tool_calls' }]),
    ]);
    const done = events.filter((e) => e.type === 'response.function_call_arguments.done');
    expect(done).toEqual([
      expect.objectContaining({ item_id: 'fc_1', output_index: 0, arguments: '{"a":1}' }),
      expect.objectContaining({ item_id: 'fc_2', output_index: 1, arguments: '{"b":2}' }),
    ]);
    const deltas = (id: string) => events.filter((e) => e.type === 'response.function_call_arguments.delta' && e.item_id === id).map((e) => e.delta).join('');
    expect([deltas('fc_1'), deltas('fc_2')]).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('ends a cut answer with response.incomplete', () => {
    const events = run([chunk([{ index: 0, delta: { content: 'Hel' }, finish_reason: 'length' }])]);
    expect(events.at(-1)).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } });
  });

  it('ends a broken stream with response.failed carrying the error and what was streamed', () => {
    let n = 0;
    const base = { id: 'resp_1', createdAt: 1, request: ResponseCreateRequestSchema.parse({ model: 'svc01', input: 'Hi' }) };
    const events = new ResponseEvents(pendingResponse(base), (p) => `${p}_${++n}`, () => 2);
    const text = events.start() + events.chunk(chunk([{ index: 0, delta: { content: 'Hel' }, finish_reason: null }])) + events.fail({ code: 'upstream_error', message: 'boom' });
    const parsed = parseSse(text);
    expect(parsed.at(-2)).toMatchObject({ type: 'response.output_item.done', item: { status: 'incomplete' } });
    expect(parsed.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'failed', error: { code: 'upstream_error', message: 'boom' } } });
  });
});

describe('ResponseEvents.abandon', () => {
  function events(): ResponseEvents {
    let n = 0;
    const base = { id: 'resp_1', createdAt: 1, request: ResponseCreateRequestSchema.parse({ model: 'svc01', input: 'Hi', stream: true }) };
    return new ResponseEvents(pendingResponse(base), (prefix) => `${prefix}_${++n}`, () => 2);
  }
  const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };

  it('after the stream ended (the client left while it was being stored) gives the response it ended with', () => {
    const e = events();
    e.start();
    e.chunk(chunk([{ index: 0, delta: { role: 'assistant', content: 'Owls hunt at night.' }, finish_reason: null }]));
    e.chunk(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }], { svc }));
    e.finish();
    const ended = e.result;
    expect(e.abandon(usage)).toBe(ended);
    expect(ended.status).toBe('completed');
  });

  it('after a failure keeps the failure', () => {
    const e = events();
    e.start();
    e.chunk(chunk([{ index: 0, delta: { role: 'assistant', content: 'Owls' }, finish_reason: null }]));
    e.fail({ code: 'upstream_error', message: 'Upstream failed mid-stream' }, usage);
    expect(e.abandon(usage).status).toBe('failed');
  });

  it('mid-answer stores what came as incomplete', () => {
    const e = events();
    e.start();
    e.chunk(chunk([{ index: 0, delta: { role: 'assistant', content: 'Owls' }, finish_reason: null }]));
    const left = e.abandon(usage);
    expect(left.status).toBe('incomplete');
    expect(JSON.stringify(left.output)).toContain('Owls');
  });
});
