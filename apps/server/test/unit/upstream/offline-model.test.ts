import { ChatCompletionChunkSchema, type ChatCompletionChunk, type FunctionToolCall } from '@svc/protocol';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { sampleFromSchema, validateJsonSchema } from '../../../src/upstream/json-schema.js';
import { NO_SOURCE_ANSWER, createOfflineModel } from '../../../src/upstream/offline-model.js';
import type { UpstreamBody, UpstreamCompletion } from '../../../src/upstream/upstream.js';

const DOC = [
  'Acme Rockets was founded in 1952 in Tucson, Arizona.',
  'The company builds small orbital launchers.',
  'Its flagship rocket, the Roadrunner, can lift 300 kg to low Earth orbit.',
  'Acme employs 1,200 people across three sites.',
  'The chief executive is Wile E. Coyote.',
].join(' ');

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather for a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', minLength: 2 },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer', minimum: 1, maximum: 7 },
      },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const TIME = {
  type: 'function',
  function: {
    name: 'get_time',
    description: 'Get the local time in a city',
    parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
  },
};

const model = createOfflineModel();
const signal = new AbortController().signal;

function body(question: string, extra: Partial<UpstreamBody> = {}, system: string | null = DOC): UpstreamBody {
  const messages: unknown[] = system === null ? [] : [{ role: 'system', content: system }];
  return { model: 'offline', messages: [...messages, { role: 'user', content: question }], ...extra };
}

async function complete(b: UpstreamBody, thinking = false): Promise<UpstreamCompletion> {
  return model.complete({ body: b, signal, thinking });
}

async function stream(b: UpstreamBody, thinking = false): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  await (
    await model.stream({ body: b, signal, thinking })
  ).each((batch) => {
    chunks.push(...batch);
    return undefined;
  });
  return chunks;
}

function content(c: UpstreamCompletion): string {
  return c.choices[0]?.message.content ?? '';
}

