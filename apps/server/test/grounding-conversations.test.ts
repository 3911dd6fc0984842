import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { SvcResultSchema, type SvcResult } from '@svc/protocol';
import { startAnsweringServer, type AnsweringServer } from './support/answering-server.js';

// A multi-turn conversation as an agent sends it: a system prompt whose evidence sits after emoji and CJK text
// (UTF-16 offsets past surrogate pairs), a user turn in content parts, an earlier assistant turn, a function
// call and its JSON tool result. (An image among the sources withholds flags: grounding-unreadable-parts.test.ts.)
const SYSTEM = '🎉🚆 東京タワーは1958年に完成しました。 The Tokyo office opens at 8 am on weekdays.';
const WEATHER = '{"location": "Paris", "temperature": 21, "unit": "C", "condition": "sunny"}';
const MESSAGES: ChatCompletionMessageParam[] = [
  { role: 'system', content: SYSTEM },
  {
    role: 'user',
    content: [
      { type: 'text', text: '📎 Our notes, 第二版:' },
      { type: 'text', text: 'The Osaka office moved to Umeda in 2022. When does the Tokyo office open?' },
    ],
  },
  { role: 'assistant', content: 'The Tokyo office closes at 6 pm on Fridays.' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city": "Lyon", "days": 9}' } }],
  },
  { role: 'tool', tool_call_id: 'call_1', content: WEATHER },
  { role: 'user', content: 'And the weather in Paris?' },
];

let rig: AnsweringServer;

beforeAll(async () => {
  rig = await startAnsweringServer();
});

afterAll(async () => {
  await rig?.close();
});

async function check(text: string): Promise<SvcResult> {
  rig.setAnswer(text);
  const res = await rig.client.chat.completions.create({ model: 'svc01', messages: MESSAGES });
  expect(res.choices[0]!.message.content).toBe(text);
  const svc = (res as unknown as { svc: SvcResult }).svc;
  expect(SvcResultSchema.parse(svc)).toEqual(svc);
  return svc;
}

/** The text a message contributes as a source (content parts joined by line breaks). */
function sourceText(i: number): string {
  const content = MESSAGES[i]!.content;
  if (typeof content === 'string') return content;
  return (content as Array<{ type: string; text?: string }>).flatMap((p) => (p.type === 'text' ? [p.text ?? ''] : [])).join('\n');
}

describe('grounding a multi-turn conversation through the HTTP route', () => {
  it("evidence offsets are UTF-16 offsets into the right message's text, past emoji and CJK", async () => {
    const svc = await check('🙂 The Tokyo office opens at 8 am on weekdays. It is 21 °C and sunny in Paris.');
    const [office, weather] = svc.claims!;
    expect(office!.evidence).toMatchObject({ message_index: 0, text: 'The Tokyo office opens at 8 am on weekdays.' });
    expect(weather!.evidence!.message_index).toBe(4);
    for (const c of svc.claims!) {
      const e = c.evidence!;
      expect(sourceText(e.message_index).slice(e.start, e.end)).toBe(e.text);
      expect(c.grounded, c.text).toBe(true);
    }
    expect(svc.grounded).toBe(true);
  });

  it("a content array's evidence points into its text parts joined by line breaks", async () => {
    const svc = await check('The Osaka office moved to Umeda in 2022.');
    const e = svc.claims![0]!.evidence!;
    expect(e).toMatchObject({ message_index: 1, text: 'The Osaka office moved to Umeda in 2022.' });
    expect(sourceText(1).slice(e.start, e.end)).toBe(e.text);
    expect(svc.grounded).toBe(true);
  });

  it('a JSON tool result is a source: a changed value is flagged at its place in the answer', async () => {
    const text = '東京: 🙂 It is 24 °C and sunny in Paris.';
    const svc = await check(text);
    expect(svc.grounded).toBe(false);
    expect(svc.flagged_spans.map((s) => s.text)).toEqual(['24']);
    expect(svc.flagged_spans[0]!.start).toBe(text.indexOf('24'));
    expect(svc.claims![svc.claims!.length - 1]!.evidence!.message_index).toBe(4);
  });

  it("an earlier assistant turn and a function call's arguments are not sources", async () => {
    // Restating the assistant's own earlier (unsupported) turn, or the arguments it sent, is not grounding.
    const restated = await check('The Tokyo office closes at 6 pm on Fridays.');
    expect(restated.grounded).toBe(false);
    for (const c of restated.claims!) expect(c.evidence?.message_index).not.toBe(2);
    const args = await check('The forecast for Lyon covers 9 days.');
    expect(args.grounded).toBe(false);
    expect(args.flagged_spans.map((s) => s.text)).toEqual(expect.arrayContaining(['Lyon', '9']));
  });

  it('the most common conversation, a persona and a request or question, has nothing to check against: not checked, not flagged', async () => {
    // Was flagged word by word against "You are a helpful assistant." (score 0.1): every poem, joke and answer from
    // memory of the apps that start with that system message.
    const conversations: ChatCompletionMessageParam[][] = [
      [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Who wrote Hamlet?' }],
      [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Write a poem about the sea.' }],
      [{ role: 'user', content: [{ type: 'text', text: 'Describe the picture.' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }],
    ];
    rig.setAnswer('Shakespeare wrote Hamlet around 1600. The sea is wide and blue.');
    for (const messages of conversations) {
      const res = await rig.client.chat.completions.create({ model: 'svc01', messages });
      const svc = (res as unknown as { svc: SvcResult }).svc;
      expect(svc, JSON.stringify(messages)).toMatchObject({ checked: false, grounded: true, flagged_spans: [] });
    }
    // A persona beside what the user states is checked against it.
    const res = await rig.client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Hamlet was written by Marlowe. Who wrote it?' }],
    });
    expect((res as unknown as { svc: SvcResult }).svc).toMatchObject({ checked: true, grounded: false });
  });
});
