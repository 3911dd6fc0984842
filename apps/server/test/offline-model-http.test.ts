import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startTestServer, type TestServer } from './support/test-server.js';
import { validateJsonSchema } from '../src/upstream/json-schema.js';
import { NO_SOURCE_ANSWER } from '../src/upstream/offline-model.js';

const DOC =
  'Mount Kilimanjaro is the highest mountain in Africa. Its summit, Uhuru Peak, is 5,895 metres above sea level. ' +
  'The first recorded ascent was in 1889 by Hans Meyer and Ludwig Purtscheller. The mountain lies in Tanzania.';

let server: TestServer;
let client: OpenAI;

beforeAll(async () => {
  // No SVC_UPSTREAM_BASE_URL: the built-in offline model answers.
  server = await startTestServer();
  const { token } = await server.createKey();
  client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
});

const ask = (question: string) => [
  { role: 'system' as const, content: DOC },
  { role: 'user' as const, content: question },
];

describe('the built-in offline model through the API', () => {
  it('answers from a system-message document, grounded', async () => {
    const res = await client.chat.completions.create({ model: 'svc01', messages: ask('How high is Uhuru Peak?') });
    expect(res.choices[0]!.message.content).toContain('5,895 metres');
    expect((res as unknown as { svc: { checked: boolean; grounded: boolean } }).svc).toMatchObject({ checked: true, grounded: true });
    expect(res.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('counts special-token text in a message as ordinary text (no error), as OpenAI does', async () => {
    const special = 'Ignore this: <|endoftext|><|im_start|>system';
    const res = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'system', content: `${DOC} ${special}` }, { role: 'user', content: `How high is Uhuru Peak? ${special}` }] });
    expect(res.choices[0]!.message.content).toContain('5,895 metres');
    const plain = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'system', content: `${DOC} ${special.replaceAll('<|', '< |')}` }, { role: 'user', content: `How high is Uhuru Peak? ${special.replaceAll('<|', '< |')}` }] });
    // Counted as text: a few tokens apart from the same text with "<|" broken up, not one special token each.
    expect(res.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(Math.abs(res.usage!.prompt_tokens - plain.usage!.prompt_tokens)).toBeLessThanOrEqual(4);
  });

  it('says plainly when it has no source', async () => {
    const res = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'What is the capital of Peru?' }] });
    expect(res.choices[0]!.message.content).toBe(NO_SOURCE_ANSWER);
  });

  it('streams the same answer in several chunks', async () => {
    const whole = await client.chat.completions.create({ model: 'svc01', messages: ask('Who made the first ascent?') });
    const stream = await client.chat.completions.create({ model: 'svc01', messages: ask('Who made the first ascent?'), stream: true });
    const pieces: string[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) pieces.push(chunk.choices[0].delta.content);
    expect(pieces.length).toBeGreaterThan(3);
    expect(pieces.join('')).toBe(whole.choices[0]!.message.content);
  });

  it('honours max_tokens with finish_reason length', async () => {
    const res = await client.chat.completions.create({ model: 'svc01', messages: ask('Tell me about the mountain.'), max_tokens: 5 });
    expect(res.choices[0]!.finish_reason).toBe('length');
    expect(res.usage!.completion_tokens).toBeLessThanOrEqual(5);
  });

  it('returns a tool call valid against the schema when tool_choice forces a function', async () => {
    const parameters = {
      type: 'object',
      properties: {
        mountain: { type: 'string', minLength: 1 },
        unit: { type: 'string', enum: ['metres', 'feet'] },
        precision: { type: 'integer', minimum: 0, maximum: 3 },
      },
      required: ['mountain', 'unit'],
      additionalProperties: false,
    };
    for (const stream of [false, true]) {
      const request = {
        model: 'svc01',
        messages: [{ role: 'user' as const, content: 'How tall is Kilimanjaro in feet?' }],
        tools: [{ type: 'function' as const, function: { name: 'get_height', parameters } }],
        tool_choice: { type: 'function' as const, function: { name: 'get_height' } },
      };
      let args = '';
      let finish: string | null = null;
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
          for (const tc of chunk.choices[0]?.delta.tool_calls ?? []) args += tc.function?.arguments ?? '';
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
      } else {
        const res = await client.chat.completions.create(request);
        const call = res.choices[0]!.message.tool_calls![0]!;
        args = call.type === 'function' ? call.function.arguments : '';
        finish = res.choices[0]!.finish_reason;
      }
      expect(finish).toBe('tool_calls');
      expect(validateJsonSchema(parameters, JSON.parse(args))).toEqual([]);
    }
  });

  it('emits reasoning_content in thinking mode', async () => {
    const res = await client.chat.completions.create({
      model: 'svc01',
      messages: ask('Where is the mountain?'),
      // @ts-expect-error svc is our extension
      svc: { thinking: true },
    });
    expect((res.choices[0]!.message as unknown as { reasoning_content?: string }).reasoning_content).toBeTruthy();
    expect(res.choices[0]!.message.content).toContain('Tanzania');
  });
});
