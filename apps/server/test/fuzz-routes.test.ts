import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Agent, request } from 'undici';
import { ERROR_CODES, ErrorBodySchema } from '@svc/protocol';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { DashboardClient } from './support/dashboard-client.js';
import { createTestPostgres } from './support/databases.js';

/**
 * fuzz.test.ts's assertions for the routes beside chat completions: the Responses API, /v1/models/{id}, the
 * webhooks API and the dashboard's JSON API (signed in, signed out, with a forged cookie or CSRF header). Every
 * answer is a 2xx or a 4xx in the OpenAI error shape with a known code, without a stack trace, and without the
 * megabytes of an id or a query value echoed back; the server answers normally afterwards. On SQLite, and on Postgres
 * too when it is reachable. Seeded, so that a failure replays; SVC_FUZZ_SEED explores others. The longest event-loop
 * delay after one request (the server runs in this process) and that request are printed, not asserted: a figure in
 * milliseconds depends on the host's load, and the inputs known to stall are reliability-event-loop.test.ts's.
 */
const SEED = Number(process.env.SVC_FUZZ_SEED ?? 20261201);
/**
 * A run's settings. A failure is reported as generated, with its seed and path: shrinking it sends thousands of
 * requests, a few of megabytes (two minutes for one 2 KB string); SVC_FUZZ_SHRINK=1 shrinks it.
 */
const runs = (offset: number, numRuns: number) => ({ seed: SEED + offset, numRuns, endOnFailure: process.env.SVC_FUZZ_SHRINK !== '1' });
const DASHBOARD_CODES = ['not_signed_in', 'invalid_credentials', 'csrf_token_invalid'];
const KNOWN_CODES = new Set([...Object.keys(ERROR_CODES), ...DASHBOARD_CODES]);
/** Longer than any message svc writes for itself: it quotes an id or a value by its first 128 characters. */
const MAX_MESSAGE_CHARS = 1_200;
/** What `quoted` keeps of a value; a longer run of a sent value in a message means it was echoed uncut. */
const ECHO_CHARS = 200;

let server: TestServer;
let receiver: Receiver;
/** The API's key: a limit no fuzz run reaches, and a webhook URL so that it has deliveries. */
let token: string;
/** The dashboard's user and their key (apart from the API's, whose settings the dashboard runs must not change). */
let dashboard: DashboardClient;
let dashKeyId: string;
let otherKeyId: string;
const responseIds: string[] = [];
const itemIds: string[] = [];
const deliveryIds: string[] = [];
const dashDeliveryIds: string[] = [];
const dispatcher = new Agent({ connections: 8 });
const loop = monitorEventLoopDelay({ resolution: 10 });
let worstLoop = { ms: 0, what: '' };
let cases = 0;


interface Sent {
  status: number;
  contentType: string;
  text: string;
}

async function call(
  method: string,
  path: string,
  options: { body?: string | Buffer; headers?: Record<string, string>; token?: string | null } = {},
): Promise<Sent> {
  cases += 1;
  const auth = options.token === null ? {} : { authorization: `Bearer ${options.token ?? token}` };
  const headers = { ...auth, ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers };
  loop.reset();
  const res = await request(`${server.url}${path}`, { method, dispatcher, headers, body: options.body });
  const text = await res.body.text();
  const lag = loop.max / 1e6;
  if (lag > worstLoop.ms) worstLoop = { ms: lag, what: `${method} ${path.slice(0, 80)} ${String(options.body ?? '').slice(0, 80)}` };
  return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text };
}

/**
 * A 2xx, or a 4xx in the OpenAI error shape with a known code, a message without a stack trace and not echoing
 * more than ECHO_CHARS of any of `echoable` (the ids and query values the request carried).
 */
function expectWellFormed(res: Sent, echoable: readonly string[] = []): void {
  expect(res.status, res.text.slice(0, 2000)).toBeLessThan(500);
  if (res.status < 300) return;
  expect(res.contentType, res.text.slice(0, 500)).toMatch(/^application\/json/);
  const { error } = ErrorBodySchema.parse(JSON.parse(res.text));
  expect(KNOWN_CODES.has(error.code), error.code).toBe(true);
  expect(error.message).not.toMatch(/\bat \S+:\d+:\d+|TypeError|ReferenceError|SyntaxError: Unexpected|node_modules|\/src\//);
  expect(error.message.length, error.message.slice(0, 300)).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
  for (const value of echoable) {
    if (value.length > ECHO_CHARS) expect(error.message.includes(value.slice(0, ECHO_CHARS + 1)), `echoed: ${value.slice(0, 60)}…`).toBe(false);
  }
}

/** A string as a path segment or query value: percent-encoded, or (for a lone surrogate) its UTF-8 bytes' escape. */
function encoded(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return Buffer.from(value, 'utf8').toString('hex').replace(/../g, '%$&');
  }
}

