import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { type FakeUpstream } from './support/fake-upstream.js';
import type { TestServer } from './support/test-server.js';
import type { Receiver } from './support/webhooks.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';

/**
 * OpenAI's audio models asked for `modalities: ["text", "audio"]` answer `content: null` with the words in
 * `audio.transcript` (streamed: `delta.audio.transcript`): the transcript is the answer svc checks and audits.
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';
const messages = [
  { role: 'system' as const, content: DOC },
  { role: 'user' as const, content: 'When was the Eiffel Tower completed?' },
];
const spoken = { modalities: ['text', 'audio'] as Array<'text' | 'audio'>, audio: { voice: 'alloy' as const, format: 'pcm16' as const } };

interface Svc {
  checked: boolean;
  grounded: boolean;
  flagged_spans: Array<{ start: number; end: number; text: string }>;
}

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let client: OpenAI;
let rig: AuditedServer;

beforeAll(async () => {
  rig = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'gpt-4o-audio-preview' });
  ({ upstream, server, receiver, client } = rig);
});

afterAll(() => rig?.close());

beforeEach(() => upstream.setBehavior({}));

/** The webhook payload of the request `id`. */
async function delivered(id: string): Promise<Record<string, unknown>> {
  const matches = (d: { raw: Buffer }) => JSON.parse(d.raw.toString()).request_id === id;
  const [hit] = (await receiver.waitFor((all) => all.some(matches))).filter(matches);
  return JSON.parse(hit!.raw.toString()) as Record<string, unknown>;
}

/** The flagged span covering `text`, checked to point into `answer`. */
function spanOf(svc: Svc, answer: string, text: string) {
  const span = svc.flagged_spans.find((s) => s.text.includes(text));
  expect(span, JSON.stringify(svc)).toBeDefined();
  expect(answer.slice(span!.start, span!.end)).toBe(span!.text);
  return span;
}

describe('an answer given only as audio', () => {
  it('non-streamed: its transcript is grounding-checked (offsets into it) and audited as response_text', async () => {
    const answer = 'It was completed in 1925.';
    upstream.setBehavior({ answer });
    const res = await client.chat.completions.create({ model: 'svc01', messages, ...spoken });
    expect(upstream.requests.at(-1)!.body).toMatchObject({ modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'pcm16' } });
    const message = res.choices[0]!.message;
    expect(message.content).toBeNull();
    expect(message.audio).toMatchObject({ transcript: answer, data: Buffer.from(answer).toString('base64') });
    expect(message.audio!.id).toMatch(/^audio_/);
    const svc = (res as unknown as { svc: Svc }).svc;
    expect(svc).toMatchObject({ checked: true, grounded: false });
    spanOf(svc, answer, '1925');
    expect(await delivered(res.id)).toMatchObject({ response_text: answer, grounded: false, grounding_checked: true, streaming: false });

    upstream.setBehavior({ answer: 'It was completed in 1889.' });
    const right = await client.chat.completions.create({ model: 'svc01', messages, ...spoken });
    expect((right as unknown as { svc: Svc }).svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    expect(await delivered(right.id)).toMatchObject({ response_text: 'It was completed in 1889.', grounded: true });
  });

  it('streamed: the delta.audio.transcript pieces are the answer checked on the finish chunk and audited', async () => {
    const answer = 'The tower was completed in 1925 and is 330 metres tall.';
    upstream.setBehavior({ answer });
    const stream = await client.chat.completions.create({ model: 'svc01', messages, ...spoken, stream: true });
    let transcript = '';
    let data = '';
    let content = '';
    let expiresAt: unknown;
    let id = '';
    let svc: Svc | undefined;
    for await (const chunk of stream) {
      id = chunk.id;
      const delta = chunk.choices[0]?.delta as { content?: string | null; audio?: { transcript?: string; data?: string; expires_at?: number } } | undefined;
      content += delta?.content ?? '';
      transcript += delta?.audio?.transcript ?? '';
      data += delta?.audio?.data ?? '';
      expiresAt ??= delta?.audio?.expires_at;
      svc ??= (chunk as unknown as { svc?: Svc }).svc;
    }
    expect(content).toBe('');
    expect(transcript).toBe(answer);
    expect(Buffer.from(data, 'base64').toString()).toBe(answer);
    expect(typeof expiresAt).toBe('number');
    expect(svc).toMatchObject({ checked: true, grounded: false });
    spanOf(svc!, answer, '1925');
    expect(svc!.flagged_spans.some((s) => s.text.includes('330'))).toBe(false);
    expect(await delivered(id)).toMatchObject({ response_text: answer, grounded: false, grounding_checked: true, streaming: true });
  });
});

describe('an answer given only as audio, through the Responses API', () => {
  const answer = 'It was completed in 1889.';
  const audio = { id: 'audio_r1', data: Buffer.from(answer).toString('base64'), expires_at: 2_000_000_000, transcript: answer };
  const spokenJson = () => ({
    id: 'up',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-4o-audio-preview',
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, audio }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 20, completion_tokens: 6, total_tokens: 26 },
  });
  const spokenSse = (): string[] => {
    const frame = (delta: object, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'up', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-audio-preview', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    return [
      frame({ role: 'assistant', content: null, audio: { id: audio.id, transcript: 'It was completed ' } }, null) +
        frame({ audio: { transcript: 'in 1889.' } }, null) +
        frame({ audio: { id: audio.id, data: audio.data } }, null) +
        frame({ audio: { expires_at: audio.expires_at } }, null) +
        frame({}, 'stop') +
        'data: [DONE]\n\n',
    ];
  };
  const input = [
    { role: 'system' as const, content: DOC },
    { role: 'user' as const, content: 'When was the Eiffel Tower completed?' },
  ];

  it('openai responses.create: the transcript is the message item (output_text), checked and audited', async () => {
    upstream.setBehavior({ rawJson: spokenJson() });
    const { data: res, response } = await client.responses.create({ model: 'svc01', input }).withResponse();
    expect(res.output.map((item) => item.type)).toEqual(['message']);
    expect(res.output_text).toBe(answer);
    expect((res as unknown as { svc: Svc }).svc).toMatchObject({ checked: true, grounded: true });
    expect(await delivered(response.headers.get('x-request-id')!)).toMatchObject({ response_text: answer, grounded: true });
  });

  it('openai responses.stream: output_text deltas carry the transcript; the final response has the message item', async () => {
    upstream.setBehavior({ rawSse: spokenSse() });
    const stream = client.responses.stream({ model: 'svc01', input });
    let deltas = '';
    stream.on('response.output_text.delta', (event) => {
      deltas += event.delta;
    });
    const final = await stream.finalResponse();
    expect(deltas).toBe(answer);
    expect(final.output.map((item) => item.type)).toEqual(['message']);
    expect(final.output_text).toBe(answer);
    expect((final as unknown as { svc: Svc }).svc).toMatchObject({ checked: true, grounded: true });
  });
});
