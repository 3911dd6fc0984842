import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamBehavior } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { activeResources, chat, until, type ChatOutcome } from './support/reliability-http.js';
import { leakedSecrets } from './support/reliability-kit.js';

/**
 * Upstream faults against an in-process server: every fault gives the right 502 code (before the first
 * byte) or SSE error event (after it), the audit webhook records the status, the server keeps answering
 * other requests meanwhile, and repeating the faults leaves no sockets or timers behind.
 */

const TIMEOUT_MS = 1500;
const SECRET = 'whsec_upstream-faults-9c1d2e3f';
const LONG_ANSWER = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');

let upstream: FakeUpstream;
let receiver: Receiver;
let server: TestServer;
let token: string;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'All good here.' });
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS), SVC_RATE_LIMIT_RPM: '100000' } });
  ({ token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: SECRET }));
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

interface Case {
  name: string;
  behavior: FakeUpstreamBehavior;
  stream: boolean;
  /** A plain error (502 unless `status`) with this code before the first byte. */
  code?: string;
  status?: number;
  /** A 200 stream ending in an error event with this code. */
  event?: string;
  /** A complete answer. */
  ok?: true;
}

const CASES: Case[] = [
  { name: 'reset before headers', behavior: { resetBeforeHeaders: true }, stream: false, code: 'upstream_unavailable' },
  { name: 'reset before headers (stream)', behavior: { resetBeforeHeaders: true }, stream: true, code: 'upstream_unavailable' },
  { name: 'reset mid-stream', behavior: { resetMidStream: 3 }, stream: true, event: 'upstream_unavailable' },
  { name: 'HTTP 500', behavior: { status: 500 }, stream: false, code: 'upstream_error' },
  { name: 'HTTP 500 (stream)', behavior: { status: 500 }, stream: true, code: 'upstream_error' },
  { name: 'HTTP 429', behavior: { status: 429, retryAfter: '7' }, stream: false, code: 'upstream_rate_limited', status: 429 },
  { name: 'non-JSON body', behavior: { garbage: true }, stream: false, code: 'upstream_invalid_response' },
  { name: 'non-JSON body (stream)', behavior: { garbage: true }, stream: true, code: 'upstream_invalid_response' },
  { name: 'truncated SSE', behavior: { truncated: true }, stream: true, event: 'upstream_invalid_response' },
  { name: 'error event', behavior: { errorEvent: true }, stream: true, event: 'upstream_error' },
  { name: 'never answers', behavior: { hang: true }, stream: false, code: 'upstream_timeout' },
  { name: 'never answers (stream)', behavior: { hang: true }, stream: true, code: 'upstream_timeout' },
  { name: 'never ends (stream)', behavior: { hangMidStream: true }, stream: true, event: 'upstream_timeout' },
  { name: 'slow trickle past the timeout', behavior: { answer: LONG_ANSWER, trickle: { intervalMs: 50 } }, stream: true, event: 'upstream_timeout' },
  { name: 'slow trickle within the timeout', behavior: { answer: 'one two three four five', trickle: { intervalMs: 50 } }, stream: true, ok: true },
  // svc counts usage itself from every choice's text, kept by the upstream's choice index: 2^31 − 1 is one
  // choice to count, not a two-billion-slot array to walk.
  { name: 'a choice index of 2^31 − 1, no usage (stream)', behavior: { extraChoiceIndex: 2 ** 31 - 1, usage: false }, stream: true, ok: true },
  // A frame is refused at 16 MiB, not held and searched again at every read until the upstream timeout.
  { name: 'a frame nested 200,000 deep (stream)', behavior: { deepFrame: 200_000 }, stream: true, event: 'upstream_invalid_response' },
];

function check(c: Case, out: ChatOutcome): void {
  if (c.code) {
    expect(out.status, c.name).toBe(c.status ?? 502);
    expect(out.body?.error, c.name).toMatchObject({ code: c.code, type: expect.any(String), param: null });
    return;
  }
  expect(out.status, c.name).toBe(200);
  const last = out.events!.at(-1);
  if (c.event) {
    expect(last, c.name).toMatchObject({ error: { code: c.event } });
    expect(out.events, c.name).not.toContain('[DONE]');
  } else {
    expect(last, c.name).toBe('[DONE]');
  }
}

/** Whether a case is answered only once the upstream timeout (TIMEOUT_MS) has passed. */
const waitsForTimeout = (c: Case) => c.code === 'upstream_timeout' || c.event === 'upstream_timeout';

/**
 * Runs every case; returns request id → expected audited status. The cases that wait out the upstream timeout go
 * side by side, the others one after the other with nothing else in flight. Each request is sent once the one
 * before it has reached the upstream, which takes queued behaviours in the order requests arrive: every request
 * still meets its own fault.
 */
async function runMatrix(): Promise<Map<string, { status: number; case: Case; out: ChatOutcome }>> {
  const seen = new Map<string, { status: number; case: Case; out: ChatOutcome }>();
  const waiting: Array<Promise<void>> = [];
  for (const c of CASES) {
    if (!waitsForTimeout(c)) await Promise.all(waiting.splice(0));
    upstream.nextBehavior(c.behavior);
    const before = upstream.requests.length;
    let done = false;
    const answered = chat(server.url, token, { stream: c.stream })
      .then((out) => {
        check(c, out);
        seen.set(out.requestId, { status: c.ok ? 200 : (c.status ?? 502), case: c, out });
      })
      .finally(() => (done = true));
    if (!waitsForTimeout(c)) {
      await answered;
      continue;
    }
    waiting.push(answered);
    await until(() => upstream.requests.length > before || done, 30_000, `${c.name}: its request reached the upstream`);
  }
  await Promise.all(waiting);
  return seen;
}

