import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

/**
 * svc in front of the upstream kinds an app switches between: OpenAI's reasoning models, and vLLM / llama.cpp /
 * Ollama serving DeepSeek-R1-style models (reasoning in `reasoning_content`, or as `<think>…</think>` in content).
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let client: OpenAI;

beforeAll(async () => {
  receiver = await startReceiver();
  upstream = await startFakeUpstream();
  server = await startTestServer({
    env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'gpt-4o-mini', SVC_UPSTREAM_THINKING_MODEL: 'o4-mini', SVC_WEBHOOK_ALLOW_PRIVATE: 'true' },
  });
  const { token } = await server.createKey({ webhookUrl: receiver.url });
  client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
  await receiver?.close();
});

beforeEach(() => {
  upstream.setBehavior({});
  upstream.requests.length = 0;
});

describe('tool_choice', () => {
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }];

  it('naming a function not in tools, or given without tools, is a 400 naming tool_choice as OpenAI answers, before the upstream', async () => {
    const wrong = await client.chat.completions
      .create({ model: 'svc01', messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: { type: 'function', function: { name: 'get_time' } } })
      .catch((err: unknown) => err);
    expect(wrong).toBeInstanceOf(OpenAI.BadRequestError);
    expect(wrong).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_value', param: 'tool_choice' });
    expect((wrong as Error).message).toContain("'get_time'");

    const without = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }], tool_choice: 'auto' }).catch((err: unknown) => err);
    expect(without).toMatchObject({
      status: 400,
      param: 'tool_choice',
      message: "400 Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
    });
    expect(upstream.requests).toHaveLength(0);

    upstream.setBehavior({ toolCalls: [{ name: 'get_weather', arguments: {} }] });
    const named = await client.chat.completions.create({
      model: 'svc01',
      messages: [{ role: 'user', content: 'Weather?' }],
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    expect(named.choices[0]!.message.tool_calls?.[0]).toMatchObject({ function: { name: 'get_weather' } });
  });
});
