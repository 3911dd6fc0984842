import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cli, killAll, processEnv, requireBuiltServer, spawnServer } from './support/reliability-kit.js';

// The package's test script runs this file alone, after the others: its latency figure is meaningless while
// another test file shares the machine's two cores.

/**
 * Issue #26's watchdog: the inputs that used to stall the event loop for seconds (white-space runs, a
 * schema asking for a 1e9-character string, a 9 MiB message) are sent all at once, three rounds, to the
 * built server (its own process: the client's work does not count) while /healthz is polled every 2 ms and
 * ordinary requests keep coming. The only timed assertion of these suites: p99 of the polls under a bound
 * relative to this machine, 100 ms or four times what parsing the largest body takes here (measured in the
 * same run), whichever is more. Parsing a 9 MiB body is one synchronous step that no server can split, and it
 * takes 25 ms on one host and 70 ms on another; with four heavy inputs at once a poll may wait behind a parse
 * and the audit's insert of the same megabytes back to back. The stalls this guards against lasted seconds. The figures
 * (poll latencies, the bound, and the server's own event-loop lag from /metrics) are printed.
 */

const children: ChildProcess[] = [];
const output: string[] = [];
let dir: string;

beforeAll(() => {
  requireBuiltServer();
  dir = mkdtempSync(join(tmpdir(), 'svc-rel-loop-'));
});