describe('answers', () => {
  it('quotes the best-matching sentence of a system document verbatim', async () => {
    const completion = await complete(body('How much can the Roadrunner lift?'));
    expect(content(completion)).toBe('Its flagship rocket, the Roadrunner, can lift 300 kg to low Earth orbit.');
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    expect(completion.usage).toMatchObject({ completion_tokens: encode(content(completion)).length });
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
  });

  it('joins several matching sentences in document order', async () => {
    const answer = content(await complete(body('When was Acme founded and how many people does Acme employ?')));
    expect(answer).toBe('Acme Rockets was founded in 1952 in Tucson, Arizona. Acme employs 1,200 people across three sites.');
  });

  it('answers from a document pasted into the question, and from tool results', async () => {
    const pasted = `${DOC} Who is the chief executive?`;
    expect(content(await complete(body(pasted, {}, null)))).toBe('The chief executive is Wile E. Coyote.');
    const withTool = await complete({
      model: 'offline',
      messages: [
        { role: 'user', content: 'What is the weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'Oslo weather: light snow, minus 3 degrees.' },
      ],
      tools: [WEATHER],
    });
    expect(content(withTool)).toBe('Oslo weather: light snow, minus 3 degrees.');
  });

  it('says plainly that it has no source, and how to give one or connect a model', async () => {
    const answer = content(await complete(body('What is the capital of France?', {}, null)));
    expect(answer).toBe(NO_SOURCE_ANSWER);
    expect(answer).toMatch(/system message/);
    expect(answer).toMatch(/SVC_UPSTREAM_BASE_URL/);
  });

  it('says the sources do not cover an unrelated question instead of guessing', async () => {
    expect(content(await complete(body('What is the capital of France?')))).toMatch(/do not mention "capital" and "france"/);
  });

  it('is deterministic apart from ids', async () => {
    const strip = (c: UpstreamCompletion) => ({ ...c, id: undefined, created: undefined });
    const b = body('Where was Acme founded?', { n: 2 });
    expect(strip(await complete(b, true))).toEqual(strip(await complete(b, true)));
    const chunks = (await stream(b)).map((c) => ({ ...c, id: '', created: 0 }));
    expect((await stream(b)).map((c) => ({ ...c, id: '', created: 0 }))).toEqual(chunks);
  });

  it('gives n choices', async () => {
    const completion = await complete(body('Where was Acme founded?', { n: 3 }));
    expect(completion.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(new Set(completion.choices.map((c) => c.message.content)).size).toBe(1);
    expect(completion.usage!.completion_tokens).toBe(3 * encode(content(completion)).length);
  });
});

describe('limits', () => {
  it.each([1, 5, 12])('max_tokens %i cuts the answer with finish_reason "length"', async (max) => {
    const completion = await complete(body('Summarize the document.', { max_tokens: max }));
    expect(completion.choices[0]?.finish_reason).toBe('length');
    expect(completion.usage!.completion_tokens).toBeLessThanOrEqual(max);
    expect(encode(content(completion)).length).toBeLessThanOrEqual(max);
    expect(DOC.startsWith(content(completion))).toBe(true);
  });

  it('max_completion_tokens wins over max_tokens and counts reasoning in thinking mode', async () => {
    const completion = await complete(body('Summarize the document.', { max_tokens: 4096, max_completion_tokens: 20 }), true);
    expect(completion.choices[0]?.finish_reason).toBe('length');
    expect(completion.usage!.completion_tokens).toBeLessThanOrEqual(20);
  });

  it('stop cuts before the first stop sequence', async () => {
    const completion = await complete(body('Summarize the document.', { stop: ['orbital', 'founded'] }));
    expect(content(completion)).toBe('Acme Rockets was ');
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    expect(content(await complete(body('Summarize the document.', { stop: 'builds' })))).toBe('Acme Rockets was founded in 1952 in Tucson, Arizona. The company ');
  });
});

describe('tools', () => {
  it('a forced function gets a call whose arguments validate against its schema', async () => {
    const completion = await complete(body('Will it rain in Buenos Aires over the next 3 days?', { tools: [TIME, WEATHER], tool_choice: { type: 'function', function: { name: 'get_weather' } } }, null));
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0]! as FunctionToolCall;
    expect(call.id).toMatch(/^call_[\w-]+$/);
    expect(call.function.name).toBe('get_weather');
    const args = JSON.parse(call.function.arguments) as unknown;
    expect(validateJsonSchema(WEATHER.function.parameters, args)).toEqual([]);
    expect(args).toEqual({ city: 'Buenos Aires', days: 3 });
  });

  it('a custom tool named by tool_choice is called with the question as its input, streamed as OpenAI streams custom calls', async () => {
    const question = 'Compute 2 ** 10.';
    const runPython = { type: 'custom', custom: { name: 'run_python', description: 'Runs Python code.' } };
    const b = body(question, { tools: [runPython, WEATHER], tool_choice: { type: 'custom', custom: { name: 'run_python' } } });
    const choice = (await complete(b)).choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls).toEqual([{ id: expect.stringMatching(/^call_/), type: 'custom', custom: { name: 'run_python', input: question } }]);
    const calls = (await stream(b)).flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
    expect(calls[0]).toMatchObject({ index: 0, type: 'custom', custom: { name: 'run_python', input: '' } });
    expect(calls.map((c) => c.custom?.input ?? '').join('')).toBe(question);
    expect(calls.every((c) => c.function === undefined)).toBe(true);
  });

  it('"required" picks the best-matching tool, one call per clearly matching tool in parallel', async () => {
    const question = 'What is the weather in Paris and the time in New York?';
    const parallel = await complete(body(question, { tools: [TIME, WEATHER], tool_choice: 'required' }));
    expect(parallel.choices[0]?.message.tool_calls?.map((c) => [(c as FunctionToolCall).function.name, JSON.parse((c as FunctionToolCall).function.arguments)])).toEqual([
      ['get_weather', { city: 'Paris', days: 1 }],
      ['get_time', { location: 'New York' }],
    ]);
    const single = await complete(body(question, { tools: [TIME, WEATHER], tool_choice: 'required', parallel_tool_calls: false }));
    expect(single.choices[0]?.message.tool_calls?.map((c) => (c as FunctionToolCall).function.name)).toEqual(['get_weather']);
  });

  it('"auto" calls a matching tool only when no source answers; "none" never calls', async () => {
    const auto = await complete(body('What is the weather in Paris?', { tools: [WEATHER] }, null));
    expect(auto.choices[0]?.finish_reason).toBe('tool_calls');
    const answered = await complete(body('Where was Acme founded?', { tools: [WEATHER], tool_choice: 'auto' }));
    expect(answered.choices[0]?.message.tool_calls).toBeUndefined();
    const none = await complete(body('What is the weather in Paris?', { tools: [WEATHER], tool_choice: 'none' }, null));
    expect(none.choices[0]?.message.tool_calls).toBeUndefined();
    expect(content(none)).toBe(NO_SOURCE_ANSWER);
  });

  it('streams tool-call deltas with their index: id, type and name first, then argument fragments', async () => {
    const chunks = await stream(body('Weather in Paris and time in Tokyo?', { tools: [WEATHER, TIME], tool_choice: 'required' }, null));
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    const args = ['', ''];
    for (const [i, delta] of deltas.entries()) {
      const first = deltas.findIndex((d) => d.index === delta.index) === i;
      if (first) expect(delta).toMatchObject({ id: expect.stringMatching(/^call_/), type: 'function', function: { arguments: '' } });
      else expect(delta.id).toBeUndefined();
      args[delta.index] += delta.function?.arguments ?? '';
    }
    expect(JSON.parse(args[0]!)).toEqual({ city: 'Paris', days: 1 });
    expect(JSON.parse(args[1]!)).toEqual({ location: 'Tokyo' });
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('tool_calls');
  });
});

