import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, streamObject } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { SvcResultSchema, type SvcResult } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';

/**
 * Structured outputs from an upstream through the three client libraries: the schema reaches the upstream as
 * sent, the parsed object comes back, and the grounding check judges the JSON's values, not its keys.
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';
const messages = [
  { role: 'system' as const, content: DOC },
  { role: 'user' as const, content: 'Which city is the Eiffel Tower in, when was it completed, how tall is it?' },
];
const Landmark = z.object({ city: z.string(), year_completed: z.number().int(), height_metres: z.number() });
const RIGHT = JSON.stringify({ city: 'Paris', year_completed: 1889, height_metres: 330 });
const WRONG = JSON.stringify({ city: 'London', year_completed: 1889, height_metres: 330 });

let upstream: FakeUpstream;
let server: TestServer;
let token: string;
let baseURL: string;
let client: OpenAI;
let answer = RIGHT;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: () => answer });
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'gpt-4o' } });
  ({ token } = await server.createKey());
  baseURL = `${server.url}/v1`;
  client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

beforeEach(() => {
  answer = RIGHT;
  upstream.requests.length = 0;
});

function svcOf(body: unknown): SvcResult {
  return SvcResultSchema.parse((body as { svc?: unknown }).svc);
}

describe('structured outputs', () => {
  it('openai parse (zodResponseFormat, strict): the schema goes upstream as sent; a right answer is grounded, no key flagged', async () => {
    const completion = await client.chat.completions.parse({ model: 'svc01', messages, response_format: zodResponseFormat(Landmark, 'landmark') });
    expect(completion.choices[0]!.message.parsed).toEqual(JSON.parse(RIGHT));
    expect(upstream.requests[0]!.body.response_format).toEqual(JSON.parse(JSON.stringify(zodResponseFormat(Landmark, 'landmark'))));
    expect(svcOf(completion)).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
  });

  it('a wrong value is flagged by itself, its span text equal to the content at its offsets', async () => {
    answer = WRONG;
    const completion = await client.chat.completions.parse({ model: 'svc01', messages, response_format: zodResponseFormat(Landmark, 'landmark') });
    const content = completion.choices[0]!.message.content!;
    const svc = svcOf(completion);
    expect(svc.grounded).toBe(false);
    expect(svc.flagged_spans.map((s) => s.text)).toEqual(['London']);
    for (const span of [...svc.flagged_spans, ...(svc.claims ?? [])]) expect(content.slice(span.start, span.end)).toBe(span.text);
  });

  it('streamed json_schema: the finish chunk carries the same verdict', async () => {
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, response_format: zodResponseFormat(Landmark, 'landmark') });
    let text = '';
    let svc: SvcResult | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if ((chunk as { svc?: unknown }).svc) svc = svcOf(chunk);
    }
    expect(Landmark.parse(JSON.parse(text))).toEqual(JSON.parse(RIGHT));
    expect(svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
  });

  it('AI SDK generateObject and streamObject', async () => {
    const openai = createOpenAI({ apiKey: token, baseURL });
    const generated = await generateObject({ model: openai.chat('svc01'), schema: Landmark, messages, maxRetries: 0 });
    expect(generated.object).toEqual(JSON.parse(RIGHT));
    expect(svcOf(generated.response.body)).toMatchObject({ checked: true, grounded: true });
    const streamed = streamObject({ model: openai.chat('svc01'), schema: Landmark, messages, maxRetries: 0 });
    for await (const _ of streamed.partialObjectStream);
    expect(await streamed.object).toEqual(JSON.parse(RIGHT));
    expect((upstream.requests[1]!.body.response_format as { type: string }).type).toBe('json_schema');
  });

  it('LangChain withStructuredOutput, with the raw response', async () => {
    const llm = new ChatOpenAI({ model: 'svc01', apiKey: token, configuration: { baseURL }, maxRetries: 0 });
    const result = await llm.withStructuredOutput(Landmark, { name: 'landmark', includeRaw: true }).invoke(messages);
    expect(result.parsed).toEqual(JSON.parse(RIGHT));
    expect((upstream.requests[0]!.body.response_format as { type: string }).type).toBe('json_schema');
  });

  it('a JSON answer of keys and booleans alone has nothing to check', async () => {
    answer = '{"found": true, "ambiguous": false, "note": null}';
    const completion = await client.chat.completions.create({ model: 'svc01', messages, response_format: { type: 'json_object' } });
    expect(svcOf(completion)).toMatchObject({ checked: false, grounded: true });
  });
});