afterEach(async (context) => {
  if (context.task.result?.state === 'fail') console.log(output.join('').split('\n').filter((l) => !l.includes('"level":30')).slice(-20).join('\n'));
  output.length = 0;
  await killAll(children);
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The built server on the offline model, with a fresh database and an API key. It is stopped after the test
 * unless `owners` is given (a suite's shared server, stopped with them).
 */
async function startServer(name: string, owners = children): Promise<{ url: string; token: string }> {
  // A directory per server: svc refuses to start a second, new database beside an existing one.
  const env = processEnv({ SVC_DATABASE_URL: `sqlite:${join(dir, name, 'svc.db')}`, SVC_PORT: '0', SVC_RATE_LIMIT_RPM: '100000' });
  cli(['users', 'create', '--email', 'loop@example.test', '--password', 'correct horse battery'], env);
  const { key } = JSON.parse(cli(['keys', 'create', '--email', 'loop@example.test', '--json'], env)) as { key: string };
  const server = await spawnServer(env, output, owners);
  return { url: server.url, token: key };
}

interface Heavy {
  what: string;
  body: unknown;
  /** What a clear answer is: 200, or this 4xx. */
  status: number;
  /**
   * Another clear answer, for a case decided by a time budget: the offline model gives up on a pattern whose
   * test takes more than 30 ms (a 400 saying so), which on a loaded host it may reach.
   */
  orBudgetRefusal?: true;
  /** Where it is sent: chat completions unless given. */
  path?: '/v1/responses';
  /** An input only the Responses API has. */
  responsesOnly?: true;
  /** Posted once before the load: the request is its follow-up (`previous_response_id` its response's id). */
  previous?: unknown;
}

const MiB = 1024 * 1024;
const prose = (bytes: number) => 'The tower was finished in 1889 and is 330 metres tall. '.repeat(Math.ceil(bytes / 56)).slice(0, bytes);

/** The heavy inputs, with the grounding check (whose cost is @svc/grounding's) off or on. */
function heavyInputs(grounding: boolean): Heavy[] {
  const svc = { dehallucinate: grounding };
  const note = grounding ? ', grounding-checked' : '';
  return [
    { what: `200 KB of spaces${note}`, body: { model: 'svc01', svc, messages: [{ role: 'user', content: `${' '.repeat(200_000)}Hello?` }] }, status: 200 },
    { what: `3 MB of spaces, streamed${note}`, body: { model: 'svc01', svc, stream: true, messages: [{ role: 'user', content: ' '.repeat(3_000_000) }] }, status: 200 },
    {
      what: 'a tool schema with minLength 1e9',
      body: {
        model: 'svc01',
        messages: [{ role: 'user', content: 'Look up Paris.' }],
        tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string', minLength: 1e9 } }, required: ['q'] } } }],
        tool_choice: 'required',
      },
      status: 400,
    },
    { what: `a 9 MiB message of ordinary text${note}`, body: { model: 'svc01', svc, messages: [{ role: 'user', content: `${prose(9 * MiB)} How tall is the tower?` }] }, status: 200 },
  ];
}

/**
 * The same kinds of input through the Responses API, plus what only it has: megabytes of `instructions`
 * (stored twice, input and echo, and echoed in the answer) and 20,000 input items (validated, translated and
 * numbered one pass each).
 */
function heavyResponsesInputs(): Heavy[] {
  const path = '/v1/responses' as const;
  return [
    { what: 'Responses: 200 KB of spaces as input', path, body: { model: 'svc01', input: `${' '.repeat(200_000)}Hello?` }, status: 200 },
    { what: 'Responses: 3 MB of spaces, streamed', path, body: { model: 'svc01', stream: true, input: ' '.repeat(3_000_000) }, status: 200 },
    {
      what: 'Responses: a text.format schema with minLength 1e9',
      path,
      body: {
        model: 'svc01',
        input: 'Look up Paris.',
        text: { format: { type: 'json_schema', name: 'lookup', schema: { type: 'object', properties: { q: { type: 'string', minLength: 1e9 } }, required: ['q'], additionalProperties: false } } },
      },
      status: 400,
    },
    { what: 'Responses: 9 MiB of instructions', path, responsesOnly: true, body: { model: 'svc01', instructions: prose(9 * MiB), input: 'How tall is the tower?' }, status: 200 },
    {
      what: 'Responses: 20,000 input items',
      path,
      responsesOnly: true,
      body: { model: 'svc01', input: Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Item ${i} is a tower of ${i} metres.` })) },
      status: 200,
    },
  ];
}

/**
 * Follow-ups through `previous_response_id` to a stored conversation of 20,000 items: read back, translated
 * and sent upstream again on every turn, without the client sending any of it.
 */
function heavyHistoryInputs(): Heavy[] {
  const conversation = Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Item ${i} is a tower of ${i} metres.` }));
  const followUp = (question: string): Heavy => ({
    what: `Responses: a follow-up to 20,000 stored items (${question})`,
    path: '/v1/responses',
    responsesOnly: true,
    previous: { model: 'svc01', input: conversation },
    body: { model: 'svc01', input: question },
    status: 200,
  });
  // One at a time: reading the stored history back is one parse of its 800 KB of JSON (about 25 ms here), and two
  // follow-ups arriving together may take theirs in one check phase of the loop, back to back.
  return [followUp('How tall is item 7?')];
}

/**
 * Schemas whose filling once held the loop for seconds to minutes: a pattern with adjacent quantifiers tried
 * on long strings (`x*x*x*x*y` at minLength 400 never returned), and a 20,000-value enum in each of 1,000 items (a
 * RegExp per value per item: 15 s). Through tools, response_format and the Responses API.
 */
function heavySchemaInputs(): Heavy[] {
  const patterned = { type: 'object', properties: { x: { type: 'string', minLength: 400, pattern: 'x*x*x*x*y' } }, required: ['x'], additionalProperties: false };
  const manyValues = Array.from({ length: 20_000 }, (_, i) => `v${i}`);
  const enumItems = { type: 'object', properties: { a: { type: 'array', minItems: 1000, items: { enum: manyValues } } }, required: ['a'], additionalProperties: false };
  const messages = [{ role: 'user', content: `Look up ${'x'.repeat(300)} please.` }];
  return [
    { what: 'a tool pattern that backtracks', body: { model: 'svc01', messages, tools: [{ type: 'function', function: { name: 'lookup', parameters: patterned } }], tool_choice: 'required' }, status: 200, orBudgetRefusal: true },
    { what: 'a response_format pattern that backtracks', body: { model: 'svc01', messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: patterned } } }, status: 200, orBudgetRefusal: true },
    { what: 'Responses: a text.format pattern that backtracks', path: '/v1/responses', body: { model: 'svc01', input: messages[0]!.content, text: { format: { type: 'json_schema', name: 'x', schema: patterned } } }, status: 200, orBudgetRefusal: true },
    { what: '1,000 items of a 20,000-value enum', body: { model: 'svc01', messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: enumItems } } }, status: 200 },
  ];
}

/**
 * Hostile text of no issue before (a fuzzing round's harness): single tokens of 100 KB and more (one letter,
 * base64, minified JS, a URL), punctuation runs, brackets nested 100,000 deep in text, 50,000 line breaks,
 * tabs, NBSP, zero-width and RTL marks, combining marks, lone surrogates, digit runs, a run-on sentence, CJK;
 * 10,000 messages and 20,000 content parts. Each through chat and the Responses API with the grounding check on
 * (the default): the offline model's answer copies sentences of it, so the check reads the hostile text as
 * sources and as answer.
 */