const json = fc.jsonValue({ maxDepth: 4 });
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const hostileText = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom('', ' ', '0', '-1', '1e2', '0x10', ' 5', '101', '1.5', 'NaN', 'Infinity', 'null', '[]', '{}', '..', '.', 'resp_', 'msg_x', '\u0000', '\ud800', 'a\u202eb'),
  fc.integer({ min: 201, max: 6_000 }).map((n) => 'x'.repeat(n)),
);
/** What goes into a URL as it is, not encoded: malformed and overlong percent-encoding, encoded slashes and dots. */
const rawSegment = fc.constantFrom('%', '%zz', '%c0%80', '%ff', '%ed%a0%80', '%2f..%2f', '%2e%2e', 'a%20b', '%E2%80%AE', '%25', '%u0041', '%C3');
const idSegment = (real: () => readonly string[]) =>
  fc.oneof(
    { weight: 3, arbitrary: hostileText.map((t) => ({ raw: encoded(t), value: t })) },
    { weight: 1, arbitrary: rawSegment.map((t) => ({ raw: t, value: t })) },
    { weight: 1, arbitrary: fc.nat({ max: 99 }).map((i) => { const ids = real(); const id = ids[i % ids.length] ?? 'none'; return { raw: id, value: id }; }) },
  );

/** A query string of the given names (and a few others), each any number of times, bracketed or not. */
function queryString(names: readonly string[]) {
  const name = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...names) },
    { weight: 1, arbitrary: fc.constantFrom(...names).map((n) => `${n}[]`) },
    { weight: 1, arbitrary: fc.constantFrom(...names).map((n) => `${n}[a]`) },
    { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'hasOwnProperty', '', 'x') },
  );
  const value = fc.oneof(
    { weight: 4, arbitrary: hostileText.map((t) => ({ raw: encoded(t), value: t })) },
    { weight: 1, arbitrary: rawSegment.map((t) => ({ raw: t, value: t })) },
  );
  return fc.array(fc.tuple(name, value, fc.boolean()), { maxLength: 4 }).map((pairs) => ({
    query: pairs.length ? `?${pairs.map(([n, v, bare]) => (bare && v.value === '' ? n : `${n}=${v.raw}`)).join('&')}` : '',
    values: pairs.map(([, v]) => v.value),
  }));
}

