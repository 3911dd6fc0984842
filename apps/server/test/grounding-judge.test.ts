import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { checkGrounding, JUDGE_REASON } from '@svc/grounding';
import type { SvcResult } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { JUDGE_SYSTEM_PROMPT, parseJudgeReply } from '../src/chat/grounder.js';

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';
const QUESTION = 'Tell me about the tower.';
const ANSWER = 'The Eiffel Tower is in Paris. It was completed in 1889 and was designed by Gustave Eiffel.';
const MESSAGES = [
  { role: 'system' as const, content: DOC },
  { role: 'user' as const, content: QUESTION },
];

let upstream: FakeUpstream;
let server: TestServer;
let slowServer: TestServer;
let client: OpenAI;
let slowClient: OpenAI;
/** What the judge answers; the chat request always gets ANSWER. */
let judgeReply: string;

const isJudge = (body: Record<string, unknown>) =>
  Array.isArray(body.messages) && (body.messages[0] as { content?: unknown })?.content === JUDGE_SYSTEM_PROMPT;
const judgeRequests = () => upstream.requests.filter((r) => isJudge(r.body));

beforeAll(async () => {
  upstream = await startFakeUpstream();
  const env = { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'up-model', SVC_GROUNDING_JUDGE: 'upstream' };
  server = await startTestServer({ env });
  slowServer = await startTestServer({ env: { ...env, SVC_UPSTREAM_TIMEOUT_MS: '2000' } });
  client = new OpenAI({ apiKey: (await server.createKey()).token, baseURL: `${server.url}/v1`, maxRetries: 0 });
  slowClient = new OpenAI({ apiKey: (await slowServer.createKey()).token, baseURL: `${slowServer.url}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await slowServer?.close();
  await upstream?.close();
});

beforeEach(() => {
  judgeReply = '{"unsupported": []}';
  upstream.setBehavior({ answer: (body) => (isJudge(body) ? judgeReply : ANSWER) });
  upstream.requests.length = 0;
});

async function ask(c: OpenAI, stream: boolean): Promise<{ content: string; svc: SvcResult }> {
  if (!stream) {
    const res = await c.chat.completions.create({ model: 'svc01', messages: MESSAGES });
    return { content: res.choices[0]!.message.content ?? '', svc: (res as unknown as { svc: SvcResult }).svc };
  }
  const s = await c.chat.completions.create({ model: 'svc01', messages: MESSAGES, stream: true });
  let content = '';
  let svc: SvcResult | undefined;
  for await (const chunk of s) {
    content += chunk.choices[0]?.delta.content ?? '';
    const extra = (chunk as unknown as { svc?: SvcResult }).svc;
    if (extra) svc = extra;
  }
  expect(svc).toBeDefined();
  return { content, svc: svc! };
}

const offline = () => checkGrounding({ sources: [DOC, QUESTION], answer: ANSWER, question: QUESTION });

describe.each([false, true])('judge mode (stream: %s)', (stream) => {
  it('adds the judge phrases that are exact substrings, with correct offsets, and drops the rest', async () => {
    judgeReply = JSON.stringify({
      unsupported: ['designed by Gustave Eiffel', 'designed by G. Eiffel', 'built in 1887', '   '],
    });
    const { content, svc } = await ask(client, stream);
    expect(content).toBe(ANSWER);
    const judged = svc.flagged_spans.filter((s) => s.reason === JUDGE_REASON);
    expect(judged).toHaveLength(1);
    const [span] = judged;
    expect(span!.text).toBe('designed by Gustave Eiffel');
    expect(span!.start).toBe(ANSWER.indexOf('designed by Gustave Eiffel'));
    expect(content.slice(span!.start, span!.end)).toBe(span!.text);
    for (const s of svc.flagged_spans) expect(content.slice(s.start, s.end)).toBe(s.text);
    expect(svc.checked).toBe(true);
    expect(svc.grounded).toBe(false);
    expect(svc.score).toBeLessThan(0.5);
    expect(svc.score).toBeLessThanOrEqual(offline().score);

    // The judge request: strict prompt, temperature 0, JSON output, bounded, the answer and sources inside.
    const [judge] = judgeRequests();
    expect(judge).toBeDefined();
    expect(judge!.body).toMatchObject({ model: 'up-model', temperature: 0, response_format: { type: 'json_object' } });
    expect(judge!.body.max_tokens).toBeGreaterThan(0);
    expect(judge!.body.max_tokens).toBeLessThanOrEqual(2048);
    expect(judge!.body.stream).not.toBe(true);
    const user = (judge!.body.messages as Array<{ content: string }>)[1]!.content;
    expect(user).toContain(ANSWER);
    expect(user).toContain(DOC);
  });

  it('keeps the offline result when the judge finds nothing (or only non-substrings)', async () => {
    judgeReply = '```json\n["the tower is blue"]\n```';
    const { svc } = await ask(client, stream);
    const expected = offline();
    expect(svc.score).toBe(expected.score);
    expect(svc.grounded).toBe(expected.grounded);
    expect(svc.flagged_spans).toEqual(expected.flaggedSpans);
    expect(judgeRequests()).toHaveLength(1);
  });

  it('falls back to the offline result when the judge call fails, and logs a warning without the prompt', async () => {
    upstream.setBehavior({ answer: ANSWER });
    // First request is the chat completion, the second the judge.
    upstream.nextBehavior({ answer: ANSWER });
    upstream.nextBehavior({ status: 500, errorMessage: 'judge exploded' });
    const before = server.logs.length;
    const { content, svc } = await ask(client, stream);
    expect(content).toBe(ANSWER);
    const expected = offline();
    expect(svc).toMatchObject({ checked: true, score: expected.score, grounded: expected.grounded });
    expect(svc.flagged_spans).toEqual(expected.flaggedSpans);
    expect(upstream.requests).toHaveLength(2);
    const logs = server.logs.slice(before);
    const warn = logs.find((l) => l.includes('grounding judge failed'));
    expect(warn).toBeDefined();
    expect(JSON.parse(warn!).level).toBe(40);
    for (const line of logs) {
      expect(line).not.toContain('Gustave');
      expect(line).not.toContain('Eiffel Tower');
    }
  });

  it('falls back when the judge reply is not JSON', async () => {
    judgeReply = 'I think "designed by Gustave Eiffel" is unsupported.';
    const before = server.logs.length;
    const { svc } = await ask(client, stream);
    expect(svc.score).toBe(offline().score);
    expect(svc.flagged_spans.some((s) => s.reason === JUDGE_REASON)).toBe(false);
    expect(server.logs.slice(before).some((l) => l.includes('grounding judge reply was not'))).toBe(true);
  });

  it('falls back when the judge times out', async () => {
    upstream.setBehavior({ answer: ANSWER });
    upstream.nextBehavior({ answer: ANSWER });
    upstream.nextBehavior({ hang: true });
    const started = Date.now();
    const { svc } = await ask(slowClient, stream);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(svc.score).toBe(offline().score);
    expect(svc.flagged_spans.some((s) => s.reason === JUDGE_REASON)).toBe(false);
    expect(slowServer.logs.some((l) => l.includes('grounding judge failed') && l.includes('timeout'))).toBe(true);
  });
});

describe('the judge follows SVC_GROUNDING_THRESHOLD', () => {
  it('at 0.4, an answer the judge flags scores below 0.4 and is not grounded', async () => {
    const low = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'up-model', SVC_GROUNDING_JUDGE: 'upstream', SVC_GROUNDING_THRESHOLD: '0.4' } });
    try {
      const lowClient = new OpenAI({ apiKey: (await low.createKey()).token, baseURL: `${low.url}/v1`, maxRetries: 0 });
      judgeReply = JSON.stringify({ unsupported: ['designed by Gustave Eiffel'] });
      const { svc } = await ask(lowClient, false);
      expect(svc.flagged_spans.some((s) => s.reason === JUDGE_REASON)).toBe(true);
      expect(svc.grounded).toBe(false);
      expect(svc.score).toBeLessThan(0.4);
    } finally {
      await low.close();
    }
  });
});

describe('no judge call when nothing is checked', () => {
  it('skips the judge when dehallucinate is off or there is no source', async () => {
    await client.chat.completions.create({
      model: 'svc01',
      messages: MESSAGES,
      // @ts-expect-error svc extension
      svc: { dehallucinate: false },
    });
    expect(judgeRequests()).toHaveLength(0);
  });
});

describe('parseJudgeReply', () => {
  it('reads objects, bare arrays, fences and prose-wrapped JSON', () => {
    expect(parseJudgeReply('{"unsupported": ["a", "b"]}')).toEqual(['a', 'b']);
    expect(parseJudgeReply('["a"]')).toEqual(['a']);
    expect(parseJudgeReply('```json\n{"spans": [{"text": "x"}]}\n```')).toEqual(['x']);
    expect(parseJudgeReply('Here: {"unsupported": []} done')).toEqual([]);
    expect(parseJudgeReply('{"phrases": ["p", 3, null]}')).toEqual(['p']);
    expect(parseJudgeReply('nothing here')).toBeUndefined();
    expect(parseJudgeReply('{"verdict": "ok"}')).toBeUndefined();
    expect(parseJudgeReply(null)).toBeUndefined();
  });
});

describe('judge mode, a structured answer under its schema', () => {
  // The label is the schema's choice; the judge, shown no schema, calls it unsupported.
  const JSON_ANSWER = '{"city": "Paris", "category": "landmark", "year": 1889}';
  const response_format = {
    type: 'json_schema' as const,
    json_schema: {
      name: 'place',
      strict: true,
      schema: {
        type: 'object',
        properties: { city: { type: 'string' }, category: { type: 'string', enum: ['landmark', 'museum', 'park'] }, year: { type: 'integer' } },
        required: ['city', 'category', 'year'],
        additionalProperties: false,
      },
    },
  };

  it.each([
    [['landmark', '"category": "landmark"', '"city"'], true, []],
    [['landmark', '"year": 1889'], false, ['"year": 1889']],
  ])('judge phrases %j: only those on a value the check reads are kept', async (phrases, grounded, flagged) => {
    judgeReply = JSON.stringify({ unsupported: phrases });
    upstream.setBehavior({ answer: (body) => (isJudge(body) ? judgeReply : JSON_ANSWER) });
    const res = await client.chat.completions.create({ model: 'svc01', messages: MESSAGES, response_format });
    const svc = (res as unknown as { svc: SvcResult }).svc;
    expect(judgeRequests()).toHaveLength(1);
    expect(svc.grounded).toBe(grounded);
    expect(svc.flagged_spans.map((s) => s.text)).toEqual(flagged);
  });
});
