import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import OpenAI from 'openai';
import { AuditPayloadSchema, SvcResultSchema, type SvcResult } from '@svc/protocol';
import { startAnsweringServer, type AnsweringServer } from './support/answering-server.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

// Requests whose sources carry parts the check cannot read: an image, a file, audio. The answer says what the
// model saw there, so its claims cannot be judged against the text alone and must not be flagged.
const IMAGE = { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } } as const;
const FILE = { type: 'file', file: { filename: 'invoice.pdf', file_data: 'data:application/pdf;base64,JVBERi0=' } } as const;
const AUDIO = { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } } as const;
const RECEIPT_ANSWER = 'The receipt is from Luigi\'s Trattoria and the total is $42.50.';

let rig: AnsweringServer;

beforeAll(async () => {
  rig = await startAnsweringServer();
});

afterAll(async () => {
  await rig?.close();
});

async function ask(messages: ChatCompletionMessageParam[], answer: string): Promise<{ svc: SvcResult; headers: Headers }> {
  rig.setAnswer(answer);
  const { data, response } = await rig.client.chat.completions.create({ model: 'svc01', messages }).withResponse();
  const svc = (data as unknown as { svc: SvcResult }).svc;
  expect(SvcResultSchema.parse(svc)).toEqual(svc);
  return { svc, headers: response.headers };
}

describe('sources the grounding check cannot read', () => {
  it.each([
    ['an image', IMAGE, 'image_url'],
    ['a file', FILE, 'file'],
    ['audio', AUDIO, 'input_audio'],
  ])('a question asked only of %s is not checked, and the response says which part', async (_, part, type) => {
    const { svc, headers } = await ask(
      [{ role: 'user', content: [{ type: 'text', text: 'Describe this receipt: the restaurant and the total.' }, part] as never }],
      RECEIPT_ANSWER,
    );
    expect(svc).toMatchObject({ checked: false, grounded: true, score: 1, flagged_spans: [], unreadable_parts: [{ message_index: 0, type }] });
    expect(headers.get('x-svc-checked')).toBe('false');
    expect(headers.get('x-svc-grounded')).toBe('true');
  });

  it('with text beside the image there is no verdict either, but each claim’s evidence in the text is reported', async () => {
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: 'Our expense policy: meals are refunded up to $60 per person.' },
      { role: 'user', content: [{ type: 'text', text: 'Can I claim this dinner?' }, IMAGE] },
    ];
    const { svc } = await ask(messages, 'Meals are refunded up to $60 per person. The receipt total is $42.50 at Luigi\'s Trattoria.');
    expect(svc).toMatchObject({ checked: false, grounded: true, score: 1, flagged_spans: [], unreadable_parts: [{ message_index: 1, type: 'image_url' }] });
    const [policy, receipt] = svc.claims!;
    expect(policy).toMatchObject({ grounded: true, evidence: { message_index: 0 } });
    // What the model read off the image is not in the text: the claim says so, the answer is not flagged for it.
    expect(receipt!.grounded).toBe(false);
  });

  it('the same answer without the image is flagged: the image is what keeps it unflagged', async () => {
    const { svc } = await ask(
      [
        { role: 'system', content: 'Our expense policy: meals are refunded up to $60 per person.' },
        { role: 'user', content: [{ type: 'text', text: 'Can I claim this dinner?' }] },
      ],
      'Meals are refunded up to $60 per person. The receipt total is $42.50 at Luigi\'s Trattoria.',
    );
    expect(svc.checked).toBe(true);
    expect(svc.grounded).toBe(false);
    expect(svc.flagged_spans.length).toBeGreaterThan(0);
    expect(svc.unreadable_parts).toBeUndefined();
  });

  it('a streamed answer carries the same svc object in its finishing chunk', async () => {
    rig.setAnswer(RECEIPT_ANSWER);
    const stream = await rig.client.chat.completions.create({
      model: 'svc01',
      stream: true,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Describe this receipt.' }, IMAGE] }],
    });
    let svc: SvcResult | undefined;
    for await (const chunk of stream) svc ??= (chunk as unknown as { svc?: SvcResult }).svc;
    expect(svc).toMatchObject({ checked: false, grounded: true, flagged_spans: [], unreadable_parts: [{ message_index: 0, type: 'image_url' }] });
  });
});

describe('the audit payload of such a request', () => {
  let upstream: FakeUpstream;
  let server: TestServer;
  let receiver: Receiver;
  let client: OpenAI;
  const answer = 'Meals are refunded up to $60 per person. The receipt total is $42.50 at Luigi\'s Trattoria.';

  beforeAll(async () => {
    receiver = await startReceiver();
    upstream = await startFakeUpstream({ answer: () => answer });
    server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
    client = new OpenAI({ apiKey: (await server.createKey({ webhookUrl: receiver.url })).token, baseURL: `${server.url}/v1`, maxRetries: 0 });
  });

  afterAll(async () => {
    await server?.close();
    await upstream?.close();
    await receiver?.close();
  });

  it('says which parts could not be read and keeps each claim with its evidence, as the response does', async () => {
    const res = await client.chat.completions.create({
      model: 'svc01',
      messages: [
        { role: 'system', content: 'Our expense policy: meals are refunded up to $60 per person.' },
        { role: 'user', content: [{ type: 'text', text: 'Can I claim this dinner?' }, IMAGE] },
      ],
    });
    const svc = (res as unknown as { svc: SvcResult }).svc;
    const [delivery] = await receiver.waitFor((r) => r.length >= 1);
    const payload = AuditPayloadSchema.parse(JSON.parse(delivery!.raw.toString('utf8')));
    expect(payload).toMatchObject({ grounding_checked: false, grounded: true, hallucination_score: 0, unreadable_parts: [{ message_index: 1, type: 'image_url' }] });
    expect(payload.claims).toEqual(svc.claims);
    expect(payload.claims!.map((c) => c.grounded)).toEqual([true, false]);
    expect(payload.flagged_spans).toBeUndefined();
  });
});
