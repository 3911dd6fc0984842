import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { SvcResultSchema, type SvcResult } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';

// A retrieval-style conversation: two documents in the system prompt, a tool result, the user's question.
const HOURS = 'Opening hours. The library opens at 9 am and closes at noon on Saturdays. It is closed on Sundays.';
const FEES = 'Fees. A library card is free for residents. Visitors pay 12 dollars a year.';
const TOOL = 'The branch on Elm Street was renovated in 2019.';
const MESSAGES = [
  { role: 'system' as const, content: `You answer from these documents.\n${HOURS}\n${FEES}` },
  { role: 'user' as const, content: 'What about the Elm Street branch and the fees?' },
  { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'lookup', arguments: '{}' } }] },
  { role: 'tool' as const, tool_call_id: 'call_1', content: TOOL },
  { role: 'user' as const, content: 'Thanks. So how much do visitors pay, and when was Elm Street renovated?' },
];
// Sure (chatter) + a claim copied from FEES + a claim from the tool + one with a wrong year + an offer of help.
const ANSWER =
  'Sure! Visitors pay 12 dollars a year. The branch on Elm Street was renovated in 2019. It reopened in 2021 under Mayor Dalton. Let me know if you need anything else.';

let upstream: FakeUpstream;
let server: TestServer;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: () => ANSWER });
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'up-model' } });
  client = new OpenAI({ apiKey: (await server.createKey()).token, baseURL: `${server.url}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

/** The text a message contributes as a source (string content here). */
const messageText = (i: number) => MESSAGES[i]!.content as string;

function expectClaims(content: string, svc: SvcResult): void {
  expect(SvcResultSchema.parse(svc)).toEqual(svc);
  const claims = svc.claims!;
  // The opener and the offer of help are not claims; three sentences are.
  expect(claims.map((c) => c.text)).toEqual([
    'Visitors pay 12 dollars a year.',
    'The branch on Elm Street was renovated in 2019.',
    'It reopened in 2021 under Mayor Dalton.',
  ]);
  for (const c of claims) expect(content.slice(c.start, c.end)).toBe(c.text);
  const [fees, renovated, reopened] = claims;
  // Evidence points into the right message, at the right offsets.
  expect(fees!.evidence).toMatchObject({ message_index: 0 });
  expect(messageText(0).slice(fees!.evidence!.start, fees!.evidence!.end)).toBe(fees!.evidence!.text);
  expect(fees!.evidence!.text).toContain('Visitors pay 12 dollars a year.');
  expect(fees!.grounded).toBe(true);
  expect(renovated!.evidence).toMatchObject({ message_index: 3, start: 0, end: TOOL.length, text: TOOL, score: 1 });
  expect(renovated!.grounded).toBe(true);
  expect(reopened!.grounded).toBe(false);
  // The answer is as grounded as its weakest claim; the flagged spans are that claim's unsupported parts.
  expect(svc.grounded).toBe(false);
  expect(svc.score).toBeLessThanOrEqual(reopened!.score);
  expect(svc.flagged_spans.map((s) => s.text)).toEqual(['reopened', '2021', 'Mayor Dalton']);
  for (let i = 1; i < svc.flagged_spans.length; i++) expect(svc.flagged_spans[i]!.start).toBeGreaterThanOrEqual(svc.flagged_spans[i - 1]!.end);
}

describe('svc.claims: every claim with its evidence', () => {
  it('non-streamed, through the openai SDK', async () => {
    const res = await client.chat.completions.create({ model: 'svc01', messages: MESSAGES });
    const content = res.choices[0]!.message.content!;
    expect(content).toBe(ANSWER);
    expectClaims(content, (res as unknown as { svc: SvcResult }).svc);
  });

  it('streamed: the chunk with finish_reason carries the same claims', async () => {
    const stream = await client.chat.completions.create({ model: 'svc01', messages: MESSAGES, stream: true });
    let content = '';
    let svc: SvcResult | undefined;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      svc ??= (chunk as unknown as { svc?: SvcResult }).svc;
    }
    expect(content).toBe(ANSWER);
    expectClaims(content, svc!);
  });

  it('an answer of conversation only makes no claim and is not flagged', async () => {
    upstream.setBehavior({ answer: () => 'Hi! Happy to help. Is there anything else you would like to know?' });
    try {
      const res = await client.chat.completions.create({ model: 'svc01', messages: MESSAGES });
      const svc = (res as unknown as { svc: SvcResult }).svc;
      expect(svc).toMatchObject({ checked: true, grounded: true, score: 1, flagged_spans: [], claims: [] });
    } finally {
      upstream.setBehavior({ answer: () => ANSWER });
    }
  });
});

describe('links in a tool result', () => {
  const DOC_TOOL = '{"title":"Authentication guide","url":"https://docs.acmecorp.io/auth/login?lang=en","support":"help@acmecorp.io"}';
  const LINK_MESSAGES = [
    { role: 'system' as const, content: 'You answer questions about the Acme API.' },
    { role: 'user' as const, content: 'Where is the authentication guide?' },
    { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'search_docs', arguments: '{"q":"auth"}' } }] },
    { role: 'tool' as const, tool_call_id: 'call_1', content: DOC_TOOL },
  ];

  it.each([
    ['the link the tool returned', 'The authentication guide is at https://www.docs.acmecorp.io/auth/login/?lang=en. Support is help@acmecorp.io.', []],
    ['an invented link and address', 'The authentication guide is at https://docs.acmecorp.io/auth. Support is support@acmecorp.io.', [
      ['https://docs.acmecorp.io/auth', 'link not in the sources'],
      ['support@acmecorp.io', 'e-mail address not in the sources'],
    ]],
  ])('%s', async (_what, answer, flagged) => {
    upstream.setBehavior({ answer: () => answer });
    try {
      const res = await client.chat.completions.create({ model: 'svc01', messages: LINK_MESSAGES });
      const content = res.choices[0]!.message.content!;
      const svc = (res as unknown as { svc: SvcResult }).svc;
      expect(svc.checked).toBe(true);
      expect(svc.grounded).toBe(flagged.length === 0);
      expect(svc.flagged_spans.map((s) => [s.text, s.reason])).toEqual(flagged);
      for (const s of svc.flagged_spans) expect(content.slice(s.start, s.end)).toBe(s.text);
      if (flagged.length === 0) expect(svc.claims!.every((c) => c.evidence?.message_index === 3)).toBe(true);
    } finally {
      upstream.setBehavior({ answer: () => ANSWER });
    }
  });
});