const itemTypes = ['message', 'function_call', 'function_call_output', 'custom_tool_call', 'custom_tool_call_output', 'reasoning', 'item_reference', 'web_search_call', 'computer_call', 'file_search_call', 'input_text', '', 'MESSAGE'];
const partTypes = ['input_text', 'output_text', 'input_image', 'input_file', 'refusal', 'input_audio', 'text', 'image_url'];
const part = fc.record(
  {
    type: fc.oneof(fc.constantFrom(...partTypes), json),
    text: fc.oneof(fc.string(), json),
    image_url: fc.oneof(fc.constantFrom('data:image/png;base64,AAAA', 'https://example.test/a.png', 'data:', 'file:///etc/passwd'), json),
    file_data: fc.oneof(fc.constantFrom('data:application/pdf;base64,JVBERi0=', 'data:text/plain;base64,aGk=', 'AAAA'), json),
    file_id: json,
    filename: json,
    detail: json,
    refusal: json,
  },
  { requiredKeys: ['type'] },
);
const item = fc.record(
  {
    type: fc.oneof(fc.constantFrom(...itemTypes), json),
    id: fc.oneof(fc.constantFrom(...['msg_x', 'fc_1', 'rs_1']), fc.nat({ max: 9 }).map((i) => itemIds[i % Math.max(itemIds.length, 1)] ?? 'msg_none'), json),
    role: fc.oneof(fc.constantFrom('user', 'assistant', 'system', 'developer', 'tool', 'critic'), json),
    content: fc.oneof(fc.string(), fc.array(part, { maxLength: 3 }), json),
    call_id: fc.oneof(fc.constantFrom('call_1', 'call_2', ''), json),
    name: fc.oneof(fc.constantFrom('lookup', 'a b', 'x'.repeat(65)), json),
    arguments: fc.oneof(fc.constantFrom('{}', '{"q":1}', '{', 'null'), json),
    output: fc.oneof(fc.string(), fc.array(part, { maxLength: 2 }), json),
    input: json,
    status: json,
    summary: json,
    encrypted_content: json,
  },
  { requiredKeys: [] },
);
const tool = fc.record(
  {
    type: fc.oneof(fc.constantFrom('function', 'custom', 'web_search', 'file_search', 'mcp', ''), json),
    name: fc.oneof(fc.constantFrom('lookup', 'a-b_c', '', 'é', 'x'.repeat(65)), json),
    description: json,
    parameters: fc.oneof(
      fc.constantFrom({ type: 'object', properties: {} }, { type: 'object', properties: { q: { type: 'string', pattern: '(a+)+$' } } }, { $ref: '#' }, { type: 'string', maxLength: 1e9 }),
      json,
    ),
    strict: json,
    format: fc.oneof(
      fc.constantFrom({ type: 'text' }, { type: 'grammar', syntax: 'regex', definition: '(a+)+$' }, { type: 'grammar', syntax: 'lark', definition: 'start: "a"' }, { type: 'grammar', syntax: 'regex', definition: '(' }),
      json,
    ),
  },
  { requiredKeys: ['type'] },
);
const textFormat = fc.oneof(
  json,
  fc.record({
    format: fc.oneof(
      json,
      fc.record(
        {
          type: fc.oneof(fc.constantFrom('text', 'json_object', 'json_schema', 'grammar'), json),
          name: fc.oneof(fc.constantFrom('answer', ''), json),
          schema: fc.oneof(
            fc.constantFrom(
              { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false },
              { type: 'object', properties: { a: { type: 'string', pattern: '^(a|a)*$' } } },
              { type: 'array', items: { $ref: '#' } },
              { type: 'string', minLength: 1_000_000_000 },
              { anyOf: [] },
              { type: 'integer', minimum: 5, maximum: 1 },
            ),
            json,
          ),
          strict: json,
        },
        { requiredKeys: ['type'] },
      ),
    ),
    verbosity: json,
  }),
);
/** Values for each top-level field of a Responses request: anything, and shapes near a valid one. */
const responseFields: Record<string, fc.Arbitrary<unknown>> = {
  model: fc.oneof(json, fc.constantFrom('svc01', 'SVC01', 'gpt-4o', '')),
  input: fc.oneof(json, fc.string(), fc.array(item, { maxLength: 4 }), fc.array(fc.oneof(item, json), { maxLength: 3 })),
  instructions: fc.oneof(json, fc.string()),
  tools: fc.oneof(json, fc.array(tool, { maxLength: 3 })),
  tool_choice: fc.oneof(json, fc.constantFrom('auto', 'none', 'required', { type: 'function', name: 'lookup' }, { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'nope' }] })),
  text: textFormat,
  reasoning: fc.oneof(json, fc.record({ effort: fc.oneof(json, fc.constantFrom('low', 'high', 'xhigh', 'none')), summary: json })),
  background: fc.oneof(json, fc.boolean()),
  store: fc.oneof(json, fc.boolean()),
  stream: fc.oneof(json, fc.constant(false)),
  previous_response_id: fc.oneof(json, hostileText, fc.nat({ max: 9 }).map((i) => responseIds[i % responseIds.length])),
  include: fc.oneof(json, fc.array(fc.oneof(fc.constantFrom('reasoning.encrypted_content', 'message.output_text.logprobs', 'x'), json), { maxLength: 40 })),
  metadata: fc.oneof(json, fc.dictionary(fc.string({ maxLength: 70 }), fc.oneof(fc.string({ maxLength: 600 }), json), { maxKeys: 20 })),
  svc: fc.oneof(json, fc.record({ dehallucinate: json, thinking: json, grounding_threshold: json }, { requiredKeys: [] })),
  max_output_tokens: json,
  temperature: json,
  top_p: json,
  parallel_tool_calls: json,
  truncation: json,
  max_tool_calls: json,
  user: json,
  conversation: json,
  prompt: json,
  __proto__: json,
};

/** A small valid request with fields replaced (defined, so `__proto__` is a field and not the prototype). */
function responseRequest(fields: ReadonlyArray<[string, unknown]>): string {
  const body: Record<string, unknown> = { model: 'svc01', input: 'hi', svc: { dehallucinate: false } };
  for (const [name, value] of fields) Object.defineProperty(body, name, { value, enumerable: true, configurable: true, writable: true });
  return JSON.stringify(body);
}

