import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import type { SvcResult } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { adminCommand, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A faithful answer in other words than its source: the check scores the paraphrase 0.425, below the default
// threshold (0.5) and above 0.4, a threshold an operator whose traffic paraphrases might calibrate.
const DOC = 'Fees. A library card is free for residents. Visitors pay 12 dollars a year.';
const MESSAGES = [
  { role: 'system' as const, content: `You answer from these documents.\n${DOC}` },
  { role: 'user' as const, content: 'How much do visitors pay?' },
];
const ANSWER = 'Visitors pay 12 dollars a year. A card costs visitors twelve dollars annually.';
const PARAPHRASE = 'A card costs visitors twelve dollars annually.';

let upstream: FakeUpstream;
let receiver: Receiver;
const servers: TestServer[] = [];

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: () => ANSWER });
  receiver = await startReceiver();
});

afterAll(async () => {
  for (const s of servers.splice(0)) await s.close();
  await receiver?.close();
  await upstream?.close();
});

/** A server with these settings and a client whose key delivers audit webhooks to `receiver`. */
async function serverWith(env: Record<string, string>): Promise<OpenAI> {
  const server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'up-model', ...env } });
  servers.push(server);
  const { token } = await server.createKey({ webhookUrl: receiver.url });
  return new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
}

/** The answer's svc result, its x-svc-grounded header and the audit payload its webhook delivered. */
async function ask(client: OpenAI): Promise<{ svc: SvcResult; header: string | null; audit: Record<string, unknown> }> {
  const { data, response } = await client.chat.completions.create({ model: 'svc01', messages: MESSAGES }).withResponse();
  expect(data.choices[0]!.message.content).toBe(ANSWER);
  const delivered = await receiver.waitFor((r) => r.some((d) => JSON.parse(d.raw.toString('utf8')).request_id === data.id));
  const audit = delivered.map((d) => JSON.parse(d.raw.toString('utf8')) as Record<string, unknown>).find((p) => p.request_id === data.id)!;
  return { svc: (data as unknown as { svc: SvcResult }).svc, header: response.headers.get('x-svc-grounded'), audit };
}

describe('SVC_GROUNDING_THRESHOLD', () => {
  it('decides whether the same answer is grounded: response, claims, flagged spans, header and audit payload', async () => {
    const atDefault = await ask(await serverWith({}));
    const calibrated = await ask(await serverWith({ SVC_GROUNDING_THRESHOLD: '0.4' }));

    // The check scores the answer the same either way; only the verdicts move.
    expect(calibrated.svc.score).toBe(atDefault.svc.score);
    expect(atDefault.svc.score).toBeGreaterThanOrEqual(0.4);
    expect(atDefault.svc.score).toBeLessThan(0.5);

    expect(atDefault.svc).toMatchObject({ checked: true, grounded: false });
    expect(atDefault.svc.claims!.map((c) => [c.text, c.grounded])).toEqual([
      ['Visitors pay 12 dollars a year.', true],
      [PARAPHRASE, false],
    ]);
    expect(atDefault.svc.flagged_spans.map((s) => s.text)).toEqual(['costs', 'annually']);
    expect(atDefault.header).toBe('false');
    expect(atDefault.audit).toMatchObject({ grounded: false, grounding_checked: true });
    expect((atDefault.audit.flagged_spans as unknown[]).length).toBe(2);

    expect(calibrated.svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    expect(calibrated.svc.claims!.map((c) => [c.text, c.grounded])).toEqual([
      ['Visitors pay 12 dollars a year.', true],
      [PARAPHRASE, true],
    ]);
    expect(calibrated.header).toBe('true');
    expect(calibrated.audit).toMatchObject({ grounded: true, grounding_checked: true, flagged_spans: [] });
  });

  it('an answer the sources do not hold stays flagged at a lower threshold', async () => {
    upstream.setBehavior({ answer: () => `${ANSWER} The branch reopened in 2021 under Mayor Dalton.` });
    try {
      const res = await (await serverWith({ SVC_GROUNDING_THRESHOLD: '0.4' })).chat.completions.create({ model: 'svc01', messages: MESSAGES });
      const svc = (res as unknown as { svc: SvcResult }).svc;
      expect(svc.grounded).toBe(false);
      expect(svc.flagged_spans.map((s) => s.text)).toEqual(['branch reopened', '2021', 'Mayor Dalton']);
    } finally {
      upstream.setBehavior({ answer: () => ANSWER });
    }
  });
});

describe('SVC_GROUNDING_THRESHOLD in the built server (svc-server start)', () => {
  // Past 32,000 characters of sources the check runs on the grounding worker thread, which only the build has.
  const LARGE = [{ role: 'system' as const, content: `You answer from these documents.\n${DOC}\n${'The reading room has long tables and green lamps. '.repeat(800)}` }, MESSAGES[1]!];
  let dir: string;
  let proc: ServerProcess | undefined;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-threshold-'));
  });

  afterAll(async () => {
    await proc?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the worker thread checks large inputs at the configured threshold', async () => {
    expect(LARGE[0]!.content.length).toBeGreaterThan(32_000);
    const env = serverEnv({ SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`, SVC_UPSTREAM_BASE_URL: upstream.url, SVC_GROUNDING_THRESHOLD: '0.4' });
    adminCommand(['users', 'create', '--email', 'op@example.com', '--password', 'long-enough-pw'], env);
    const key = JSON.parse(adminCommand(['keys', 'create', '--email', 'op@example.com', '--json'], env)).key as string;
    proc = await startServerProcess(env);
    const client = new OpenAI({ apiKey: key, baseURL: `${proc.url}/v1`, maxRetries: 0 });
    const res = await client.chat.completions.create({ model: 'svc01', messages: LARGE });
    const svc = (res as unknown as { svc: SvcResult }).svc;
    expect(svc.score).toBeGreaterThanOrEqual(0.4);
    expect(svc.score).toBeLessThan(0.5);
    expect(svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    expect(svc.claims!.every((c) => c.grounded)).toBe(true);
  });
});
