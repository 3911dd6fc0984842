import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { zodFunction } from 'openai/helpers/zod';
import { createOpenAI } from '@ai-sdk/openai';
import { stepCountIs, streamText, tool } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { AIMessageChunk, HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { z } from 'zod';
import type { FakeToolCall, FakeUpstream } from './support/fake-upstream.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';

/**
 * Tool loops as apps run them through the client libraries: the openai SDK's runTools and parse helpers, the AI
 * SDK's multi-step streamText, LangChain's bindTools with ToolMessage rounds. Each round is one chat request
 * carrying the conversation so far: the calls, every result, and the next round.
 */

const PARIS_AND_OSLO: FakeToolCall[] = [
  { id: 'call_paris', name: 'weather', arguments: { city: 'Paris' } },
  { id: 'call_oslo', name: 'weather', arguments: { city: 'Oslo' } },
];
const weather = async ({ city }: { city: string }) => `Sunny in ${city}.`;
const call = (id: string, city: string) => ({ id, type: 'function', function: { name: 'weather', arguments: JSON.stringify({ city }) } });
/** The conversation the last round sends: two parallel calls and their results, a third call and its result. */
const THREE_CALLS = [
  { role: 'user', content: 'Weather in Paris, Oslo and Rome?' },
  { role: 'assistant', content: null, tool_calls: [call('call_paris', 'Paris'), call('call_oslo', 'Oslo')] },
  { role: 'tool', tool_call_id: 'call_paris', content: 'Sunny in Paris.' },
  { role: 'tool', tool_call_id: 'call_oslo', content: 'Sunny in Oslo.' },
  { role: 'assistant', content: null, tool_calls: [call('call_rome', 'Rome')] },
  { role: 'tool', tool_call_id: 'call_rome', content: 'Sunny in Rome.' },
];

let rig: AuditedServer;
let upstream: FakeUpstream;

beforeAll(async () => {
  rig = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'gpt-4o' });
  ({ upstream } = rig);
});
afterAll(() => rig?.close());
beforeEach(() => {
  upstream.requests.length = 0;
});

/** Two parallel calls, then one more, then the answer. */
function threeRounds(): void {
  upstream.nextBehavior({ toolCalls: PARIS_AND_OSLO });
  upstream.nextBehavior({ toolCalls: [{ id: 'call_rome', name: 'weather', arguments: { city: 'Rome' } }] });
  upstream.nextBehavior({ answer: 'It is sunny in Paris, Oslo and Rome.' });
}
/** The messages of the i-th upstream request; an assistant turn's content "" (LangChain's, a stream's) read as null. */
const sentMessages = (i: number) =>
  (upstream.requests[i]!.body as { messages: Array<{ content?: unknown }> }).messages.map((m) => (m.content === '' ? { ...m, content: null } : m));

describe('openai SDK', () => {
  it.each([false, true])('runTools (stream: %s): parallel calls, a second round, the answer; each round sends the whole conversation', async (stream) => {
    threeRounds();
    const params = {
      model: 'svc01',
      messages: [{ role: 'user' as const, content: 'Weather in Paris, Oslo and Rome?' }],
      tools: [zodFunction({ name: 'weather', parameters: z.object({ city: z.string() }), function: weather })],
    };
    const runner = stream ? rig.client.chat.completions.runTools({ ...params, stream: true }) : rig.client.chat.completions.runTools(params);
    expect(await runner.finalContent()).toBe('It is sunny in Paris, Oslo and Rome.');
    expect(upstream.requests).toHaveLength(3);
    expect(sentMessages(2)).toEqual(THREE_CALLS);
    // zodFunction tools are strict: sent as such.
    expect((upstream.requests[0]!.body as { tools: Array<{ function: { strict?: boolean } }> }).tools[0]!.function.strict).toBe(true);
    const final = await runner.finalChatCompletion();
    expect((final as unknown as { svc: { checked: boolean; grounded: boolean } }).svc).toMatchObject({ checked: true, grounded: true });
  });

  it('parse with zodFunction tools: every parallel call with its parsed_arguments', async () => {
    upstream.nextBehavior({ toolCalls: PARIS_AND_OSLO });
    const completion = await rig.client.chat.completions.parse({
      model: 'svc01',
      messages: [{ role: 'user', content: 'Weather in Paris and Oslo?' }],
      tools: [zodFunction({ name: 'weather', parameters: z.object({ city: z.string() }) })],
    });
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls');
    expect(completion.choices[0]!.message.tool_calls!.map((c) => c.type === 'function' && c.function.parsed_arguments)).toEqual([{ city: 'Paris' }, { city: 'Oslo' }]);
  });
});