function hostileInputs(): Heavy[] {
  const KB = 1000;
  const rep = (unit: string, chars: number) => unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars);
  let seed = 7;
  const random = (chars: number, alphabet: string) =>
    Array.from({ length: chars }, () => alphabet[(seed = (seed * 1103515245 + 12345) & 0x7fffffff) % alphabet.length]).join('');
  const texts = [
    'x'.repeat(100 * KB),
    random(300 * KB, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'),
    rep('function a(b,c){return b.map(function(d){return d*c+1;}).filter(Boolean)};', 200 * KB),
    `https://example.com/${random(100 * KB, 'abc/?=&%.-_')}`,
    rep('.', 200 * KB) + rep('!?', 200 * KB) + rep('- ', 100 * KB) + rep('| ', 100 * KB),
    '['.repeat(100 * KB) + ']'.repeat(100 * KB),
    `${'\n'.repeat(50_000)}${'\t'.repeat(100 * KB)}How tall is the tower?`,
    rep('a\u00a0b\u200b\u200fword\u202e ', 200 * KB),
    `a${'\u0301'.repeat(100 * KB)}${rep('\ud800x', 100 * KB)}`,
    rep('1 2 3 4 5 6 7 8 9 0 ', 100 * KB) + '9'.repeat(100 * KB) + rep('1,234,567.89 ', 100 * KB),
    rep('a. ', 200 * KB),
    rep('the tower was finished in 1889 and is 330 metres tall and ', 100 * KB),
    rep('東京は日本の首都です。', 100 * KB),
  ];
  const svc = { dehallucinate: true };
  const messages = (text: string) => [
    { role: 'system', content: prose(20 * KB) },
    { role: 'user', content: text },
  ];
  return [
    ...texts.map((text, i): Heavy => ({ what: `hostile text ${i}`, body: { model: 'svc01', svc, messages: messages(text) }, status: 200 })),
    ...texts.map((text, i): Heavy => ({ what: `Responses: hostile text ${i}`, path: '/v1/responses', body: { model: 'svc01', instructions: prose(20 * KB), input: text }, status: 200 })),
    {
      what: '10,000 messages',
      body: { model: 'svc01', svc, messages: Array.from({ length: 10_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i} is ${i} metres.` })) },
      status: 200,
    },
    {
      what: '20,000 content parts',
      body: { model: 'svc01', svc, messages: [{ role: 'user', content: Array.from({ length: 20_000 }, (_, i) => ({ type: 'text', text: `Part ${i} says the tower is ${i} m.` })) }] },
      status: 200,
    },
  ];
}

/**
 * A body of one long array of small items: 5,000,000 zeros fill a 10 MB body, and V8 allocates an array's 40 MB in
 * one step however its parse is split (one JSON.parse whole took 2 s; parsed in parts, its longest steps were
 * 0.45–0.9 s). Past MAX_JSON_ITEMS it is refused before parsing (one at the limit is served:
 * reliability-client-mistakes).
 */
function longArrayInputs(): Heavy[] {
  const messages = [{ role: 'user', content: 'How tall is the tower?' }];
  return [{ what: 'an array of 5,000,000 zeros', body: { model: 'svc01', messages, x_extra: new Array<number>(5_000_000).fill(0) }, status: 400 }];
}

/**
 * Polls /healthz every 2 ms (enough polls that p99 is not the single worst one), from a worker thread of its own, until `stop()`; resolves each poll's latency
 * (ms). The poller does not share its event loop with the senders: fetch encodes and writes the 9 MiB bodies in
 * the test's main thread, and a poll whose answer waited behind that work would count the client's step as the
 * server's stall.
 */
function pollHealth(url: string): { stop: () => void; latencies: Promise<number[]> } {
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
    const latencies = [];
    let done = false;
    parentPort.on('message', () => { done = true; });
    (async () => {
      // The worker's first fetch loads and compiles undici in this thread (100-400 ms on a busy 2-core host): that is
      // the poller's start, not the server's, and is left out.
      await fetch(workerData.url + '/healthz').then((res) => res.arrayBuffer(), () => undefined);
      while (!done) {
        const started = performance.now();
        // A poll that fails (the server reset it after a stall past its header timeout) counts as endless.
        const ok = await fetch(workerData.url + '/healthz').then(
          async (res) => (await res.arrayBuffer(), res.status === 200),
          () => false,
        );
        latencies.push(ok ? performance.now() - started : Infinity);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      parentPort.postMessage(latencies);
    })();`,
    { eval: true, workerData: { url } },
  );
  const latencies = new Promise<number[]>((resolve, reject) => {
    worker.once('message', (values: number[]) => {
      resolve(values);
      void worker.terminate();
    });
    worker.once('error', reject);
  });
  return { stop: () => worker.postMessage('stop'), latencies };
}

/** The server's own event-loop lag (p99, max, ms) from /metrics (prom-client's nodejs_eventloop_lag_*), when it reports it. */
async function loopFigures(url: string): Promise<Record<string, number>> {
  const res = await fetch(`${url}/metrics`);
  if (res.status !== 200) return {};
  const text = await res.text();
  const value = (name: string) => Number(new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? NaN);
  return { serverLagP99: Math.round(value('nodejs_eventloop_lag_p99_seconds') * 1000), serverLagMax: Math.round(value('nodejs_eventloop_lag_max_seconds') * 1000) };
}

/**
 * The p99 bound on this machine: 100 ms, or four times the median time of decoding and parsing the 9 MiB body
 * (the one step every server must take whole), whichever is more.
 */
function stallBound(): number {
  const body = Buffer.from(JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: prose(9 * MiB) }] }));
  const times = [0, 1, 2].map(() => {
    const started = performance.now();
    JSON.parse(body.toString('utf8'));
    return performance.now() - started;
  });
  return Math.max(100, Math.round(4 * times.sort((a, b) => a - b)[1]!));
}

