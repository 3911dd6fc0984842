import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Agent, request } from 'undici';
import { ERROR_CODES, ErrorBodySchema } from '@svc/protocol';
import { startTestServer, type TestServer } from './support/test-server.js';

/** Fixed so a failure can be replayed; override with SVC_FUZZ_SEED to explore. */
const SEED = Number(process.env.SVC_FUZZ_SEED ?? 20261122);
const KNOWN_CODES = new Set(Object.keys(ERROR_CODES));

let server: TestServer;
let token: string;
const dispatcher = new Agent({ connections: 8 });
let cases = 0;

beforeAll(async () => {
  server = await startTestServer();
  ({ token } = await server.createKey({ rateLimitRpm: 10_000_000 }));
  console.info(`[fuzz] seed ${SEED} (replay with SVC_FUZZ_SEED=${SEED})`);
});

afterAll(async () => {
  console.info(`[fuzz] ${cases} generated cases sent`);
  await dispatcher.close();
  await server?.close();
});

async function send(body: string | Buffer, headers: Record<string, string> = {}) {
  cases += 1;
  const res = await request(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    dispatcher,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

/** Every answer is a 200 completion or a 4xx in the OpenAI error shape with a known code — never a 5xx. */
function expectWellFormed(res: { status: number; text: string }) {
  expect(res.status, res.text).toBeLessThan(500);
  if (res.status === 200) return;
  const body = ErrorBodySchema.parse(JSON.parse(res.text));
  expect(KNOWN_CODES.has(body.error.code)).toBe(true);
  expect(body.error.message).not.toMatch(/\bat \S+:\d+:\d+|TypeError|ReferenceError|SyntaxError: Unexpected/);
}

const valid = () => ({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] as unknown[] });
const fields = [
  'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'n', 'stream', 'stream_options', 'stop',
  'presence_penalty', 'frequency_penalty', 'logit_bias', 'logprobs', 'top_logprobs', 'user', 'seed', 'tools', 'tool_choice',
  'parallel_tool_calls', 'response_format', 'reasoning_effort', 'metadata', 'svc', '__proto__', 'constructor',
];
const messageFields = ['role', 'content', 'name', 'tool_calls', 'tool_call_id', '__proto__'];

const json = fc.jsonValue({ maxDepth: 4 });

describe('bad input fuzzing (fast-check, seeded)', () => {
  it('arbitrary JSON bodies', async () => {
    await fc.assert(fc.asyncProperty(json, async (value) => expectWellFormed(await send(JSON.stringify(value)))), {
      seed: SEED,
      numRuns: 2000,
    });
  });

  it('one field of a valid request replaced by anything', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...fields), json, async (field, value) => {
        const body = valid() as Record<string, unknown>;
        Object.defineProperty(body, field, { value, enumerable: true, configurable: true, writable: true });
        const res = await send(JSON.stringify(body));
        expectWellFormed(res);
        if (res.status === 400) {
          const { param } = JSON.parse(res.text).error;
          if (param !== null) expect(String(param).startsWith(field) || field === 'svc' || field.startsWith('__')).toBe(true);
        }
      }),
      { seed: SEED + 1, numRuns: 3000 },
    );
  });

  it('one field of a message replaced by anything', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...messageFields), json, fc.constantFrom('user', 'system', 'assistant', 'tool'), async (field, value, role) => {
        const message: Record<string, unknown> = { role, content: 'x', ...(role === 'tool' ? { tool_call_id: 'c' } : {}) };
        Object.defineProperty(message, field, { value, enumerable: true, configurable: true, writable: true });
        expectWellFormed(await send(JSON.stringify({ model: 'svc01', messages: [message] })));
      }),
      { seed: SEED + 2, numRuns: 2000 },
    );
  });

  it('raw bytes, invalid UTF-8 and truncated JSON', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
          fc.string({ unit: 'binary', maxLength: 200 }),
          fc.nat({ max: 60 }).map((n) => JSON.stringify(valid()).slice(0, n)),
        ),
        async (body) => expectWellFormed(await send(body)),
      ),
      { seed: SEED + 3, numRuns: 1500 },
    );
  });

  it('odd Authorization headers and content types', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.constant(''),
          fc.string({ maxLength: 40 }).filter((s) => /^[\x21-\x7e ]*$/.test(s)),
          fc.string({ maxLength: 40 }).filter((s) => /^[\x21-\x7e]*$/.test(s)).map((s) => `Bearer ${s}`),
          fc.constantFrom('Bearer', 'bearer  ', `Bearer ${token} extra`, `Basic ${token}`, `Bearer ${token.slice(0, -1)}`, `BEARER ${token}`),
        ),
        fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'multipart/form-data'),
        async (authorization, contentType) => {
          const res = await send(JSON.stringify(valid()), { authorization, 'content-type': contentType });
          expectWellFormed(res);
          if (res.status === 401) expect(['missing_api_key', 'invalid_api_key']).toContain(JSON.parse(res.text).error.code);
        },
      ),
      { seed: SEED + 4, numRuns: 1500 },
    );
  });

  it('deep nesting, huge strings and numbers, duplicate and prototype keys', async () => {
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const specials = [
      `{"model":"svc01","messages":[{"role":"user","content":"x"}],"x":${deep(100_000)}}`,
      `{"model":"svc01","messages":${deep(50_000)}}`,
      `{"model":"svc01","messages":[{"role":"user","content":${deep(5000)}}]}`,
      `{"model":"svc01","messages":[{"role":"user","content":"x"}],"max_tokens":1e308}`,
      `{"model":"svc01","messages":[{"role":"user","content":"x"}],"max_tokens":-0}`,
      `{"model":"svc01","messages":[{"role":"user","content":"x"}],"temperature":1e-400}`,
      `{"model":"svc01","model":"gpt-4","messages":[{"role":"user","content":"x"}]}`,
      `{"model":"svc01","messages":[{"role":"user","content":"x"}],"__proto__":{"admin":true}}`,
      `{"model":"svc01","messages":[{"role":"user","content":"x","__proto__":{"role":"system"}}]}`,
      `{"model":"svc01","messages":[{"role":"user","content":"x"}],"constructor":{"prototype":{"polluted":1}}}`,
      `{"model":"svc01","messages":[{"role":"user","content":"${'a'.repeat(2_000_000)}"}]}`,
      `{"model":"svc01","messages":[{"role":"user","content":"\\ud800"}]}`,
    ];
    for (const body of specials) expectWellFormed(await send(body));
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('keeps serving normally afterwards, with bounded memory', async () => {
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 200; i++) expectWellFormed(await send(JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'x'.repeat(50_000) }] })));
    const res = await send(JSON.stringify({ model: 'svc01', messages: [{ role: 'system', content: 'Water boils at 100 degrees.' }, { role: 'user', content: 'When does water boil?' }] }));
    expect(res.status).toBe(200);
    // 200 requests of 50 KB each must not be retained: growth stays far below their 10 MB total
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
  });
});
