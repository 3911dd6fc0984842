import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DashboardClient } from './support/dashboard-client.js';
import { startTestServer, type TestServer } from './support/test-server.js';

/**
 * Ids, names and keys the request sends are quoted by the errors that name them: a megabytes-long one comes back
 * cut, not as a megabytes-long error message (or `param`).
 */

const LONG = 'x'.repeat(1_000_000);

let server: TestServer;
let token: string;
let email: string;
let keyId: string;

beforeAll(async () => {
  server = await startTestServer();
  let user: { email: string };
  let key: { id: string };
  ({ token, user, key } = await server.createKey());
  email = user.email;
  keyId = key.id;
});

afterAll(async () => {
  await server?.close();
});

async function post(path: string, body: unknown): Promise<{ status: number; error: { message: string; code: string; param: string | null } }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, error: ((await response.json()) as { error: { message: string; code: string; param: string | null } }).error };
}

describe('a megabyte-long id or name in the request', () => {
  const cases: Array<{ name: string; path: string; body: unknown; status: number; code: string; param: string; starts: string }> = [
    { name: 'model (chat)', path: '/v1/chat/completions', body: { model: LONG, messages: [{ role: 'user', content: 'hi' }] }, status: 404, code: 'model_not_found', param: 'model', starts: "The model 'xxx" },
    { name: 'model (responses)', path: '/v1/responses', body: { model: LONG, input: 'hi' }, status: 404, code: 'model_not_found', param: 'model', starts: "The model 'xxx" },
    { name: 'previous_response_id', path: '/v1/responses', body: { model: 'svc01', input: 'hi', previous_response_id: LONG }, status: 404, code: 'not_found', param: 'previous_response_id', starts: "Previous response with id 'xxx" },
    { name: 'item_reference id', path: '/v1/responses', body: { model: 'svc01', input: [{ type: 'item_reference', id: LONG }] }, status: 404, code: 'not_found', param: 'input[0]', starts: "Item with id 'xxx" },
    {
      name: 'tool_choice name',
      path: '/v1/chat/completions',
      body: { model: 'svc01', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: LONG } } },
      status: 400,
      code: 'invalid_value',
      param: 'tool_choice',
      starts: "Invalid value for 'tool_choice': no function tool named 'xxx",
    },
    {
      name: 'tool type',
      path: '/v1/chat/completions',
      body: { model: 'svc01', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: LONG }] },
      status: 400,
      code: 'invalid_value',
      param: 'tools[0].type',
      starts: "Invalid value for 'tools[0].type': 'xxx",
    },
    {
      name: 'call_id of a tool output without its call',
      path: '/v1/responses',
      body: { model: 'svc01', input: [{ type: 'custom_tool_call_output', call_id: LONG, output: 'done' }] },
      status: 400,
      code: 'invalid_request',
      param: 'input',
      starts: 'No tool call found for custom tool call output with call_id xxx',
    },
    {
      name: 'call_id of a tool call without its output',
      path: '/v1/responses',
      body: { model: 'svc01', input: [{ type: 'function_call', call_id: LONG, name: 'f', arguments: '{}' }] },
      status: 400,
      code: 'invalid_request',
      param: 'input',
      starts: 'No tool output found for function call xxx',
    },
    {
      name: 'message role (chat)',
      path: '/v1/chat/completions',
      body: { model: 'svc01', messages: [{ role: LONG, content: 'hi' }] },
      status: 400,
      code: 'invalid_value',
      param: 'messages[0].role',
      starts: `Invalid value for 'messages[0].role': "xxx`,
    },
    {
      name: 'message role (chat), an array of long strings',
      path: '/v1/chat/completions',
      body: { model: 'svc01', messages: [{ role: Array.from({ length: 8 }, () => LONG), content: 'hi' }] },
      status: 400,
      code: 'invalid_value',
      param: 'messages[0].role',
      starts: `Invalid value for 'messages[0].role': ["xxx`,
    },
    {
      name: 'input item type (responses)',
      path: '/v1/responses',
      body: { model: 'svc01', input: [{ type: LONG }] },
      status: 400,
      code: 'invalid_value',
      param: 'input[0].type',
      starts: `Invalid value for 'input[0].type': "xxx`,
    },
    {
      name: 'metadata key (chat)',
      path: '/v1/chat/completions',
      body: { model: 'svc01', messages: [{ role: 'user', content: 'hi' }], metadata: { [LONG]: 'v' } },
      status: 400,
      code: 'invalid_value',
      param: `metadata.${'x'.repeat(128)}…`,
      starts: "Invalid value for 'metadata.xxx",
    },
    {
      name: 'metadata key (responses)',
      path: '/v1/responses',
      body: { model: 'svc01', input: 'hi', metadata: { [LONG]: 'v' } },
      status: 400,
      code: 'invalid_value',
      param: `metadata.${'x'.repeat(128)}…`,
      starts: "Invalid value for 'metadata.xxx",
    },
    {
      name: 'unknown svc option',
      path: '/v1/responses',
      body: { model: 'svc01', input: 'hi', svc: { [LONG]: true } },
      status: 400,
      code: 'invalid_value',
      param: `svc.${'x'.repeat(128)}…`,
      starts: "Unrecognized parameter(s) in 'svc': 'xxx",
    },
    {
      name: 'many long unknown svc options',
      path: '/v1/chat/completions',
      body: { model: 'svc01', messages: [{ role: 'user', content: 'hi' }], svc: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`${i}${'x'.repeat(100_000)}`, true])) },
      status: 400,
      code: 'invalid_value',
      param: `svc.0${'x'.repeat(127)}…`,
      starts: "Unrecognized parameter(s) in 'svc': '0xxx",
    },
  ];
  for (const c of cases) {
    it(`${c.name}: the error quotes its start only`, async () => {
      const { status, error } = await post(c.path, c.body);
      expect(status).toBe(c.status);
      expect(error).toMatchObject({ code: c.code, param: c.param });
      expect(error.message.startsWith(c.starts)).toBe(true);
      expect(error.message.length).toBeLessThan(1000);
    });
  }
});

describe('an id in the URL as long as a request line may be (15,000 characters)', () => {
  const ID = 'y'.repeat(15_000);

  it('the API and the dashboard API quote its start only', async () => {
    const response = await fetch(`${server.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', input: 'hi' }),
    });
    const { id: responseId } = (await response.json()) as { id: string };
    const api = async (path: string) => {
      const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, error: ((await res.json()) as { error: { message: string; param: string | null } }).error };
    };
    const dashboard = new DashboardClient(server.url);
    expect((await dashboard.login(email)).status).toBe(200);
    const answers = [
      { ...(await api(`/v1/${ID}`)), starts: 'Unknown request URL: GET /v1/yyy' },
      { ...(await api(`/v1/responses/${responseId}/input_items?after=${ID}`)), starts: "No input item with id 'yyy" },
      ...(await Promise.all([`/keys/${ID}`, `/keys/${keyId}/deliveries/${ID}`, `/usage?key_id=${ID}`, `/${ID}`].map((path) => dashboard.request('GET', path)))).map(
        (res, i) => ({ status: res.status, error: res.body.error as { message: string }, starts: ["No API key with id 'yyy", "No delivery with id 'yyy", "No API key with id 'yyy", 'Unknown dashboard API URL: GET /dashboard/api/yyy'][i]! }),
      ),
    ];
    for (const { status, error, starts } of answers) {
      expect([400, 404]).toContain(status);
      expect(error.message.startsWith(starts)).toBe(true);
      expect(error.message.length).toBeLessThan(1000);
    }
  });
});