describe('response_format and logprobs', () => {
  const schema = {
    type: 'object',
    properties: { founded: { type: 'integer', minimum: 1900, maximum: 2000 }, city: { type: 'string' }, tags: { type: 'array', items: { type: 'string' }, minItems: 1 } },
    required: ['founded', 'city', 'tags'],
    additionalProperties: false,
  };

  it('json_schema → JSON valid against the schema, streamed and not', async () => {
    const format = { type: 'json_schema', json_schema: { name: 'facts', strict: true, schema } };
    const text = content(await complete(body('When was Acme founded, in which city?', { response_format: format })));
    expect(validateJsonSchema(schema, JSON.parse(text))).toEqual([]);
    const streamed = (await stream(body('When was Acme founded, in which city?', { response_format: format }))).map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(streamed).toBe(text);
  });

  it('json_object → {"answer": the extractive answer}; text → plain text', async () => {
    const plain = content(await complete(body('When was Acme founded?')));
    expect(JSON.parse(content(await complete(body('When was Acme founded?', { response_format: { type: 'json_object' } }))))).toEqual({ answer: plain });
    expect(content(await complete(body('When was Acme founded?', { response_format: { type: 'text' } })))).toBe(plain);
  });

  it('refuses logprobs: true with 400 invalid_value (param logprobs), before streaming', async () => {
    await expect(complete(body('When?', { logprobs: true }))).rejects.toMatchObject({ status: 400, code: 'invalid_value', param: 'logprobs' });
    await expect(model.stream({ body: body('When?', { logprobs: true }), signal, thinking: false })).rejects.toMatchObject({ status: 400, param: 'logprobs' });
    expect(content(await complete(body('When was Acme founded?', { logprobs: false })))).toContain('1952');
  });
});

describe('thinking', () => {
  it('explains which passages were picked, in both modes', async () => {
    const completion = await complete(body('How much can the Roadrunner lift?'), true);
    expect(completion.choices[0]?.message.reasoning_content).toMatch(/BM25.*"roadrunner".*Its flagship rocket/s);
    expect(completion.usage).toMatchObject({ completion_tokens_details: { reasoning_tokens: expect.any(Number) } });
    const chunks = await stream(body('How much can the Roadrunner lift?'), true);
    const reasoning = chunks.map((c) => c.choices[0]?.delta.reasoning_content ?? '').join('');
    expect(reasoning).toBe(completion.choices[0]?.message.reasoning_content);
    const firstContent = chunks.findIndex((c) => c.choices[0]?.delta.content);
    const lastReasoning = chunks.findLastIndex((c) => c.choices[0]?.delta.reasoning_content);
    expect(lastReasoning).toBeLessThan(firstContent);
  });

  it('adds no reasoning without thinking', async () => {
    expect((await complete(body('How much can the Roadrunner lift?'))).choices[0]?.message).not.toHaveProperty('reasoning_content');
  });
});

