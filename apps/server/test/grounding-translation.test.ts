import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { SvcResult } from '@svc/protocol';
import { startAnsweringServer, type AnsweringServer } from './support/answering-server.js';

// A translation is asked for in the last user turn; the answer, in another language, shares no words with its
// original, so only its numbers are checked. Which turn asks decides it: the question is the last user message.
const NOTICE = 'Our office is closed on public holidays and opens at 8 am on weekdays. Write to support@acme.dev for urgent issues.';
const GERMAN = 'Unser Büro ist an Feiertagen geschlossen und öffnet werktags um 8 Uhr. Schreiben Sie bei dringenden Problemen an support@acme.dev.';

let rig: AnsweringServer;

beforeAll(async () => {
  rig = await startAnsweringServer();
});

afterAll(async () => {
  await rig?.close();
});

function check(messages: ChatCompletionMessageParam[], text: string): Promise<SvcResult> {
  return rig.svcOf(messages, text);
}

const translate: ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are a professional translator.' },
  { role: 'user', content: `Translate this notice into German:\n\n${NOTICE}` },
];

describe('grounding a translation through the HTTP route', () => {
  it('a faithful German translation of the user turn is grounded', async () => {
    const svc = await check(translate, GERMAN);
    expect(svc.flagged_spans).toEqual([]);
    expect(svc.grounded).toBe(true);
  });

  it('a wrong number in the translation is flagged, and only it', async () => {
    const svc = await check(translate, GERMAN.replace('um 8 Uhr', 'um 9 Uhr'));
    expect(svc.grounded).toBe(false);
    expect(svc.flagged_spans!.map((s) => s.text)).toEqual(['9']);
  });

  it('when the last user turn asks a question instead, a German answer is checked word by word', async () => {
    const messages: ChatCompletionMessageParam[] = [
      ...translate,
      { role: 'assistant', content: GERMAN },
      { role: 'user', content: 'When does the office open on weekdays?' },
    ];
    const svc = await check(messages, 'Das Büro öffnet werktags um 7 Uhr und schließt mittags.');
    expect(svc.grounded).toBe(false);
  });
});
