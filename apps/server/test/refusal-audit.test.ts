import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { AuditPayloadSchema } from '@svc/protocol';
import { type FakeUpstream } from './support/fake-upstream.js';
import type { Receiver } from './support/webhooks.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';

/**
 * A refused request is answered `content: null` beside `refusal` (streamed: `delta.refusal` pieces). Its
 * `response_text` is "", so the audit carries the refusal in a field of its own: without it an auditor saw an
 * empty answer and no sign of what the model said.
 */

const REFUSAL = "I'm sorry, but I can't help with that.";
const messages = [{ role: 'user' as const, content: 'How do I pick a lock?' }];

let upstream: FakeUpstream;
let receiver: Receiver;
let client: OpenAI;
let rig: AuditedServer;

beforeAll(async () => {
  rig = await startAuditedServer({});
  ({ upstream, receiver, client } = rig);
});

afterAll(() => rig?.close());

beforeEach(() => upstream.setBehavior({}));

/** The webhook payload of the request `id`, checked against the published schema. */
async function delivered(id: string): Promise<Record<string, unknown>> {
  const matches = (d: { raw: Buffer }) => JSON.parse(d.raw.toString()).request_id === id;
  const [hit] = (await receiver.waitFor((all) => all.some(matches))).filter(matches);
  const payload = JSON.parse(hit!.raw.toString()) as Record<string, unknown>;
  AuditPayloadSchema.parse(payload);
  return payload;
}

const refusedJson = () => ({
  id: 'up',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-4o',
  choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: REFUSAL }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 14, completion_tokens: 10, total_tokens: 24 },
});

/** As OpenAI streams a refusal: an opening delta with `refusal: ""`, then the pieces, then the finish. */
const refusedSse = (): string[] => {
  const frame = (delta: object, finish: string | null) =>
    `data: ${JSON.stringify({ id: 'up', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  return [
    frame({ role: 'assistant', content: null, refusal: '' }, null) +
      frame({ refusal: "I'm sorry, " }, null) +
      frame({ refusal: "but I can't " }, null) +
      frame({ refusal: 'help with that.' }, null) +
      frame({}, 'stop') +
      'data: [DONE]\n\n',
  ];
};

describe('a refused request is audited with what the model said', () => {
  it('non-streamed: response_text "" and refusal the message\'s refusal', async () => {
    upstream.setBehavior({ rawJson: refusedJson() });
    const res = await client.chat.completions.create({ model: 'svc01', messages });
    expect(res.choices[0]!.message).toMatchObject({ content: null, refusal: REFUSAL });
    expect(await delivered(res.id)).toMatchObject({ status_code: 200, streaming: false, response_text: '', refusal: REFUSAL });
  });

  it('streamed: the delta.refusal pieces joined', async () => {
    upstream.setBehavior({ rawSse: refusedSse() });
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true });
    let id = '';
    let refusal = '';
    for await (const chunk of stream) {
      id = chunk.id;
      refusal += (chunk.choices[0]?.delta as { refusal?: string | null } | undefined)?.refusal ?? '';
    }
    expect(refusal).toBe(REFUSAL);
    expect(await delivered(id)).toMatchObject({ status_code: 200, streaming: true, response_text: '', refusal: REFUSAL });
  });

  it('an upstream that reports no usage: the refusal’s tokens are counted as output, streamed or not', async () => {
    const { usage: _none, ...withoutUsage } = refusedJson();
    upstream.setBehavior({ rawJson: withoutUsage });
    const res = await client.chat.completions.create({ model: 'svc01', messages });
    expect(res.usage!.completion_tokens).toBeGreaterThan(0);
    const plain = await delivered(res.id);
    expect(plain.output_tokens).toBe(res.usage!.completion_tokens);

    // The stream's frames carry no usage either: svc counts the pieces, the same text as above.
    upstream.setBehavior({ rawSse: refusedSse() });
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, stream_options: { include_usage: true } });
    let id = '';
    let completionTokens: number | undefined;
    for await (const chunk of stream) {
      id = chunk.id;
      completionTokens ??= chunk.usage?.completion_tokens;
    }
    expect(completionTokens).toBe(res.usage!.completion_tokens);
    expect((await delivered(id)).output_tokens).toBe(res.usage!.completion_tokens);
  });

  it('through the Responses API (non-streamed): the refusal item is audited as the refusal', async () => {
    upstream.setBehavior({ rawJson: refusedJson() });
    const { data: res, response } = await client.responses.create({ model: 'svc01', input: messages }).withResponse();
    expect(res.output[0]).toMatchObject({ type: 'message', content: [{ type: 'refusal', refusal: REFUSAL }] });
    expect(await delivered(response.headers.get('x-request-id')!)).toMatchObject({ response_text: '', refusal: REFUSAL });
  });

  it('an answer is audited without the field, streamed or not', async () => {
    upstream.setBehavior({ answer: 'Call a locksmith.' });
    const res = await client.chat.completions.create({ model: 'svc01', messages });
    const plain = await delivered(res.id);
    expect(plain).toMatchObject({ response_text: 'Call a locksmith.' });
    expect(plain).not.toHaveProperty('refusal');

    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true });
    let id = '';
    for await (const chunk of stream) id = chunk.id;
    const streamed = await delivered(id);
    expect(streamed).toMatchObject({ response_text: 'Call a locksmith.', streaming: true });
    expect(streamed).not.toHaveProperty('refusal');
  });
});
