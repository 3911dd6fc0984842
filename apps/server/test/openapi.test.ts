import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { ERROR_CODES } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type Receiver } from './support/webhooks.js';

// ajv-formats is CommonJS: under ESM its plugin is the `default` of the default import.
const addFormats = ajvFormats.default;

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889.';
const COMMITTED = fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url));

type Json = Record<string, any>;

let upstream: FakeUpstream;
let receiver: Receiver;
let server: TestServer;
let doc: Json;
let ajv: Ajv2020;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'The Eiffel Tower is in Paris.' });
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
  const res = await fetch(`${server.url}/v1/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Json;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ ...doc, $id: 'openapi.json' });
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

const pointer = (...parts: string[]) => parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

/** Validates `body` against the schema the document gives for this route, status and media type. */
function expectMatches(method: string, path: string, status: number, body: unknown, mediaType = 'application/json'): void {
  const response = doc.paths[path]?.[method]?.responses?.[String(status)];
  expect(response, `${method.toUpperCase()} ${path} documents ${status}`).toBeDefined();
  expect(response.content?.[mediaType], `${status} has ${mediaType}`).toBeDefined();
  const ref = `openapi.json#/${pointer('paths', path, method, 'responses', String(status), 'content', mediaType, 'schema')}`;
  const validate = ajv.getSchema(ref) ?? ajv.compile({ $ref: ref });
  const ok = validate(body);
  expect(ok ? [] : validate.errors, `${method.toUpperCase()} ${path} ${status} body matches its schema`).toEqual([]);
}

async function call(method: string, path: string, token: string | undefined, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as unknown };
}

const chat = (extra: Json = {}) => ({ model: 'svc01', messages: [{ role: 'system', content: DOC }, { role: 'user', content: 'Where is the Eiffel Tower?' }], ...extra });

describe('GET /v1/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document, served without a key, equal to the committed docs/openapi.json', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(JSON.parse(readFileSync(COMMITTED, 'utf8'))).toEqual(doc);
  });

  it('covers every public route, the bearer scheme, every error code and the audit webhook', () => {
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/chat/completions',
        '/v1/models',
        '/v1/models/{model}',
        '/v1/webhooks/test',
        '/v1/webhooks/deliveries',
        '/v1/webhooks/deliveries/{id}',
        '/v1/webhooks/deliveries/{id}/redeliver',
        '/v1/responses',
        '/v1/responses/{response_id}',
        '/v1/responses/{response_id}/input_items',
      ]),
    );
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ ApiKey: [] }]);
    const chatOk = doc.paths['/v1/chat/completions'].post.responses['200'].content;
    expect(chatOk['text/event-stream'].schema.anyOf).toContainEqual({ $ref: '#/components/schemas/ChatCompletionChunk' });
    expect(doc.components.schemas.ChatCompletionRequest.properties.svc).toEqual({ $ref: '#/components/schemas/SvcRequestConfig' });
    expect(doc.components.schemas.ChatCompletion.properties.svc).toEqual({ $ref: '#/components/schemas/SvcResult' });

    const documented = new Set<string>();
    for (const item of Object.values(doc.paths) as Json[]) {
      for (const operation of Object.values(item) as Json[]) {
        for (const [status, response] of Object.entries(operation.responses as Json)) {
          for (const example of Object.values((response.content?.['application/json']?.examples ?? {}) as Json)) {
            expect(String(ERROR_CODES[example.value.error.code as keyof typeof ERROR_CODES].status)).toBe(status);
            documented.add(example.value.error.code);
          }
        }
      }
    }
    expect([...documented].sort()).toEqual(Object.keys(ERROR_CODES).sort());

    const hook = doc.webhooks['llm.request.completed'].post;
    expect(hook.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/AuditPayload' });
    const headers = Object.fromEntries((hook.parameters as Json[]).map((p) => [p.name, p]));
    expect(headers['X-Svc-Signature']).toMatchObject({ in: 'header', required: false, schema: { pattern: '^sha256=[0-9a-f]{64}$' } });
    expect(headers['X-Svc-Delivery']).toMatchObject({ in: 'header', required: true });
    expect(headers['X-Svc-Event']).toMatchObject({ in: 'header', required: true });
  });
});