describe('upstream faults', () => {
  // Their own server with a long timeout: reading 17 or 33 MiB on a loaded host can take longer than the matrix's
  // 1.5 s timeout, which would answer upstream_timeout before the size limit is reached.
  it('an answer past 32 MiB, or a stream frame past 16 MiB → upstream_invalid_response', { timeout: 120_000 }, async () => {
    const oversize: Case[] = [
      { name: 'an answer past 32 MiB', behavior: { rawJson: { id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(33 * 1024 * 1024) }, finish_reason: 'stop' }] } }, stream: false, code: 'upstream_invalid_response' },
      { name: 'a frame that never ends (stream)', behavior: { endlessFrameChars: 17 * 1024 * 1024 }, stream: true, event: 'upstream_invalid_response' },
    ];
    const patient = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_TIMEOUT_MS: '60000', SVC_RATE_LIMIT_RPM: '100000' } });
    try {
      const { token: patientToken } = await patient.createKey();
      for (const c of oversize) {
        upstream.nextBehavior(c.behavior);
        check(c, await chat(patient.url, patientToken, { stream: c.stream }));
      }
    } finally {
      await patient.close();
    }
  });

  it('each fault → the right 502 code or SSE error event, and the webhook records the status', async () => {
    const seen = await runMatrix();
    await receiver.waitFor((r) => [...seen.values()].filter((s) => s.status !== 429).length <= new Set(r.map((d) => JSON.parse(d.raw.toString()).request_id)).size, 20_000);
    const payloads = new Map(receiver.received.map((d) => {
      const p = JSON.parse(d.raw.toString('utf8'));
      return [p.request_id as string, p];
    }));
    for (const [requestId, { status, case: c, out }] of seen) {
      const payload = payloads.get(requestId);
      // design §5: a 429 (the upstream's, passed on) is not audited.
      if (status === 429) {
        expect(payload, c.name).toBeUndefined();
        continue;
      }
      expect(payload, c.name).toBeDefined();
      expect(payload.status_code, c.name).toBe(status);
      expect(payload.streaming, c.name).toBe(c.stream);
      // Text relayed before a mid-stream fault is what the audit keeps (of the first choice: not the stray one).
      const firstChoice = c.behavior.extraChoiceIndex === undefined ? out.text : out.text?.replace('Stray.', '');
      if (c.event || c.ok) expect(payload.response_text, c.name).toBe(firstChoice);
    }
  });

  it('a request whose upstream hangs does not hold up other requests', async () => {
    for (const stream of [false, true]) {
      const before = upstream.requests.length;
      upstream.nextBehavior(stream ? { hangMidStream: true } : { hang: true });
      let hangingDone = false;
      const hanging = chat(server.url, token, { stream }).finally(() => (hangingDone = true));
      await until(() => upstream.requests.length > before, 30_000, 'hanging request reached upstream');
      // Several normal requests, streamed and not, all complete while the first one still hangs.
      const normal = await Promise.all([chat(server.url, token, { stream: false }), chat(server.url, token, { stream: true })]);
      expect(normal[0]!.status).toBe(200);
      expect(normal[0]!.body.choices[0].message.content).toBe('All good here.');
      expect(normal[1]!.events!.at(-1)).toBe('[DONE]');
      expect(hangingDone).toBe(false);
      const out = await hanging;
      if (stream) expect(out.events!.at(-1)).toMatchObject({ error: { code: 'upstream_timeout' } });
      else expect(out.body.error.code).toBe('upstream_timeout');
    }
  });

  it('repeating every fault leaves no sockets or timers behind', async () => {
    const settle = async () => {
      // Let deliveries go out and keep-alive connections settle.
      await until(() => server.running.store.deliveries.backlog(Date.now()).then((b) => Number(b.pending ?? 0) === 0 || undefined), 15_000, 'backlog drained').catch(() => undefined);
      await delay(300);
      return activeResources();
    };
    await runMatrix();
    const first = await settle();
    for (let round = 0; round < 2; round++) await runMatrix();
    const after = await settle();
    const grew = Object.fromEntries(
      Object.entries(after)
        .map(([type, n]) => [type, n - (first[type] ?? 0)] as const)
        .filter(([, d]) => d > 0),
    );
    // 2 × 17 exchanges, most of them faulty: a leak per exchange would show as dozens; a couple of keep-alive sockets may come and go.
    expect(grew.TCPSocketWrap ?? 0, JSON.stringify({ first, after })).toBeLessThanOrEqual(4);
    expect(grew.Timeout ?? 0, JSON.stringify({ first, after })).toBeLessThanOrEqual(2);
    expect(upstream.requests.filter((r) => r.aborted).length).toBeGreaterThan(0);
    console.info(`[reliability] upstream faults: ${upstream.requests.length} upstream exchanges, handles before ${JSON.stringify(first)} after ${JSON.stringify(after)}`);
  });

  it('no key or signing secret in the logs of all of the above', () => {
    expect(server.logs.length).toBeGreaterThan(50);
    expect(leakedSecrets(server.logs.join('\n'), { token, SECRET })).toEqual([]);
  });
});
