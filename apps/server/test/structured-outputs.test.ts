import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, streamObject } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { SvcResultSchema, type SvcResult } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

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
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  upstream = await startFakeUpstream({ answer: () => answer });
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'gpt-4o' } });
  ({ token } = await server.createKey());
  baseURL = `${server.url}/v1`;
  client = new OpenAI({ apiKey: token, baseURL, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
  await receiver?.close();
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

  // A classification or an extraction answered under its schema: a label the schema offers (`enum`), the model's
  // own confidence and booleans are no claims; the values extracted are, and a wrong one is flagged at its offsets.
  const REVIEW = [
    { role: 'system' as const, content: 'Review #4411: The delivery arrived on Tuesday. The box was intact.' },
    { role: 'user' as const, content: 'Classify the review.' },
  ];
  const Classification = z.object({ sentiment: z.enum(['positive', 'neutral', 'negative']), confidence: z.number().min(0).max(1), is_spam: z.boolean() });
  const CLASSIFIED = '{"sentiment": "neutral", "confidence": 0.92, "is_spam": false}';
  const ACME = [
    { role: 'system' as const, content: 'Acme is a maker of garden tools. It was founded in 1999 in Dayton, Ohio.' },
    { role: 'user' as const, content: 'Extract the maker and the year it was founded.' },
  ];
  const Company = z.object({ company: z.string(), founded: z.number().int(), kind: z.literal('company') });

  it.each([
    ['chat.completions.parse', false],
    ['a streamed chat completion', true],
  ])('a classification under its json_schema is not flagged for its label, confidence or boolean (%s)', async (_, stream) => {
    answer = CLASSIFIED;
    const svc = stream ? await streamedSvc(REVIEW, zodResponseFormat(Classification, 'classification')) : svcOf(await client.chat.completions.parse({ model: 'svc01', messages: REVIEW, response_format: zodResponseFormat(Classification, 'classification') }));
    expect(svc.grounded).toBe(true);
    expect(svc.flagged_spans).toEqual([]);
    expect(svc.claims ?? []).toEqual([]);
  });

  it('a line break escaped in a string value ends a sentence: no name "nIt" is flagged', async () => {
    answer = '{"summary": "Acme has 40 staff.\\nIt is in Dayton."}';
    const messages = [
      { role: 'system' as const, content: 'Acme is a maker of garden tools. It was founded in 1999 in Dayton, Ohio. It has 40 staff.' },
      { role: 'user' as const, content: 'Summarize.' },
    ];
    const svc = svcOf(await client.chat.completions.create({ model: 'svc01', messages, response_format: { type: 'json_object' } }));
    expect(svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    for (const claim of svc.claims!) expect(answer.slice(claim.start, claim.end)).toBe(claim.text);
  });

  it('the same classification under json_object (no schema) is still read value by value', async () => {
    answer = CLASSIFIED;
    const svc = svcOf(await client.chat.completions.create({ model: 'svc01', messages: REVIEW, response_format: { type: 'json_object' } }));
    expect(svc.grounded).toBe(false);
  });

  it.each([
    ['{"company": "Acme", "founded": 1999, "kind": "company"}', true, []],
    ['{"company": "Acme", "founded": 1998, "kind": "company"}', false, ['1998']],
  ])('an extraction %s: its values are claims at their offsets (grounded %s)', async (json, grounded, flagged) => {
    answer = json;
    const completion = await client.chat.completions.parse({ model: 'svc01', messages: ACME, response_format: zodResponseFormat(Company, 'company') });
    const svc = svcOf(completion);
    expect(svc).toMatchObject({ checked: true, grounded });
    expect(svc.flagged_spans.map((s) => s.text)).toEqual(flagged);
    expect(svc.claims!.length).toBeGreaterThan(0);
    for (const span of [...svc.flagged_spans, ...svc.claims!]) expect(json.slice(span.start, span.end)).toBe(span.text);
    expect(svc.claims!.map((c) => c.text).join(' ')).not.toContain('company"');
  });

  it('the audit webhook carries the same verdicts: the classification grounded, the wrong year flagged', async () => {
    const { token: hooked } = await server.createKey({ webhookUrl: receiver.url, signingSecret: 'whsec_structured-outputs-test' });
    const audited = new OpenAI({ apiKey: hooked, baseURL, maxRetries: 0 });
    const before = receiver.received.length;
    answer = CLASSIFIED;
    await audited.chat.completions.parse({ model: 'svc01', messages: REVIEW, response_format: zodResponseFormat(Classification, 'classification') });
    answer = '{"company": "Acme", "founded": 1998, "kind": "company"}';
    await audited.chat.completions.parse({ model: 'svc01', messages: ACME, response_format: zodResponseFormat(Company, 'company') });
    const received = await receiver.waitFor((r) => r.length >= before + 2);
    const bodies = received.slice(before).map((d) => JSON.parse(d.raw.toString('utf8')) as { response_text: string; grounded: boolean; flagged_spans?: Array<{ text: string }> });
    const classified = bodies.find((b) => b.response_text === CLASSIFIED)!;
    const extracted = bodies.find((b) => b.response_text !== CLASSIFIED)!;
    expect(classified.grounded).toBe(true);
    expect(classified.flagged_spans ?? []).toEqual([]);
    expect(extracted.grounded).toBe(false);
    expect(extracted.flagged_spans!.map((s) => s.text)).toEqual(['1998']);
  });

  it('Responses API text.format: the classification is not flagged; a wrong extracted year is', async () => {
    answer = CLASSIFIED;
    const classified = await client.responses.parse({ model: 'svc01', input: REVIEW, text: { format: zodTextFormat(Classification, 'classification') } });
    expect(classified.output_parsed).toEqual(JSON.parse(CLASSIFIED));
    expect(svcOf(classified)).toMatchObject({ grounded: true, flagged_spans: [] });
    answer = '{"company": "Acme", "founded": 1998, "kind": "company"}';
    const extracted = await client.responses.parse({ model: 'svc01', input: ACME, text: { format: zodTextFormat(Company, 'company') } });
    const svc = svcOf(extracted);
    expect(svc.grounded).toBe(false);
    expect(svc.flagged_spans.map((s) => s.text)).toEqual(['1998']);
  });
});

async function streamedSvc(messages: OpenAI.ChatCompletionMessageParam[], response_format: OpenAI.ResponseFormatJSONSchema): Promise<SvcResult> {
  const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, response_format });
  let svc: SvcResult | undefined;
  for await (const chunk of stream) if ((chunk as { svc?: unknown }).svc) svc = svcOf(chunk);
  return svc!;
}