describe('streaming', () => {
  it('sends role first, 1-3 token pieces, finish, then the usage chunk when asked', async () => {
    const b = body('How much can the Roadrunner lift?', { stream_options: { include_usage: true } });
    const chunks = await stream(b);
    for (const chunk of chunks) ChatCompletionChunkSchema.parse(chunk);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0]?.choices[0]?.delta).toMatchObject({ role: 'assistant', content: '' });
    const pieces = chunks.slice(1, -2).map((c) => c.choices[0]?.delta.content ?? '');
    expect(pieces.join('')).toBe(content(await complete(b)));
    for (const piece of pieces) expect(encode(piece).length).toBeLessThanOrEqual(3);
    expect(chunks.at(-2)?.choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage).toEqual((await complete(b)).usage);
  });

  it('sends no usage chunk without include_usage', async () => {
    const chunks = await stream(body('How much can the Roadrunner lift?'));
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
    expect(chunks.some((c) => c.usage)).toBe(false);
  });

  it('keeps multi-byte characters whole across pieces', async () => {
    const doc = 'Der Bäcker verkauft frisches Brot für 3 €. 東京の天気は晴れです 🎉 today.';
    const chunks = await stream(body('Was verkauft der Bäcker?', {}, doc));
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).not.toContain('\uFFFD');
    expect(text).toBe('Der Bäcker verkauft frisches Brot für 3 €.');
  });

  it('stops yielding when the signal aborts, and does not block the event loop on long answers', async () => {
    const controller = new AbortController();
    const long = `The launch manifest lists ${Array.from({ length: 600 }, (_, i) => `rocket ${i}`).join(', ')}.`;
    const iterable = await model.stream({ body: body('What does the launch manifest list?', {}, long), signal: controller.signal, thinking: false });
    // Another task of the event loop: a chain of immediates, each running once per loop turn. A timer would
    // not do: on a fast host 200 chunks take less than its 1 ms, yields or not.
    let ticks = 0;
    let immediate: NodeJS.Immediate;
    const tick = (): void => {
      ticks++;
      immediate = setImmediate(tick);
    };
    immediate = setImmediate(tick);
    let count = 0;
    try {
      await expect(
        iterable.each(() => {
          if (++count === 200) controller.abort();
          return undefined;
        }),
      ).rejects.toMatchObject({ name: 'AbortError' });
    } finally {
      clearImmediate(immediate);
    }
    expect(count).toBe(200);
    expect(ticks).toBeGreaterThan(0);
  });

  it('rejects at once when already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(model.complete({ body: body('x'), signal: controller.signal, thinking: false })).rejects.toMatchObject({ name: 'AbortError' });
  });
});