const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;

const ROUNDS = 3;

/** Sends `heavy` (all at once, `rounds` times) and ordinary requests while polling /healthz; the figures. */
async function underLoad(url: string, token: string, heavy: Heavy[], rounds = ROUNDS) {
  const post = (body: string | Uint8Array<ArrayBuffer>, path = '/v1/chat/completions') =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body,
    }).then(async (res) => ({ status: res.status, text: await res.text() }));
  // What the follow-ups follow is stored first.
  const previousIds = new Map<Heavy, string>();
  for (const h of heavy.filter((h) => h.previous !== undefined)) {
    const answer = await post(JSON.stringify(h.previous), '/v1/responses');
    expect(answer.status, answer.text.slice(0, 200)).toBe(200);
    previousIds.set(h, (JSON.parse(answer.text) as { id: string }).id);
  }
  // Serialised and encoded to UTF-8 before the polls start: the test's own work is kept out of the measured window
  // (the poller has a thread of its own, but the two cores are shared).
  const bodies = heavy.map((h) => {
    const previous = previousIds.get(h);
    const body = previous === undefined ? h.body : { ...(h.body as object), previous_response_id: previous };
    return { h, body: new TextEncoder().encode(JSON.stringify(body)), path: h.path };
  });
  const ordinaryBody = JSON.stringify({ model: 'svc01', messages: [{ role: 'system', content: 'The tower is 330 metres tall.' }, { role: 'user', content: 'How tall is the tower?' }] });
  expect((await post(ordinaryBody)).status).toBe(200);
  const done = { value: false };
  await loopFigures(url); // prom-client resets its lag histogram at each read: what the window's read reports is the window's
  const polls = pollHealth(url);
  await delay(100);
  const ordinary = (async () => {
    const statuses: number[] = [];
    while (!done.value) {
      statuses.push(await post(ordinaryBody).then((res) => res.status, () => 0));
      await delay(50);
    }
    return statuses;
  })();
  // ROUNDS rounds of all the heavy inputs at once: a longer window (50-900 polls).
  const answers: Array<{ h: Heavy; status: number; text: string }> = [];
  for (let round = 0; round < rounds; round++) {
    answers.push(
      ...(await Promise.all(
        bodies.map(async ({ h, body, path }) => ({ h, ...(await post(body, path).catch((err: Error) => ({ status: 0, text: String(err.cause ?? err) }))) })),
      )),
    );
  }
  await delay(200);
  done.value = true;
  polls.stop();
  const [latencies, ordinaryStatuses] = await Promise.all([polls.latencies, ordinary]);
  const figures = {
    bound: stallBound(),
    polls: latencies.length,
    p50: Math.round(quantile(latencies, 0.5)),
    p99: Math.round(quantile(latencies, 0.99)),
    max: Math.round(Math.max(...latencies)),
    worst: [...latencies].sort((a, b) => b - a).slice(0, 6).map(Math.round),
    failed: latencies.filter((l) => l === Infinity).length,
    ordinary: ordinaryStatuses.length,
    ...(await loopFigures(url)),
  };
  console.log(`event-loop watchdog [${heavy.map((h) => h.what).join('; ')}]: ${JSON.stringify(figures)}`);
  return { answers, ordinaryStatuses, figures };
}

/**
 * Starts a server, serves `heavy` under load and checks what every case must: each heavy request its clear
 * answer (an error in the OpenAI shape), every ordinary one 200, and the polls' p99 under the bound.
 */