describe('real responses validate against the document', () => {
  it('chat completions: JSON, stream frames, 400, 401, 429, 502', async () => {
    const { token } = await server.createKey();
    const ok = await call('POST', '/v1/chat/completions', token, chat());
    expect(ok.status).toBe(200);
    expectMatches('post', '/v1/chat/completions', 200, ok.json());
    const { svc: _svc, ...withoutSvc } = ok.json() as Json;
    expect(() => expectMatches('post', '/v1/chat/completions', 200, withoutSvc)).toThrow();

    const streamed = await call('POST', '/v1/chat/completions', token, chat({ stream: true, stream_options: { include_usage: true } }));
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = streamed.text.split('\n\n').filter(Boolean).map((f) => f.replace(/^data: /, ''));
    expect(frames.at(-1)).toBe('[DONE]');
    for (const frame of frames.slice(0, -1)) expectMatches('post', '/v1/chat/completions', 200, JSON.parse(frame), 'text/event-stream');

    const badModel = await call('POST', '/v1/chat/completions', token, chat({ model: 'gpt-4' }));
    expect(badModel.status).toBe(404);
    expectMatches('post', '/v1/chat/completions', 404, badModel.json());

    const noKey = await call('POST', '/v1/chat/completions', undefined, chat());
    expect(noKey.status).toBe(401);
    expectMatches('post', '/v1/chat/completions', 401, noKey.json());

    upstream.nextBehavior({ status: 500 });
    const failed = await call('POST', '/v1/chat/completions', token, chat());
    expect(failed.status).toBe(502);
    expectMatches('post', '/v1/chat/completions', 502, failed.json());

    const limited = await server.createKey({ rateLimitRpm: 1 });
    await call('GET', '/v1/models', limited.token);
    const tooMany = await call('POST', '/v1/chat/completions', limited.token, chat());
    expect(tooMany.status).toBe(429);
    expectMatches('post', '/v1/chat/completions', 429, tooMany.json());
  });

  it('responses: create (JSON and events), retrieve, input items, delete, 404', async () => {
    const { token } = await server.createKey();
    const body = { model: 'svc01', instructions: DOC, input: 'Where is the Eiffel Tower?' };
    const ok = await call('POST', '/v1/responses', token, body);
    expect(ok.status).toBe(200);
    expectMatches('post', '/v1/responses', 200, ok.json());
    const id = (ok.json() as { id: string }).id;

    const streamed = await call('POST', '/v1/responses', token, { ...body, stream: true });
    expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = streamed.text.split('\n\n').filter(Boolean).map((block) => JSON.parse(block.split('\n')[1]!.replace(/^data: /, '')) as Json);
    expect(events.at(-1)!.type).toBe('response.completed');
    for (const event of events) expectMatches('post', '/v1/responses', 200, event, 'text/event-stream');
    expectMatches('post', '/v1/responses', 200, events.at(-1)!.response);

    const path = '/v1/responses/{response_id}';
    expectMatches('get', path, 200, (await call('GET', `/v1/responses/${id}`, token)).json());
    expectMatches('get', `${path}/input_items`, 200, (await call('GET', `/v1/responses/${id}/input_items`, token)).json());
    expectMatches('delete', path, 200, (await call('DELETE', `/v1/responses/${id}`, token)).json());
    const gone = await call('GET', `/v1/responses/${id}`, token);
    expect(gone.status).toBe(404);
    expectMatches('get', path, 404, gone.json());
  });

  it('models, health and readiness', async () => {
    const { token } = await server.createKey();
    const models = await call('GET', '/v1/models', token);
    expectMatches('get', '/v1/models', 200, models.json());
    expectMatches('get', '/v1/models/{model}', 200, (await call('GET', '/v1/models/svc01', token)).json());
    const unknown = await call('GET', '/v1/models/gpt-4', token);
    expect(unknown.status).toBe(404);
    expectMatches('get', '/v1/models/{model}', 404, unknown.json());
    expectMatches('get', '/healthz', 200, (await call('GET', '/healthz', undefined)).json());
    expectMatches('get', '/readyz', 200, (await call('GET', '/readyz', undefined)).json());
  });

  it('webhooks test, deliveries list/show/redeliver, and the delivered payload and headers', async () => {
    const before = receiver.received.length;
    const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: 'whsec_openapi-test' });
    const tested = await call('POST', '/v1/webhooks/test', token);
    expect(tested.status).toBe(200);
    expectMatches('post', '/v1/webhooks/test', 200, tested.json());

    const noUrl = await server.createKey();
    const refused = await call('POST', '/v1/webhooks/test', noUrl.token);
    expect(refused.status).toBe(400);
    expectMatches('post', '/v1/webhooks/test', 400, refused.json());

    expect((await call('POST', '/v1/chat/completions', token, chat())).status).toBe(200);
    await eventually(() => receiver.received.length >= before + 2);

    const list = await call('GET', '/v1/webhooks/deliveries', token);
    expectMatches('get', '/v1/webhooks/deliveries', 200, list.json());
    const badLimit = await call('GET', '/v1/webhooks/deliveries?limit=0', token);
    expect(badLimit.status).toBe(400);
    expectMatches('get', '/v1/webhooks/deliveries', 400, badLimit.json());

    const id = (list.json() as { data: Array<{ id: string }> }).data[0]!.id;
    const shown = await call('GET', `/v1/webhooks/deliveries/${id}`, token);
    expectMatches('get', '/v1/webhooks/deliveries/{id}', 200, shown.json());
    const missing = await call('GET', '/v1/webhooks/deliveries/whd_00000000000000000000000000000000', token);
    expect(missing.status).toBe(404);
    expectMatches('get', '/v1/webhooks/deliveries/{id}', 404, missing.json());
    const again = await call('POST', `/v1/webhooks/deliveries/${id}/redeliver`, token);
    expect(again.status).toBe(202);
    expectMatches('post', '/v1/webhooks/deliveries/{id}/redeliver', 202, again.json());

    const hook = doc.webhooks['llm.request.completed'].post;
    const validatePayload = ajv.compile({ $ref: `openapi.json#/components/schemas/AuditPayload` });
    for (const delivery of receiver.received.slice(before)) {
      expect(validatePayload(JSON.parse(delivery.raw.toString('utf8'))) ? [] : validatePayload.errors).toEqual([]);
      for (const param of hook.parameters as Json[]) {
        const value = delivery.headers[param.name.toLowerCase()];
        expect(value, param.name).toBeDefined();
        expect(String(value)).toMatch(new RegExp(param.schema.pattern ?? '.'));
      }
    }
  });
});
