// An upstream's usage breakdowns (`*_tokens_details`) with counts no answer has (1e308, -5, "7") reached the client,
// the stored response and the Responses API's usage as they were: only counts are kept.
import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { chunkFrame } from './support/fake-upstream.js';
import { serverPerTest } from './support/server-per-test.js';

const servers = serverPerTest();

const sdk = (url: string, token: string) => new OpenAI({ apiKey: token, baseURL: `${url}/v1`, maxRetries: 0 });

describe('usage breakdowns from the upstream', () => {
  const hostileUsage = {
    prompt_tokens: 10,
    completion_tokens: 5,
    total_tokens: 15,
    prompt_tokens_details: { cached_tokens: 1e308, audio_tokens: 2 },
    completion_tokens_details: { reasoning_tokens: -5, accepted_prediction_tokens: '7', audio_tokens: 1 },
  };
  const body = { id: 'up', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi.' }, finish_reason: 'stop' }], usage: hostileUsage };
  const sse = [chunkFrame([{ index: 0, delta: { role: 'assistant', content: 'Hi.' }, finish_reason: 'stop' }]), chunkFrame([], { usage: hostileUsage }), 'data: [DONE]\n\n'];

  it('keep only counts: chat and Responses, streamed and not, and the stored response', async () => {
    const { srv, token } = await servers.start();
    const client = sdk(srv.url, token);

    servers.upstream.nextBehavior({ rawJson: body });
    const chat = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }] });
    expect(chat.usage).toMatchObject({ prompt_tokens_details: { audio_tokens: 2 }, completion_tokens_details: { audio_tokens: 1 } });
    expect(chat.usage!.prompt_tokens_details).toEqual({ audio_tokens: 2 });
    expect(chat.usage!.completion_tokens_details).toEqual({ audio_tokens: 1 });

    servers.upstream.nextBehavior({ rawSse: sse });
    const chunks = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } });
    let streamedUsage: unknown;
    for await (const chunk of chunks) if (chunk.usage) streamedUsage = chunk.usage;
    expect(streamedUsage).toMatchObject({ prompt_tokens_details: { audio_tokens: 2 }, completion_tokens_details: { audio_tokens: 1 } });
    expect((streamedUsage as { prompt_tokens_details: object }).prompt_tokens_details).toEqual({ audio_tokens: 2 });

    const counts = { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } };
    servers.upstream.nextBehavior({ rawJson: body });
    const response = await client.responses.create({ model: 'svc01', input: 'Hi' });
    expect(response.usage).toEqual(counts);
    expect((await client.responses.retrieve(response.id)).usage).toEqual(counts);

    servers.upstream.nextBehavior({ rawSse: sse });
    const events = await client.responses.create({ model: 'svc01', input: 'Hi', stream: true });
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of events) if (event.type === 'response.completed') completed = event.response;
    expect(completed!.usage).toEqual(counts);
    expect((await client.responses.retrieve(completed!.id)).usage).toEqual(counts);
  });
});