const postgres = await createTestPostgres('fuzz-routes');
/** Each store: the Postgres run found what the SQLite one could not (a deadlock of a bulk redelivery with the worker). */
const databases: Array<[name: string, env: Record<string, string>]> = [['SQLite', {}]];
if (postgres) databases.push(['Postgres', { SVC_DATABASE_URL: postgres.url, SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') }]);

afterAll(async () => {
  await dispatcher.close();
  await postgres?.drop();
});

describe.each(databases)('on %s', (name, env) => {
  beforeAll(async () => {
    for (const ids of [responseIds, itemIds, deliveryIds, dashDeliveryIds]) ids.length = 0;
    cases = 0;
    worstLoop = { ms: 0, what: '' };
    receiver = await startReceiver();
    server = await startTestServer({ env: { SVC_WEBHOOK_TIMEOUT_MS: '2000', SVC_MAX_KEYS_PER_USER: '20', ...env } });
    ({ token } = await server.createKey({ rateLimitRpm: 10_000_000, webhookUrl: receiver.url }));
    const dash = await server.createKey({ rateLimitRpm: 10_000_000, webhookUrl: receiver.url });
    dashKeyId = dash.key.id;
    otherKeyId = (await server.createKey({ name: 'someone else' })).key.id;
    dashboard = new DashboardClient(server.url);
    expect((await dashboard.login(dash.user.email)).status).toBe(200);

    // Something to find: stored responses (one in the background, one chained), their items, and deliveries.
    for (const body of [
      { model: 'svc01', input: 'Water boils at 100 degrees. When does water boil?' },
      { model: 'svc01', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hello' }] }], background: true },
    ]) {
      const res = await call('POST', '/v1/responses', { body: JSON.stringify(body) });
      expect(res.status, res.text).toBe(200);
      responseIds.push(JSON.parse(res.text).id);
    }
    const chained = await call('POST', '/v1/responses', { body: JSON.stringify({ model: 'svc01', input: 'and then?', previous_response_id: responseIds[0] }) });
    expect(chained.status, chained.text).toBe(200);
    responseIds.push(JSON.parse(chained.text).id);
    const items = await call('GET', `/v1/responses/${responseIds[2]}/input_items?order=asc`);
    for (const item of JSON.parse(items.text).data) if (item.id) itemIds.push(item.id);
    for (const auth of [token, dash.token]) {
      const res = await call('POST', '/v1/chat/completions', { body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }), token: auth });
      expect(res.status, res.text).toBe(200);
    }
    await receiver.waitFor((received) => received.length >= 2);
    deliveryIds.push(...JSON.parse((await call('GET', '/v1/webhooks/deliveries')).text).data.map((d: { id: string }) => d.id));
    dashDeliveryIds.push(...(await dashboard.request('GET', `/keys/${dashKeyId}/deliveries`)).body.data.map((d: { id: string }) => d.id));
    expect(deliveryIds.length * dashDeliveryIds.length).toBeGreaterThan(0);
    loop.enable();
    console.info(`[fuzz-routes] ${name}: seed ${SEED} (replay with SVC_FUZZ_SEED=${SEED})`);
  });

  afterAll(async () => {
    loop.disable();
    console.info(`[fuzz-routes] ${name}: ${cases} generated cases sent; longest event-loop delay after one ${worstLoop.ms.toFixed(0)} ms (${worstLoop.what})`);
    await server?.close();
    await receiver?.close();
  });

  describe('the Responses API under hostile input (fast-check, seeded)', () => {
    it('arbitrary JSON bodies', async () => {
      await fc.assert(fc.asyncProperty(json, async (value) => expectWellFormed(await call('POST', '/v1/responses', { body: JSON.stringify(value) }))), runs(0, 300));
    });

    it('fields of a valid request replaced by anything, items and tools of every type', async () => {
      const field = fc.constantFrom(...Object.keys(responseFields)).chain((name) => fc.tuple(fc.constant(name), responseFields[name] as fc.Arbitrary<unknown>));
      await fc.assert(
        fc.asyncProperty(fc.array(field, { minLength: 1, maxLength: 3 }), async (fields) => {
          const res = await call('POST', '/v1/responses', { body: responseRequest(fields) });
          expectWellFormed(res, fields.flatMap(([, v]) => (typeof v === 'string' ? [v] : [])));
        }),
        runs(1, 900),
      );
    });

    it('hostile ids on GET, DELETE, cancel and input_items, and hostile list queries', async () => {
      const route = fc.constantFrom('get', 'delete', 'cancel', 'items', 'get?', 'model');
      await fc.assert(
        fc.asyncProperty(route, idSegment(() => [...responseIds, ...itemIds]), queryString(['after', 'before', 'limit', 'order', 'include', 'stream', 'starting_after']), async (kind, id, query) => {
          const deleting = kind === 'delete' && responseIds.includes(id.value);
          if (deleting) return; // the stored responses stay for the other runs
          const [method, path] = {
            get: ['GET', `/v1/responses/${id.raw}`],
            'get?': ['GET', `/v1/responses/${responseIds[0]}${query.query}`],
            delete: ['DELETE', `/v1/responses/${id.raw}`],
            cancel: ['POST', `/v1/responses/${id.raw}/cancel`],
            items: ['GET', `/v1/responses/${id.raw}/input_items${query.query}`],
            model: ['GET', `/v1/models/${id.raw}`],
          }[kind] as [string, string];
          expectWellFormed(await call(method, path), [id.value, ...query.values]);
        }),
        runs(2, 700),
      );
    });
    it('deep nesting, huge strings, many items, duplicate and prototype keys', async () => {
      const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
      const specials = [
        `{"model":"svc01","input":"hi","metadata":{"a":${deep(100_000)}}}`,
        `{"model":"svc01","input":${deep(50_000)}}`,
        `{"model":"svc01","input":[{"role":"user","content":${deep(5_000)}}]}`,
        `{"model":"svc01","input":"hi","text":{"format":{"type":"json_schema","name":"a","schema":${'{"items":'.repeat(5_000)}{}${'}'.repeat(5_000)}}}}`,
        `{"model":"svc01","input":"hi","tools":[{"type":"function","name":"f","parameters":${'{"properties":{"a":'.repeat(2_000)}{}${'}}'.repeat(2_000)}}]}`,
        JSON.stringify({ model: 'svc01', input: Array.from({ length: 30_000 }, () => ({ role: 'user', content: 'x' })) }),
        JSON.stringify({ model: 'svc01', input: Array.from({ length: 5_000 }, (_, i) => ({ type: 'item_reference', id: `msg_${i}` })) }),
        JSON.stringify({ model: 'svc01', input: 'hi', include: Array.from({ length: 1_000 }, () => 'reasoning.encrypted_content') }),
        JSON.stringify({ model: 'svc01', input: 'hi', metadata: Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, 'v'])) }),
        JSON.stringify({ model: 'svc01', input: 'hi', tools: Array.from({ length: 1_000 }, (_, i) => ({ type: 'function', name: `f${i}` })) }),
        JSON.stringify({ model: 'svc01', input: 'hi', instructions: 'a'.repeat(2_000_000) }),
        JSON.stringify({ model: 'svc01', input: [{ role: 'user', content: [{ type: 'input_image', image_url: `data:image/png;base64,${'A'.repeat(3_000_000)}` }] }] }),
        JSON.stringify({ model: 'svc01', input: 'hi', previous_response_id: 'r'.repeat(1_000_000) }),
        `{"model":"svc01","input":"hi","model":"gpt-4"}`,
        `{"model":"svc01","input":"hi","__proto__":{"background":true}}`,
        `{"model":"svc01","input":[{"role":"user","content":"x","__proto__":{"role":"system"}}]}`,
        `{"model":"svc01","input":"\ud800","instructions":"\udfff"}`,
      ];
      for (const body of specials) {
        const res = await call('POST', '/v1/responses', { body });
        expectWellFormed(res, ['r'.repeat(1_000), 'a'.repeat(1_000), 'A'.repeat(1_000)]);
      }
      expect(({} as Record<string, unknown>).background).toBeUndefined();
    });

    it('background responses read, cancelled, deleted and followed up at once, in any order', async () => {
      const op = fc.constantFrom('get', 'cancel', 'delete', 'items', 'follow', 'follow-stream', 'items-ref');
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 5 }), fc.boolean(), fc.boolean(), async (ops, stream, store) => {
          const created = await call('POST', '/v1/responses', { body: JSON.stringify({ model: 'svc01', input: 'Water boils at 100 degrees. When?', background: true, stream, store }) });
          expectWellFormed(created);
          if (created.status !== 200 || stream) return;
          const id = JSON.parse(created.text).id as string;
          const results = await Promise.all(
            ops.map((o) => {
              if (o === 'get') return call('GET', `/v1/responses/${id}`);
              if (o === 'cancel') return call('POST', `/v1/responses/${id}/cancel`);
              if (o === 'delete') return call('DELETE', `/v1/responses/${id}`);
              if (o === 'items') return call('GET', `/v1/responses/${id}/input_items?limit=1&order=asc`);
              if (o === 'items-ref') return call('POST', '/v1/responses', { body: JSON.stringify({ model: 'svc01', input: [{ type: 'item_reference', id: `msg_${id.slice(5)}` }] }) });
              return call('POST', '/v1/responses', { body: JSON.stringify({ model: 'svc01', input: 'and?', previous_response_id: id, stream: o === 'follow-stream' }) });
            }),
          );
          for (const res of results) expectWellFormed(res);
        }),
        runs(7, 60),
      );
    });
  });

  describe('the webhooks API under hostile input (fast-check, seeded)', () => {
    it('delivery lists, lookups, redeliveries, cancels and the test endpoint', async () => {
      const kind = fc.constantFrom('list', 'get', 'redeliver', 'cancel', 'bulk', 'test');
      await fc.assert(
        fc.asyncProperty(
          kind,
          idSegment(() => deliveryIds),
          queryString(['limit', 'status', 'before', 'request_id', 'since', 'until', 'last_status_code']),
          fc.oneof(json, fc.record({ status: json, request_id: json, since: json, until: json, last_status_code: json, dry_run: json, sample: json }, { requiredKeys: [] })),
          async (k, id, query, body) => {
            const [method, path, sent] = {
              list: ['GET', `/v1/webhooks/deliveries${query.query}`, undefined],
              get: ['GET', `/v1/webhooks/deliveries/${id.raw}`, undefined],
              redeliver: ['POST', `/v1/webhooks/deliveries/${id.raw}/redeliver`, undefined],
              cancel: ['POST', `/v1/webhooks/deliveries/${id.raw}/cancel`, undefined],
              // A dry run unless the body says otherwise: its filter is read all the same.
              bulk: ['POST', '/v1/webhooks/deliveries/redeliver', JSON.stringify(isObject(body) ? { dry_run: true, ...body } : body)],
              test: ['POST', '/v1/webhooks/test', JSON.stringify(body)],
            }[k] as [string, string, string | undefined];
            expectWellFormed(await call(method, path, { body: sent }), [id.value, ...query.values]);
          },
        ),
        runs(3, 400),
      );
    });
  });

  describe("the dashboard's JSON API under hostile input (fast-check, seeded)", () => {
    /** A request of the signed-in client, as `call` sends it (its cookie and CSRF token unless told otherwise). */
    async function dash(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Sent> {
      const auth: Record<string, string> = {};
      if (dashboard.cookie) auth.cookie = dashboard.cookie;
      if (method !== 'GET') auth['x-csrf-token'] = dashboard.csrf;
      return call(method, `/dashboard/api${path}`, { token: null, body: body === undefined ? undefined : JSON.stringify(body), headers: { ...auth, ...headers } });
    }

    const webhookUrl = fc.oneof(
      json,
      hostileText,
      fc.constantFrom('http://127.0.0.1:1/hook', 'http://[::1]:1/', 'https://10.0.0.1/', 'http://169.254.169.254/latest', 'ftp://127.0.0.1/', 'http://user:pw@127.0.0.1/', 'http://0x7f.1:1/', 'javascript:alert(1)', ' http://127.0.0.1:1/ ', 'http://127.0.0.1:99999/'),
      fc.integer({ min: 2_000, max: 20_000 }).map((n) => `http://127.0.0.1:1/${'a'.repeat(n)}`),
    );
    const keyIdSegment = idSegment(() => [dashKeyId, otherKeyId]);

    it('key create and update: names, rate limits, webhook URLs and secret settings of any type', async () => {
      const patch = fc.record(
        {
          name: fc.oneof(json, hostileText),
          webhook_url: webhookUrl,
          rate_limit_rpm: fc.oneof(json, fc.constantFrom(0, 1, 1.5, -1, 1e308, '60', 2 ** 53, 10_000_000)),
          signing_secret_overlap_seconds: fc.oneof(json, fc.constantFrom(0, -1, 86_400 * 31, 3.5, '60')),
          signing_secret: json,
          __proto__: json,
        },
        { requiredKeys: [] },
      );
      const kind = fc.constantFrom('create', 'patch', 'patch', 'patch', 'secret', 'secret-clear', 'get', 'body');
      await fc.assert(
        fc.asyncProperty(kind, keyIdSegment, patch, fc.oneof(json, fc.record({ name: fc.oneof(json, hostileText) })), async (k, id, fields, createBody) => {
          const sent = Object.values(fields).filter((v): v is string => typeof v === 'string');
          let res: Sent;
          if (k === 'create') res = await dash('POST', '/keys', createBody);
          else if (k === 'patch') res = await dash('PATCH', `/keys/${id.raw}`, fields);
          else if (k === 'secret') res = await dash('POST', `/keys/${id.raw}/signing-secret`);
          else if (k === 'secret-clear') res = await dash('DELETE', `/keys/${id.raw}/signing-secret`);
          else if (k === 'get') res = await dash('GET', `/keys/${id.raw}`);
          else res = await dash('PATCH', `/keys/${id.raw}`, createBody);
          expectWellFormed(res, [id.value, ...sent]);
          // Another user's key reads as an unknown one.
          if (k !== 'create' && id.value === otherKeyId) expect(res.status).toBe(404);
        }),
        {
          ...runs(4, 500),
          // Found with SVC_FUZZ_SEED=1: a webhook URL that does not parse came back whole in the 400 (url-guard.ts).
          examples: [['patch', { raw: dashKeyId, value: dashKeyId }, { webhook_url: 'x'.repeat(2048) }, {}]],
        },
      );
      // The API key's settings were not the dashboard's to change: it still answers.
      expect((await call('POST', '/v1/chat/completions', { body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }) })).status).toBe(200);
    });

    it('delivery lists with hostile filters, cursors and limits; lookups, redeliveries, the test webhook and usage', async () => {
      const kind = fc.constantFrom('list', 'get', 'progress', 'redeliver', 'cancel', 'bulk', 'test', 'usage');
      await fc.assert(
        fc.asyncProperty(
          kind,
          fc.oneof({ weight: 4, arbitrary: fc.constant({ raw: '', value: '' }) }, { weight: 1, arbitrary: keyIdSegment }),
          idSegment(() => dashDeliveryIds),
          queryString(['limit', 'status', 'before', 'request_id', 'since', 'until', 'last_status_code', 'days', 'key_id']),
          fc.oneof(json, fc.record({ status: json, request_id: json, since: json, until: json, last_status_code: json, dry_run: json }, { requiredKeys: [] })),
          async (k, key, delivery, query, body) => {
            const keyPath = `/keys/${key.raw || dashKeyId}`;
            const [method, path, sent] = {
              list: ['GET', `${keyPath}/deliveries${query.query}`, undefined],
              get: ['GET', `${keyPath}/deliveries/${delivery.raw}`, undefined],
              progress: ['GET', `${keyPath}/deliveries/${delivery.raw}/progress`, undefined],
              redeliver: ['POST', `${keyPath}/deliveries/${delivery.raw}/redeliver`, undefined],
              cancel: ['POST', `${keyPath}/deliveries/${delivery.raw}/cancel`, undefined],
              bulk: ['POST', `${keyPath}/deliveries/redeliver`, isObject(body) ? { dry_run: true, ...body } : body],
              test: ['POST', `${keyPath}/test`, body],
              usage: ['GET', `/usage${query.query}`, undefined],
            }[k] as [string, string, unknown];
            expectWellFormed(await dash(method, path, sent), [key.value, delivery.value, ...query.values]);
          },
        ),
        runs(5, 500),
      );
    });

    it('sign-in with bodies of any shape, and requests of any method and content type', async () => {
      const signIn = fc.oneof(json, fc.record({ email: fc.oneof(json, hostileText), password: fc.oneof(json, hostileText) }, { requiredKeys: [] }));
      await fc.assert(
        fc.asyncProperty(signIn, async (body) => {
          const res = await call('POST', '/dashboard/api/login', { token: null, body: JSON.stringify(body) });
          expectWellFormed(res);
          expect(res.status).not.toBe(200);
        }),
        runs(8, 60),
      );
      const path = fc.constantFrom(
        '/v1/responses',
        '/v1/responses/ID',
        '/v1/responses/ID/cancel',
        '/v1/responses/ID/input_items',
        '/v1/models/svc01',
        '/v1/webhooks/test',
        '/v1/webhooks/deliveries',
        '/v1/webhooks/deliveries/redeliver',
        '/dashboard/api/keys',
        '/dashboard/api/keys/KEY',
        '/dashboard/api/keys/KEY/deliveries/redeliver',
        '/dashboard/api/usage',
      );
      const contentType = fc.constantFrom(undefined, 'application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', 'application/json; charset=latin1', 'application/merge-patch+json', '*/*', ';');
      const body = fc.oneof(fc.constant(undefined), json.map((v) => JSON.stringify(v)), fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)));
      await fc.assert(
        fc.asyncProperty(fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'), path, contentType, body, async (method, template, type, sent) => {
          const url = template.replace('ID', responseIds[0] ?? 'none').replace('KEY', dashKeyId);
          const headers: Record<string, string> = url.startsWith('/dashboard') ? { cookie: dashboard.cookie, 'x-csrf-token': dashboard.csrf } : {};
          if (type !== undefined) headers['content-type'] = type;
          // The stored responses stay for the other runs.
          if (method === 'DELETE' && url.startsWith('/v1/responses/')) return;
          const res = await call(method, url, { token: url.startsWith('/dashboard') ? null : undefined, body: method === 'GET' ? undefined : sent, headers });
          expectWellFormed(res);
        }),
        runs(9, 300),
      );
    });

    it('the same requests without a session, with a forged cookie or a wrong CSRF header', async () => {
      const route = fc.constantFrom<[string, string, unknown]>(
        ['GET', '/me', undefined],
        ['GET', '/keys', undefined],
        ['POST', '/keys', { name: 'x' }],
        ['PATCH', `/keys/KEY`, { rate_limit_rpm: 1 }],
        ['POST', '/keys/KEY/test', undefined],
        ['GET', '/keys/KEY/deliveries?limit=5', undefined],
        ['POST', '/keys/KEY/deliveries/redeliver', { dry_run: true }],
        ['POST', '/logout', undefined],
        ['GET', '/usage', undefined],
      );
      const cookieValue = fc.oneof(
        hostileText.map((t) => encoded(t)),
        rawSegment,
        fc.constant('%'),
        fc.string({ maxLength: 40 }).filter((s) => /^[\x21-\x7e]*$/.test(s) && !s.includes(';')),
      );
      const cookie = fc.oneof(
        fc.constant(undefined),
        cookieValue.map((v) => `svc_session=${v}`),
        cookieValue.map((v) => `svc_session=${v}; svc_session=${v}`),
        cookieValue.map((v) => `other=1; svc_session=${v}`),
        fc.constant('svc_session'),
        fc.constant(';;;='),
      );
      const csrf = fc.oneof(fc.constant(undefined), fc.constant(''), fc.string({ maxLength: 64 }).filter((s) => /^[\x21-\x7e ]*$/.test(s)), fc.constant('x'.repeat(5000)));
      await fc.assert(
        fc.asyncProperty(route, cookie, csrf, fc.boolean(), async ([method, path, body], forged, csrfHeader, realCookie) => {
          const headers: Record<string, string> = {};
          // The real session with a wrong CSRF token, or a forged session with any token.
          const sessionCookie = realCookie ? dashboard.cookie : forged;
          if (sessionCookie !== undefined) headers.cookie = sessionCookie;
          if (csrfHeader !== undefined) headers['x-csrf-token'] = csrfHeader;
          const res = await call(method, `/dashboard/api${path.replace('KEY', dashKeyId)}`, { token: null, body: body === undefined ? undefined : JSON.stringify(body), headers });
          expectWellFormed(res, [csrfHeader ?? '', forged ?? '']);
          if (realCookie && method !== 'GET') expect(res.status).toBe(403);
          if (!realCookie) expect(res.status).toBe(401);
        }),
        runs(6, 300),
      );
    });
  });

  describe('afterwards', () => {
    it('every route still answers normally', async () => {
      const chat = await call('POST', '/v1/chat/completions', { body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }) });
      expect(chat.status, chat.text).toBe(200);
      const created = await call('POST', '/v1/responses', { body: JSON.stringify({ model: 'svc01', input: 'hi', previous_response_id: responseIds[2] }) });
      expect(created.status, created.text).toBe(200);
      const read = await call('GET', `/v1/responses/${JSON.parse(created.text).id}/input_items`);
      expect(read.status, read.text).toBe(200);
      expect((await call('GET', '/v1/webhooks/deliveries?limit=1')).status).toBe(200);
      expect((await dashboard.request('GET', '/me')).status).toBe(200);
      expect((await dashboard.request('GET', `/keys/${dashKeyId}/deliveries?limit=1`)).status).toBe(200);
    });
  });
});
