import { afterAll, beforeAll, it } from 'vitest';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { streamText, generateText } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';

let upstream: FakeUpstream; let server: TestServer; let token: string; let client: OpenAI;
beforeAll(async () => {
  upstream = await startFakeUpstream();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'gemini-2.5-flash' } });
  ({ token } = await server.createKey({}));
  client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
});
afterAll(async () => { await server?.close(); await upstream?.close(); });
const f = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
async function raw(body: unknown) {
  const r = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return `${r.status} ${await r.text()}`;
}
const ask = { model: 'svc01', messages: [{ role: 'user', content: 'Hi' }] };
it('gemini stream: content+finish together, repeat finish with usage, no id', async () => {
  const u = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
  upstream.setBehavior({ rawSse: [
    f({ object: 'chat.completion.chunk', created: 1, model: 'g', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello' } }] }),
    f({ object: 'chat.completion.chunk', created: 1, model: 'g', choices: [{ index: 0, delta: { role: 'assistant', content: ' world' }, finish_reason: 'stop' }], usage: u }),
    'data: [DONE]\n\n'] });
  console.log('A', await raw({ ...ask, stream: true, stream_options: { include_usage: true } }));
  upstream.setBehavior({ rawSse: [
    f({ id: 'a', object: 'chat.completion.chunk', created: 1, model: 'g', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello' }, finish_reason: null }], usage: null }),
    f({ id: 'a', object: 'chat.completion.chunk', created: 1, model: 'g', choices: [{ index: 0, delta: { content: '' }, finish_reason: 'stop' }], usage: null }),
    f({ id: 'a', object: 'chat.completion.chunk', created: 1, model: 'g', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: u }),
    'data: [DONE]\n\n'] });
  console.log('B', await raw({ ...ask, stream: true, stream_options: { include_usage: true } }));
  // usage in every chunk cumulative (some providers)
  upstream.setBehavior({ rawSse: [
    f({ id: 'a', object: 'chat.completion.chunk', created: 1, model: 'g', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello' }, finish_reason: null }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }),
    f({ id: 'a', object: 'chat.completion.chunk', created: 1, model: 'g', choices: [{ index: 0, delta: { content: '!' }, finish_reason: 'stop' }], usage: u }),
    ] });
  console.log('C', await raw({ ...ask, stream: true, stream_options: { include_usage: true } }));
  // finish_reason outside set, no created/object, non-stream without id/created/object
  upstream.setBehavior({ rawJson: { choices: [{ message: { role: 'assistant', content: 'Hi' }, finish_reason: 'MALFORMED_FUNCTION_CALL' }] } });
  console.log('D', await raw(ask));
  upstream.setBehavior({ rawJson: { id: 'x', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'content_filter' }], usage: { prompt_tokens: 1, completion_tokens: 1 } } });
  console.log('E', await raw(ask));
  // DeepSeek non-stream leading blank lines
  upstream.setBehavior({ rawSse: undefined });
  // Anthropic compat returns usage w/o total tokens; error body with type only
  upstream.setBehavior({ status: 400, errorBody: { type: 'error', error: { type: 'invalid_request_error', message: 'n: must be 1' } } });
  console.log('F', await raw({ ...ask, n: 2 }));
  upstream.setBehavior({ status: 402, errorBody: { error: { code: 402, message: 'Insufficient credits', metadata: {} } } });
  console.log('G', await raw(ask));
  upstream.setBehavior({ status: 404, errorBody: [{ error: { code: 404, message: 'models/gemini-9 is not found for API version v1main', status: 'NOT_FOUND' } }] });
  console.log('H', await raw(ask));
  upstream.setBehavior({ status: 400, errorBody: [{ error: { code: 400, message: 'API key not valid. Please pass a valid API key.', status: 'INVALID_ARGUMENT', details: [{ reason: 'API_KEY_INVALID' }] } }] });
  console.log('I', await raw(ask));
});