async function servesWithinBound(server: string | { url: string; token: string }, heavy: Heavy[], rounds = ROUNDS): Promise<void> {
  const { url, token } = typeof server === 'string' ? await startServer(server) : server;
  const { answers, ordinaryStatuses, figures } = await underLoad(url, token, heavy, rounds);
  for (const { h, status, text } of answers) {
    const budgetRefusal = h.orBudgetRefusal === true && status === 400 && /takes more than \d+ ms/.test(text);
    if (!budgetRefusal) expect(status, `${h.what}: ${text.slice(0, 200)}`).toBe(h.status);
    if (status >= 400) expect(JSON.parse(text).error.code).toEqual(expect.any(String));
  }
  expect(ordinaryStatuses.length).toBeGreaterThan(0);
  expect(ordinaryStatuses.every((s) => s === 200)).toBe(true);
  expect(figures.p99).toBeLessThan(figures.bound);
}

describe('the event loop under heavy inputs', () => {
  it('keeps /healthz p99 under the bound while white space, a 1e9-character schema and a 9 MiB message are served', { timeout: 120_000 }, () =>
    servesWithinBound('heavy', heavyInputs(false)));

  // Two cases of the size of the chat one (all five kinds at once, fifteen heavy requests, put p99 at 53–93 ms
  // on a host whose bound is 100): the chat inputs through the Responses API, and what only it has.
  it('keeps /healthz p99 under the bound while the Responses API serves white space and a 1e9-character schema', { timeout: 120_000 }, () =>
    servesWithinBound('responses-chat-kinds', heavyResponsesInputs().filter((h) => !h.responsesOnly)));

  it('keeps /healthz p99 under the bound while the Responses API serves 9 MiB of instructions and 20,000 input items', { timeout: 120_000 }, () =>
    servesWithinBound('responses-own-kinds', heavyResponsesInputs().filter((h) => h.responsesOnly)));

  it('keeps /healthz p99 under the bound while the Responses API serves follow-ups to a conversation of 20,000 stored items', { timeout: 120_000 }, () =>
    servesWithinBound('responses-history', heavyHistoryInputs()));

  // Six rounds: refused at its 500,001st item, a round is short, and under a hundred polls p99 is the slowest one,
  // which on a loaded host may be a poll the machine held, not the server. Before the limit, three rounds took
  // 44 s (p99 771 ms, bound 548).
  it('keeps /healthz p99 under the bound while a body of one array of 5,000,000 items is refused', { timeout: 180_000 }, () =>
    servesWithinBound('long-arrays', longArrayInputs(), 6));

  it('keeps /healthz p99 under the bound while JSON Schemas with a backtracking pattern or a 20,000-value enum are filled', { timeout: 120_000 }, () =>
    servesWithinBound('schemas', heavySchemaInputs()));

  // One hostile text at a time (through chat and the Responses API at once): all 13 at once put p99 at
  // 226–318 ms (server lag up to 250 ms) on a loaded host (load average 10–13), and four at once 139–185 ms, polls
  // waiting behind a queue of parses and checks of several hundred KB each; alone, each one's longest loop lag
  // was 10–31 ms (the round's harness, offline model, least of three). What this guards against is one input
  // holding the loop, as 200 KB of spaces did.
  // The hostile inputs share one server (each case waits for all its answers before the next starts): a
  // server per case would add its start and two admin commands to each.
  describe('hostile text', () => {
    const shared: ChildProcess[] = [];
    let server: { url: string; token: string };
    beforeAll(async () => {
      server = await startServer('hostile', shared);
    });
    afterAll(() => killAll(shared));

    const hostile = hostileInputs();
    for (const h of hostile.filter((h) => h.path === undefined && h.what.startsWith('hostile text'))) {
      it(`keeps /healthz p99 under the bound while ${h.what} is grounding-checked through chat and the Responses API`, { timeout: 120_000 }, () =>
        servesWithinBound(server, [h, hostile.find((r) => r.what === `Responses: ${h.what}`)!]));
    }

    it('keeps /healthz p99 under the bound while 10,000 messages and 20,000 content parts are grounding-checked', { timeout: 120_000 }, () =>
      servesWithinBound(server, hostile.filter((h) => !h.what.includes('hostile text'))));
  });

  // The same with the grounding check on: its cost on a 200 KB, 3 MB or 9 MiB source is @svc/grounding's to
  // bound (the lead's rewrite of the check); this case shows whether it is.
  it('keeps /healthz p99 under the bound with the grounding check on', { timeout: 120_000 }, () => servesWithinBound('grounded', heavyInputs(true)));
});