describe("openai SDK: tool_choice's forms", () => {
  const fn = (name: string) => ({ type: 'function' as const, function: { name, parameters: { type: 'object', properties: { city: { type: 'string' } } } } });
  const tools = [fn('weather'), fn('time'), fn('news')];
  const allowed = (mode: 'auto' | 'required', ...names: string[]) => ({
    type: 'allowed_tools' as const,
    allowed_tools: { mode, tools: names.map((name) => ({ type: 'function', function: { name } })) },
  });
  const ask = { model: 'svc01', messages: [{ role: 'user' as const, content: 'Weather in Paris?' }], tools };

  it.each([false, true])('allowed_tools (stream: %s): the model is offered only the tools it names, in the mode asked', async (stream) => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_paris', name: 'weather', arguments: { city: 'Paris' } }] });
    const params = { ...ask, tool_choice: allowed('required', 'weather', 'time') };
    const completion = stream
      ? await rig.client.chat.completions.stream(params).finalChatCompletion()
      : await rig.client.chat.completions.create(params);
    expect(completion.choices[0]!.message.tool_calls).toEqual([
      { id: 'call_paris', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
    ]);
    // As vLLM, Ollama and the rest read it: the named tools and the mode (only OpenAI takes the choice itself).
    const sent = upstream.requests[0]!.body as { tools: Array<{ function: { name: string } }>; tool_choice: unknown };
    expect(sent.tools.map((tool) => tool.function.name)).toEqual(['weather', 'time']);
    expect(sent.tool_choice).toBe('required');
  });

  it('allowed_tools naming a function not in tools, a tool that is not a function, or none in mode required, is a 400 naming it, before the upstream', async () => {
    for (const [choice, param] of [
      [allowed('auto', 'weather', 'stocks'), 'tool_choice.allowed_tools.tools[1]'],
      [{ type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'custom', custom: { name: 'weather' } }] } }, 'tool_choice.allowed_tools.tools[0]'],
      [{ type: 'allowed_tools', allowed_tools: { mode: 'sometimes', tools: [] } }, 'tool_choice.allowed_tools.mode'],
      // Required to call one of none: it was sent on as no tools at all, and the model answered in text.
      [allowed('required'), 'tool_choice.allowed_tools.tools'],
    ] as const) {
      const error = await rig.client.chat.completions.create({ ...ask, tool_choice: choice as never }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('a tool of a type chat completions has not (a Responses built-in) is a 400 naming tools[i].type and the types there are', async () => {
    const error = await rig.client.chat.completions.create({ ...ask, tools: [...tools, { type: 'web_search' } as never] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ code: 'invalid_value', param: 'tools[3].type' });
    expect((error as Error).message).toContain("Supported values are: 'function' and 'custom'");
    expect(upstream.requests).toHaveLength(0);
  });

  it("'none', 'required' and a named function reach the upstream as sent, with every tool", async () => {
    for (const choice of ['none', 'required', { type: 'function', function: { name: 'time' } }] as const) {
      upstream.requests.length = 0;
      await rig.client.chat.completions.create({ ...ask, tool_choice: choice });
      expect(upstream.requests[0]!.body).toMatchObject({ tool_choice: choice, tools });
    }
  });
});

describe("openai SDK: GPT-5's custom tools (free-text input)", () => {
  const runPython = { type: 'custom' as const, custom: { name: 'run_python', description: 'Runs Python code.', format: { type: 'text' as const } } };
  const sqlGrammar = {
    type: 'custom' as const,
    custom: { name: 'sql', description: 'One SELECT.', format: { type: 'grammar' as const, grammar: { syntax: 'lark' as const, definition: 'start: "SELECT " /[a-z*, ]+/' } } },
  };
  const ask = { model: 'svc01', messages: [{ role: 'user' as const, content: 'What is 2**10?' }], tools: [runPython, sqlGrammar] };
  const code = 'print(2 ** 10)';
  const asked = { id: 'call_py', type: 'custom', custom: { name: 'run_python', input: code } };

  it.each([false, true])('the call comes back as OpenAI sends it (stream: %s); its result goes back in the next round; the audit skips it', async (stream) => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_py', name: 'run_python', input: code }] });
    let calls: unknown;
    let id = '';
    let finish: string | null | undefined;
    if (stream) {
      // Assembled as OpenAI streams a custom call: the first fragment names it, the next ones carry `custom.input` pieces.
      const assembled: Array<{ id?: string; type?: string; custom: { name: string; input: string } }> = [];
      for await (const chunk of await rig.client.chat.completions.create({ ...ask, stream: true })) {
        id = chunk.id;
        const choice = chunk.choices[0];
        if (choice?.finish_reason) finish = choice.finish_reason;
        for (const part of (choice?.delta.tool_calls ?? []) as Array<{ index: number; id?: string; type?: string; custom?: { name?: string; input?: string } }>) {
          const into = (assembled[part.index] ??= { custom: { name: '', input: '' } });
          if (part.id) into.id = part.id;
          if (part.type) into.type = part.type;
          into.custom.name += part.custom?.name ?? '';
          into.custom.input += part.custom?.input ?? '';
        }
      }
      calls = assembled;
    } else {
      const completion = await rig.client.chat.completions.create(ask);
      id = completion.id;
      calls = completion.choices[0]!.message.tool_calls;
      finish = completion.choices[0]!.finish_reason;
      expect((completion as unknown as { svc: { checked: boolean; grounded: boolean } }).svc).toMatchObject({ checked: false, grounded: true });
    }
    expect(calls).toEqual([asked]);
    expect(finish).toBe('tool_calls');
    // The tools went upstream as declared, formats and grammars included.
    expect((upstream.requests[0]!.body as { tools: unknown }).tools).toEqual([runPython, sqlGrammar]);

    // The next round carries the custom call in the assistant turn and the tool's output: both are taken.
    upstream.nextBehavior({ answer: '2 ** 10 is 1024.' });
    const messages = [...ask.messages, { role: 'assistant' as const, content: null, tool_calls: [asked as never] }, { role: 'tool' as const, tool_call_id: 'call_py', content: '1024' }];
    const answer = await rig.client.chat.completions.create({ ...ask, messages });
    expect(answer.choices[0]!.message.content).toBe('2 ** 10 is 1024.');
    expect((upstream.requests[1]!.body as { messages: unknown[] }).messages[1]).toEqual({ role: 'assistant', content: null, tool_calls: [asked] });

    // The call's round is audited with no answer text (its input is code for the app, not a claim to check).
    const audited = (list: typeof rig.receiver.received) => list.map((d) => JSON.parse(d.raw.toString()) as Record<string, unknown>).find((p) => p.request_id === id);
    const payload = audited(await rig.receiver.waitFor((list) => audited(list) !== undefined));
    expect(payload).toMatchObject({ status_code: 200, streaming: stream, response_text: '', grounded: true, grounding_checked: false });
  });

  it('tool_choice naming a custom tool reaches the upstream as sent; naming one not declared (or a function of its name) is a 400', async () => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_py', name: 'run_python', input: code }] });
    const choice = { type: 'custom' as const, custom: { name: 'run_python' } };
    await rig.client.chat.completions.create({ ...ask, tool_choice: choice });
    expect(upstream.requests[0]!.body).toMatchObject({ tool_choice: choice });
    for (const wrong of [{ type: 'custom', custom: { name: 'run_bash' } }, { type: 'function', function: { name: 'run_python' } }]) {
      const error = await rig.client.chat.completions.create({ ...ask, tool_choice: wrong as never }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ code: 'invalid_value', param: 'tool_choice' });
    }
    expect(upstream.requests).toHaveLength(1);
  });

  it('a custom tool with a bad name or grammar syntax is a 400 naming the field', async () => {
    for (const [tool, param] of [
      [{ type: 'custom', custom: { name: 'run python' } }, 'tools[0].custom.name'],
      [{ type: 'custom', custom: { name: 'sql', format: { type: 'grammar', grammar: { syntax: 'ebnf', definition: 'x' } } } }, 'tools[0].custom.format.grammar.syntax'],
    ] as const) {
      const error = await rig.client.chat.completions.create({ ...ask, tools: [tool as never] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ param });
    }
    expect(upstream.requests).toHaveLength(0);
  });
});