describe('JSON Schema sampling', () => {
  const hints = { question: 'Book 2 rooms in Lisbon for alice@example.com on 2025-06-01', names: ['Book', 'Lisbon'], numbers: [2, 2025], keywords: ['book', 'room', 'lisbon'] };
  const schemas: Array<[string, Record<string, unknown>]> = [
    ['empty', {}],
    ['scalars', { type: 'object', properties: { a: { type: 'boolean' }, b: { type: 'null' }, c: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 } }, required: ['a', 'b', 'c'] }],
    ['integer bounds and multipleOf', { type: 'object', properties: { n: { type: 'integer', minimum: 10, maximum: 100, multipleOf: 7 } }, required: ['n'] }],
    ['draft-04 exclusive booleans', { type: 'object', properties: { n: { type: 'integer', minimum: 0, exclusiveMinimum: true, maximum: 2, exclusiveMaximum: true } }, required: ['n'] }],
    ['strings with lengths, formats and patterns', { type: 'object', properties: { code: { type: 'string', minLength: 5, maxLength: 5 }, email: { type: 'string', format: 'email' }, date: { type: 'string', format: 'date' }, zip: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' } }, required: ['code', 'email', 'date', 'zip'] }],
    ['enum and const', { type: 'object', properties: { kind: { enum: ['suite', 'room'] }, v: { const: 3 } }, required: ['kind', 'v'] }],
    ['arrays', { type: 'object', properties: { tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, minItems: 2, maxItems: 3, uniqueItems: true }, pair: { type: 'array', items: [{ type: 'string' }, { type: 'integer' }] } }, required: ['tags', 'pair'] }],
    ['anyOf, oneOf, allOf and nullable types', { type: 'object', properties: { x: { anyOf: [{ type: 'null' }, { type: 'integer', minimum: 5 }] }, y: { oneOf: [{ type: 'string', maxLength: 2 }, { type: 'boolean' }] }, z: { allOf: [{ type: 'object', properties: { p: { type: 'string' } }, required: ['p'] }, { properties: { q: { type: 'integer' } }, required: ['q'] }] }, w: { type: ['string', 'null'] } }, required: ['x', 'y', 'z', 'w'] }],
    ['nested objects and $ref', { type: 'object', $defs: { guest: { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer', minimum: 18 } }, required: ['name', 'age'], additionalProperties: false } }, properties: { guests: { type: 'array', items: { $ref: '#/$defs/guest' }, minItems: 1 }, city: { type: 'string' } }, required: ['guests'] }],
    ['defaults and minProperties', { type: 'object', properties: { a: { type: 'string', default: 'x' }, b: { type: 'integer' }, c: { type: 'integer' } }, minProperties: 2 }],
  ];
  it.each(schemas)('samples a valid value for %s', (_name, schema) => {
    const value = sampleFromSchema(schema, hints);
    expect(validateJsonSchema(schema, value)).toEqual([]);
  });

  it('fills fields from the question', () => {
    const schema = { type: 'object', properties: { city: { type: 'string' }, rooms: { type: 'integer', minimum: 1, maximum: 5 }, email: { type: 'string', format: 'email' } }, required: ['city', 'rooms', 'email'] };
    expect(sampleFromSchema(schema, { ...hints, names: ['Lisbon'] })).toEqual({ city: 'Lisbon', rooms: 2, email: 'alice@example.com' });
  });

  it('the validator finds problems', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', maximum: 3 } }, required: ['n', 'm'], additionalProperties: false };
    expect(validateJsonSchema(schema, { n: 4.5, extra: true })).toEqual([
      '$: missing required property m',
      '$.n: must be integer, got number',
      '$.n: must be <= 3',
      '$: unexpected property extra',
    ]);
  });
});

describe('large inputs', () => {
  it('reads the beginning and the end of a 9 MiB pasted document (MAX_READ_CHARS), so the question at its end is answered', async () => {
    const filler = 'Nothing of note happened that year in the valley. '.repeat(190_000);
    const question = 'When was Acme Rockets founded?';
    const completion = await complete(body(`${DOC} ${filler}${question}`, {}, null));
    expect(content(completion)).toContain('Acme Rockets was founded in 1952');
    expect(completion.usage?.prompt_tokens).toBeGreaterThan(1_000_000);
  });
});

describe('cancel', () => {
  it('a stream given up before each() yields nothing afterwards; cancel() is idempotent', async () => {
    const chunks = await model.stream({ body: body('What is the capital?'), signal, thinking: false });
    chunks.cancel();
    chunks.cancel();
    const seen: ChatCompletionChunk[] = [];
    await chunks.each((batch) => {
      seen.push(...batch);
      return undefined;
    });
    expect(seen).toEqual([]);
  });
});

describe('long conversations', () => {
  it('reads 250,000 messages for its sources only as far as the text it reads, and counts every one of them', async () => {
    // Each message says when its content is read: once to count its tokens, and again only for the sources it reads.
    let reads = 0;
    const message = (i: number) => ({
      role: i % 2 ? 'assistant' : 'user',
      get content() {
        reads++;
        return `m${i} is ${i} metres.`;
      },
    });
    const messages = Array.from({ length: 250_000 }, (_, i) => message(i));
    const completion = await complete({ model: 'offline', messages: [...messages, { role: 'user', content: 'How tall is m2?' }] });
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    expect(completion.usage!.prompt_tokens).toBeGreaterThan(250_000 * 3);
    expect(reads).toBeLessThan(1.1 * messages.length);
  });
});
