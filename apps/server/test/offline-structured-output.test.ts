import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { startTestServer, type TestServer } from './support/test-server.js';

/** Structured output from the built-in offline model (no SVC_UPSTREAM_BASE_URL), through three client libraries. */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';
const messages = [
  { role: 'system' as const, content: DOC },
  { role: 'user' as const, content: 'Which city is the Eiffel Tower in, and when was it completed?' },
];
const Landmark = z.object({
  city: z.string(),
  year: z.number().int(),
  tags: z.array(z.string()),
  kind: z.enum(['tower', 'bridge', 'museum']),
});

let server: TestServer;
let token: string;
let baseURL: string;

beforeAll(async () => {
  server = await startTestServer();
  ({ token } = await server.createKey());
  baseURL = `${server.url}/v1`;
});

afterAll(async () => {
  await server?.close();
});

describe('offline response_format', () => {
  it('openai chat.completions.parse with zodResponseFormat returns a schema-valid parsed object', async () => {
    const client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0 });
    const completion = await client.chat.completions.parse({ model: 'svc01', messages, response_format: zodResponseFormat(Landmark, 'landmark') });
    const parsed = completion.choices[0]!.message.parsed;
    expect(Landmark.parse(parsed)).toEqual(parsed);
  });

  it('fills number fields from the source sentence that answers, so the structured answer is grounded', async () => {
    const client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0 });
    const Height = z.object({ height_m: z.number().int(), completed: z.number().int() });
    const completion = await client.chat.completions.parse({
      model: 'svc01',
      messages: [{ role: 'system', content: DOC }, { role: 'user', content: 'How tall is the Eiffel Tower, and when was it completed?' }],
      response_format: zodResponseFormat(Height, 'height'),
    });
    // The question has no number: they come from "It was completed in 1889 and is 330 metres tall." (was 0 and 0),
    // each to the field named like a word beside it.
    expect(completion.choices[0]!.message.parsed).toEqual({ height_m: 330, completed: 1889 });
    expect((completion as unknown as { svc: { grounded: boolean } }).svc.grounded).toBe(true);
  });

  it('json_object gives a JSON object text with the answer', async () => {
    const client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'svc01', messages, response_format: { type: 'json_object' } });
    const json = JSON.parse(completion.choices[0]!.message.content!) as { answer: string };
    expect(json.answer).toContain('Paris');
  });

  it('json_schema streamed: the joined deltas are schema-valid JSON', async () => {
    const client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, response_format: zodResponseFormat(Landmark, 'landmark') });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(Landmark.safeParse(JSON.parse(text)).success).toBe(true);
  });

  it('AI SDK generateObject', async () => {
    const openai = createOpenAI({ apiKey: token, baseURL });
    const { object } = await generateObject({ model: openai.chat('svc01'), schema: Landmark, messages, maxRetries: 0 });
    expect(Landmark.parse(object)).toEqual(object);
  });

  it.each(['jsonSchema', 'jsonMode', 'functionCalling'] as const)('LangChain withStructuredOutput (method %s)', async (method) => {
    const llm = new ChatOpenAI({ model: 'svc01', apiKey: token, configuration: { baseURL }, maxRetries: 0 });
    const schema = method === 'jsonMode' ? z.object({ answer: z.string() }) : Landmark;
    const result = await llm.withStructuredOutput(schema, { name: 'landmark', method }).invoke(messages);
    expect(schema.parse(result)).toEqual(result);
  });

  it('logprobs: true is a clear 400 (the offline model has no probabilities)', async () => {
    const client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0 });
    const error = await client.chat.completions.create({ model: 'svc01', messages, logprobs: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ code: 'invalid_value', param: 'logprobs' });
  });
});