describe("openai SDK, Responses API: GPT-5's custom tools", () => {
  const runPython = { type: 'custom' as const, name: 'run_python', description: 'Runs Python code.', format: { type: 'text' as const } };
  const sqlGrammar = { type: 'custom' as const, name: 'sql', description: 'One SELECT.', format: { type: 'grammar' as const, syntax: 'lark' as const, definition: 'start: "SELECT " /[a-z*, ]+/' } };
  const code = 'print(2 ** 10)';

  it.each([false, true])('the call comes back as a custom_tool_call item (stream: %s); its output goes back through previous_response_id; the audit skips it', async (stream) => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_py', name: 'run_python', input: code }] });
    const ask = { model: 'svc01', input: 'What is 2**10?', tools: [runPython, sqlGrammar] };
    let response: OpenAI.Responses.Response;
    const events: string[] = [];
    let streamedInput = '';
    let doneInput: string | undefined;
    if (stream) {
      const events$ = await rig.client.responses.create({ ...ask, stream: true });
      let completed: OpenAI.Responses.Response | undefined;
      for await (const event of events$) {
        events.push(event.type);
        if (event.type === 'response.custom_tool_call_input.delta') streamedInput += event.delta;
        if (event.type === 'response.custom_tool_call_input.done') doneInput = event.input;
        if (event.type === 'response.completed') completed = event.response;
      }
      response = completed!;
    } else {
      response = await rig.client.responses.create(ask);
    }
    const [item] = response.output;
    expect(response.output).toHaveLength(1);
    expect(item).toMatchObject({ type: 'custom_tool_call', call_id: 'call_py', name: 'run_python', input: code, status: 'completed' });
    expect(item!.id).toMatch(/^ctc_/);
    expect(response.tools).toEqual([runPython, sqlGrammar]);
    if (stream) {
      expect(streamedInput).toBe(code);
      expect(doneInput).toBe(code);
      expect(events.filter((type) => type.startsWith('response.output_item') || type.startsWith('response.custom_tool_call'))).toEqual([
        'response.output_item.added',
        ...events.filter((type) => type === 'response.custom_tool_call_input.delta'),
        'response.custom_tool_call_input.done',
        'response.output_item.done',
      ]);
    }
    // The tools went upstream as chat declares them, the grammar under `grammar`.
    expect((upstream.requests[0]!.body as { tools: unknown }).tools).toEqual([
      { type: 'custom', custom: { name: 'run_python', description: 'Runs Python code.', format: { type: 'text' } } },
      { type: 'custom', custom: { name: 'sql', description: 'One SELECT.', format: { type: 'grammar', grammar: { syntax: 'lark', definition: 'start: "SELECT " /[a-z*, ]+/' } } } },
    ]);
    // The call's round is audited with no answer text, unchecked.
    const audited = (list: typeof rig.receiver.received) => list.map((d) => JSON.parse(d.raw.toString()) as Record<string, unknown>).find((p) => p.response_id === response.id);
    const payload = audited(await rig.receiver.waitFor((list) => audited(list) !== undefined));
    expect(payload).toMatchObject({ status_code: 200, streaming: stream, response_text: '', grounded: true, grounding_checked: false });

    // The next turn: the tool's output for the call, through previous_response_id; the call and its output go upstream.
    upstream.nextBehavior({ answer: '2 ** 10 is 1024.' });
    const next = await rig.client.responses.create({
      model: 'svc01',
      previous_response_id: response.id,
      input: [{ type: 'custom_tool_call_output', call_id: 'call_py', output: '1024' }],
      tools: [runPython, sqlGrammar],
    });
    expect(next.output_text).toBe('2 ** 10 is 1024.');
    expect((upstream.requests[1]!.body as { messages: unknown[] }).messages.slice(1)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_py', type: 'custom', custom: { name: 'run_python', input: code } }] },
      { role: 'tool', tool_call_id: 'call_py', content: '1024' },
    ]);
    // Listed as OpenAI lists them: the input items carry the call and its output.
    const items = await rig.client.responses.inputItems.list(next.id, { order: 'asc' });
    expect(items.data.map((i) => i.type)).toEqual(['message', 'custom_tool_call', 'custom_tool_call_output']);
  });

  it('tool_choice naming a custom tool goes upstream as chat names it; one not declared (or a function of its name) is a 400; so is an output of no call', async () => {
    upstream.nextBehavior({ toolCalls: [{ id: 'call_py', name: 'run_python', input: code }] });
    const ask = { model: 'svc01', input: 'What is 2**10?', tools: [runPython] };
    await rig.client.responses.create({ ...ask, tool_choice: { type: 'custom', name: 'run_python' } });
    expect(upstream.requests[0]!.body).toMatchObject({ tool_choice: { type: 'custom', custom: { name: 'run_python' } } });
    for (const wrong of [{ type: 'custom', name: 'run_bash' }, { type: 'function', name: 'run_python' }]) {
      const error = await rig.client.responses.create({ ...ask, tool_choice: wrong as never }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ code: 'invalid_value', param: 'tool_choice' });
    }
    const orphan = await rig.client.responses
      .create({ ...ask, input: [{ type: 'custom_tool_call_output', call_id: 'call_none', output: '1024' }] })
      .catch((e: unknown) => e);
    expect(orphan).toBeInstanceOf(OpenAI.BadRequestError);
    expect((orphan as Error).message).toContain('No tool call found for custom tool call output with call_id call_none');
    const bad = await rig.client.responses
      .create({ ...ask, tools: [{ type: 'custom', name: 'sql', format: { type: 'grammar', syntax: 'ebnf', definition: 'x' } } as never] })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad).toMatchObject({ param: 'tools[0].format.syntax' });
    expect(upstream.requests).toHaveLength(1);
  });
});

describe('AI SDK', () => {
  it('streamText over chat with stopWhen: the tools run, their results go back, the answer streams, usage is summed', async () => {
    threeRounds();
    const openai = createOpenAI({ apiKey: rig.token, baseURL: rig.baseURL });
    const result = streamText({
      model: openai.chat('svc01'),
      prompt: 'Weather in Paris, Oslo and Rome?',
      tools: { weather: tool({ inputSchema: z.object({ city: z.string() }), execute: weather }) },
      stopWhen: stepCountIs(5),
    });
    expect(await result.text).toBe('It is sunny in Paris, Oslo and Rome.');
    expect(await result.steps).toHaveLength(3);
    expect(sentMessages(2)).toEqual(THREE_CALLS);
    const usage = await result.totalUsage;
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.outputTokens).toBeGreaterThan(0);
  });
});

describe('LangChain', () => {
  it('bindTools, ToolMessage rounds, and a streamed last round with streamUsage', async () => {
    threeRounds();
    const model = new ChatOpenAI({ model: 'svc01', apiKey: rig.token, configuration: { baseURL: rig.baseURL }, maxRetries: 0, streamUsage: true });
    const bound = model.bindTools([{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]);
    const messages: BaseMessage[] = [new HumanMessage('Weather in Paris, Oslo and Rome?')];
    for (let round = 0; round < 2; round++) {
      const answer = await bound.invoke(messages);
      messages.push(answer);
      for (const c of answer.tool_calls ?? []) messages.push(new ToolMessage({ tool_call_id: c.id!, content: await weather(c.args as { city: string }) }));
    }
    let last: AIMessageChunk | undefined;
    for await (const chunk of await bound.stream(messages)) last = last ? last.concat(chunk) : chunk;
    expect(last!.content).toBe('It is sunny in Paris, Oslo and Rome.');
    expect(last!.usage_metadata).toMatchObject({ input_tokens: expect.any(Number), output_tokens: expect.any(Number) });
    expect(last!.usage_metadata!.total_tokens).toBe(last!.usage_metadata!.input_tokens + last!.usage_metadata!.output_tokens);
    expect(sentMessages(2)).toEqual(THREE_CALLS);
    expect(upstream.requests[2]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });
});
