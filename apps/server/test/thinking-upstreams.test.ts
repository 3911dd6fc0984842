import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { ChatOpenAI } from '@langchain/openai';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import { chunkFrame, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import type { Receiver } from './support/webhooks.js';
import { startAuditedServer, type AuditedServer } from './support/audited-server.js';
import { countUsage } from '../src/chat/prompt.js';

/**
 * svc in front of the upstream kinds an app switches between: OpenAI's reasoning models, and vLLM / llama.cpp /
 * Ollama serving DeepSeek-R1-style models (reasoning in `reasoning_content`, or as `<think>…</think>` in content).
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let client: OpenAI;
let token: string;
let rig: AuditedServer;

beforeAll(async () => {
  rig = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'gpt-4o-mini', SVC_UPSTREAM_THINKING_MODEL: 'o4-mini' });
  ({ upstream, server, receiver, client, token } = rig);
});

afterAll(() => rig?.close());

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

/** The webhook payload of the request `id`, as `at` (this file's receiver unless given) received it. */
async function delivered(id: string, at: Receiver = receiver): Promise<Record<string, unknown>> {
  const [hit] = (await at.waitFor((all) => all.some((d) => JSON.parse(d.raw.toString()).request_id === id))).filter(
    (d) => JSON.parse(d.raw.toString()).request_id === id,
  );
  return JSON.parse(hit!.raw.toString()) as Record<string, unknown>;
}

/** A stream's first choice read to its end: content and reasoning_content joined, its id and its svc object. */
async function readStream(stream: AsyncIterable<OpenAI.ChatCompletionChunk>) {
  let content = '';
  let reasoning = '';
  let id = '';
  let svc: unknown;
  for await (const chunk of stream) {
    id = chunk.id;
    const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
    content += delta?.content ?? '';
    reasoning += delta?.reasoning_content ?? '';
    svc ??= (chunk as unknown as { svc?: unknown }).svc;
  }
  return { content, reasoning, id, svc };
}

/** What the AI SDK and LangChain get from svc at `baseURL`, each plain and streamed (in that order). */
async function sdkTexts(baseURL: string, apiKey: string, messages: Array<{ role: 'system' | 'user'; content: string }>): Promise<unknown[]> {
  const openai = createOpenAI({ apiKey, baseURL });
  const asked = { system: DOC, prompt: 'Where is the Eiffel Tower?' };
  const texts: unknown[] = [(await generateText({ model: openai.chat('svc01'), ...asked })).text];
  let streamed = '';
  for await (const part of streamText({ model: openai.chat('svc01'), ...asked }).textStream) streamed += part;
  texts.push(streamed);
  const model = new ChatOpenAI({ model: 'svc01', apiKey, configuration: { baseURL }, maxRetries: 0 });
  texts.push((await model.invoke(messages)).content);
  let chunks = '';
  for await (const chunk of await model.stream(messages)) chunks += typeof chunk.content === 'string' ? chunk.content : '';
  texts.push(chunks);
  return texts;
}

describe('<think>…</think> in content (Ollama, vLLM without a reasoning parser, llama.cpp --reasoning-format none)', () => {
  // The reasoning muses about a number no source has: were it taken for the answer, the check would flag it.
  const REASONING = 'The user asks where. Maybe it was finished in 1925? No, the document says Paris.';
  const ANSWER = 'The Eiffel Tower is in Paris.';
  const messages = [
    { role: 'system' as const, content: DOC },
    { role: 'user' as const, content: 'Where is the Eiffel Tower?' },
  ];

  it('non-streamed: the block comes back as reasoning_content, the answer alone is content, checked and audited', async () => {
    upstream.setBehavior({ reasoning: REASONING, reasoningField: 'think-tags', answer: ANSWER });
    const res = await client.chat.completions.create({ model: 'svc01', messages });
    const message = res.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.content).toBe(ANSWER);
    expect(message.reasoning_content).toBe(`\n${REASONING}\n`);
    expect((res as unknown as { svc: unknown }).svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    expect(await delivered(res.id)).toMatchObject({ response_text: ANSWER, grounded: true });
  });

  it('streamed with the tags split across frames: deltas carry the reasoning as reasoning_content, never in content', async () => {
    upstream.setBehavior({ reasoning: REASONING, reasoningField: 'think-tags', answer: ANSWER, contentPieceChars: 3 });
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true, stream_options: { include_usage: true } });
    const { content, reasoning, id, svc } = await readStream(stream);
    expect(content).toBe(ANSWER);
    expect(reasoning).toBe(`\n${REASONING}\n`);
    expect(svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    expect(await delivered(id)).toMatchObject({ response_text: ANSWER, grounded: true, streaming: true });
  });

  it('reaches the AI SDK and LangChain as the answer alone, plain and streamed', async () => {
    upstream.setBehavior({ reasoning: REASONING, reasoningField: 'think-tags', answer: ANSWER, contentPieceChars: 5 });
    expect(await sdkTexts(`${server.url}/v1`, token, messages)).toEqual([ANSWER, ANSWER, ANSWER, ANSWER]);
  });

  it('leaves content that does not open with the tag as it came, a tag later in the text included', async () => {
    const text = '  Use <think> tags in the prompt; close with </think>.';
    upstream.setBehavior({ answer: text, contentPieceChars: 2 });
    const plain = await client.chat.completions.create({ model: 'svc01', messages });
    expect(plain.choices[0]!.message.content).toBe(text);
    const stream = await client.chat.completions.create({ model: 'svc01', messages, stream: true });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    expect(content).toBe(text);
  });
});

describe('OpenAI reasoning models behind svc.thinking (SVC_UPSTREAM_THINKING_MODEL=o4-mini)', () => {
  const messages = [
    { role: 'system' as const, content: DOC },
    { role: 'user' as const, content: 'How tall is the Eiffel Tower?' },
  ];
  // What an app sets once for both modes; svc sends each model what it takes.
  const tuned = { temperature: 0.3, top_p: 0.9, presence_penalty: 0.5, frequency_penalty: 0.2, max_tokens: 300, reasoning_effort: 'low' as const };
  const thinking = { svc: { thinking: true } } as Record<string, unknown>;

  it('answers where o4-mini would refuse top_p, the penalties and max_tokens; reasoning_effort and usage details pass', async () => {
    upstream.setBehavior({ answer: 'It is 330 metres tall.', reasoningTokens: 192 });
    const res = await client.chat.completions.create({ model: 'svc01', messages, ...tuned, ...thinking });
    expect(upstream.requests).toHaveLength(1);
    const sent = upstream.requests[0]!.body;
    expect(sent).toMatchObject({ model: 'o4-mini', max_completion_tokens: 300, temperature: 1, reasoning_effort: 'low' });
    for (const refused of ['max_tokens', 'top_p', 'presence_penalty', 'frequency_penalty']) expect(sent).not.toHaveProperty(refused);
    expect(res.usage?.completion_tokens_details?.reasoning_tokens).toBe(192);
    expect(await delivered(res.id)).toMatchObject({ output_tokens: res.usage!.completion_tokens });
    expect(res.usage!.completion_tokens).toBeGreaterThan(192);

    const stream = await client.chat.completions.create({ model: 'svc01', messages, ...tuned, ...thinking, stream: true, stream_options: { include_usage: true } });
    let usage: OpenAI.CompletionUsage | null | undefined;
    let content = '';
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      usage ??= chunk.usage;
    }
    expect(content).toBe('It is 330 metres tall.');
    expect(usage?.completion_tokens_details?.reasoning_tokens).toBe(192);
  });

  it("drops reasoning_effort once gpt-4o-mini refused it (thinking off), and sends it no more; o4-mini's refusal of logprobs comes back as a 400", async () => {
    upstream.setBehavior({ answer: 'It is 330 metres tall.' });
    const plain = await client.chat.completions.create({ model: 'svc01', messages, ...tuned });
    expect(plain.choices[0]!.message.content).toBe('It is 330 metres tall.');
    expect(upstream.requests.map((r) => 'reasoning_effort' in r.body)).toEqual([true, false]);
    expect(upstream.requests[1]!.body).toMatchObject({ model: 'gpt-4o-mini', max_tokens: 300, temperature: 0.3, top_p: 0.9 });
    await client.chat.completions.create({ model: 'svc01', messages, ...tuned });
    expect(upstream.requests).toHaveLength(3);
    expect(upstream.requests[2]!.body).not.toHaveProperty('reasoning_effort');

    const logprobs = await client.chat.completions.create({ model: 'svc01', messages, logprobs: true, ...thinking }).catch((err: unknown) => err);
    expect(logprobs).toBeInstanceOf(OpenAI.BadRequestError);
    expect(logprobs).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'logprobs' });
  });
});

describe('a reasoning_effort value the thinking model does not take', () => {
  const messages = [{ role: 'user' as const, content: 'How tall is the Eiffel Tower?' }];
  const thinking = { svc: { thinking: true } } as Record<string, unknown>;

  it("comes back as o4-mini's 400, and the efforts asked for afterwards still reach it", async () => {
    upstream.setBehavior({ answer: 'It is 330 metres tall.' });
    const minimal = await client.chat.completions.create({ model: 'svc01', messages, reasoning_effort: 'minimal', ...thinking }).catch((err: unknown) => err);
    expect(minimal).toBeInstanceOf(OpenAI.BadRequestError);
    expect(minimal).toMatchObject({ status: 400, code: 'unsupported_value', param: 'reasoning_effort' });
    expect((minimal as Error).message).toContain("does not support 'minimal'");

    const high = await client.chat.completions.create({ model: 'svc01', messages, reasoning_effort: 'high', ...thinking });
    expect(high.choices[0]!.message.content).toBe('It is 330 metres tall.');
    expect(upstream.requests.at(-1)!.body).toMatchObject({ model: 'o4-mini', reasoning_effort: 'high' });
  });
});

describe('usage svc counts itself (an upstream that reports none)', () => {
  const REASONING = 'The document gives the height directly, so the answer is short and needs no arithmetic at all.';
  const ANSWER = 'It is 330 metres tall.';
  const messages = [
    { role: 'system' as const, content: DOC },
    { role: 'user' as const, content: 'How tall?' },
  ];

  it('counts the reasoning text among the completion tokens, streamed or not, and the webhook reports the same', async () => {
    const expected = await countUsage(messages, [ANSWER, REASONING]);
    const answerOnly = await countUsage(messages, [ANSWER]);
    expect(expected.completion_tokens).toBeGreaterThan(answerOnly.completion_tokens);

    upstream.setBehavior({ answer: ANSWER, reasoning: REASONING, reasoningField: 'reasoning', usage: false });
    const plain = await client.chat.completions.create({ model: 'svc01', messages, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(plain.usage).toEqual(expected);

    upstream.setBehavior({ answer: ANSWER, reasoning: REASONING, usage: false });
    const stream = await client.chat.completions.create({
      model: 'svc01',
      messages,
      stream: true,
      stream_options: { include_usage: true },
      svc: { thinking: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    let usage: OpenAI.CompletionUsage | null | undefined;
    let id = '';
    for await (const chunk of stream) {
      id = chunk.id;
      usage ??= chunk.usage;
    }
    expect(usage).toEqual(expected);
    expect(await delivered(id)).toMatchObject({ output_tokens: expected.completion_tokens, input_tokens: expected.prompt_tokens });
  });
});

describe('developer messages', () => {
  const messages = [
    { role: 'developer' as const, content: DOC },
    { role: 'user' as const, content: 'How tall is the Eiffel Tower?' },
  ];

  it('reach a server that has no developer role (Ollama drops them, strict servers refuse them) as system messages, and OpenAI reasoning models as they are', async () => {
    const local = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'qwen3:8b', SVC_UPSTREAM_THINKING_MODEL: 'o4-mini' } });
    try {
      const { token: localToken } = await local.createKey();
      const localClient = new OpenAI({ apiKey: localToken, baseURL: `${local.url}/v1`, maxRetries: 0 });
      upstream.setBehavior({ answer: 'It is 330 metres tall.', refuseDeveloperRole: true });
      const res = await localClient.chat.completions.create({ model: 'svc01', messages });
      expect(res.choices[0]!.message.content).toBe('It is 330 metres tall.');
      expect(upstream.requests[0]!.body).toMatchObject({ model: 'qwen3:8b', messages: [{ role: 'system', content: DOC }, messages[1]] });
      // Still a source of the grounding check, as a developer message is.
      expect((res as unknown as { svc: unknown }).svc).toMatchObject({ checked: true, grounded: true });

      upstream.setBehavior({ answer: 'It is 330 metres tall.' });
      await localClient.chat.completions.create({ model: 'svc01', messages, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect(upstream.requests[1]!.body).toMatchObject({ model: 'o4-mini', messages });
    } finally {
      await local.close();
    }
  });
});

describe('DeepSeek-R1 distills whose chat template opened <think> in the prompt (vLLM without a reasoning parser, llama.cpp --reasoning-format none)', () => {
  // The template ends the prompt with `<｜Assistant｜><think>\n`: the model writes its reasoning, `</think>`, then
  // the answer, with no opening tag. The reasoning muses about a number no source has.
  const REASONING = 'The user asks where. Maybe it was finished in 1925? No, the document says Paris.\n';
  const ANSWER = 'The Eiffel Tower is in Paris.';
  const messages = [
    { role: 'system' as const, content: DOC },
    { role: 'user' as const, content: 'Where is the Eiffel Tower?' },
  ];
  let r1: AuditedServer;

  beforeAll(async () => {
    r1 = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B' });
  });
  afterAll(() => r1?.close());

  async function streamedText(params: Record<string, unknown>) {
    return readStream(await r1.client.chat.completions.create({ model: 'svc01', messages, stream: true, ...params } as OpenAI.ChatCompletionCreateParamsStreaming));
  }

  const deliveredTo = (id: string) => delivered(id, r1.receiver);

  it('the text before </think> is reasoning_content, the rest the answer, checked and audited alone, streamed or not', async () => {
    r1.upstream.setBehavior({ answer: `${REASONING}</think>\n\n${ANSWER}`, contentPieceChars: 3 });
    const res = await r1.client.chat.completions.create({ model: 'svc01', messages });
    const message = res.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.content).toBe(ANSWER);
    expect(message.reasoning_content).toBe(REASONING);
    expect((res as unknown as { svc: unknown }).svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    expect(await deliveredTo(res.id)).toMatchObject({ response_text: ANSWER, grounded: true });

    const streamed = await streamedText({});
    expect(streamed).toMatchObject({ content: ANSWER, reasoning: REASONING });
    expect(streamed.svc).toMatchObject({ checked: true, grounded: true, flagged_spans: [] });
    expect(await deliveredTo(streamed.id)).toMatchObject({ response_text: ANSWER, grounded: true, streaming: true });
  });

  it('reaches the AI SDK and LangChain as the answer alone, plain and streamed', async () => {
    r1.upstream.setBehavior({ answer: `${REASONING}</think>\n\n${ANSWER}`, contentPieceChars: 4 });
    expect(await sdkTexts(r1.baseURL, r1.token, messages)).toEqual([ANSWER, ANSWER, ANSWER, ANSWER]);
  });

  it('cut by max_tokens while thinking: all reasoning and no answer, streamed or not; an answer with no block at all stays the answer', async () => {
    r1.upstream.setBehavior({ answer: REASONING, finishReason: 'length', contentPieceChars: 3 });
    const res = await r1.client.chat.completions.create({ model: 'svc01', messages, max_tokens: 20 });
    expect(res.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: '', reasoning_content: REASONING } });
    expect(await streamedText({ max_tokens: 20 })).toMatchObject({ content: '', reasoning: REASONING });

    r1.upstream.setBehavior({ answer: ANSWER, contentPieceChars: 3 });
    expect((await r1.client.chat.completions.create({ model: 'svc01', messages })).choices[0]!.message.content).toBe(ANSWER);
    expect(await streamedText({})).toMatchObject({ content: ANSWER, reasoning: '' });
  });

  it('served with a reasoning parser (vLLM --reasoning-parser deepseek_r1, Ollama): the content is the answer, even one cut by max_tokens', async () => {
    const head = { id: 'up', object: 'chat.completion', created: 1, model: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B' };
    r1.upstream.setBehavior({ rawJson: { ...head, choices: [{ index: 0, message: { role: 'assistant', content: 'The Eiffel Tower is', reasoning: REASONING }, finish_reason: 'length' }] } });
    const res = await r1.client.chat.completions.create({ model: 'svc01', messages, max_tokens: 20 });
    expect(res.choices[0]!.message).toMatchObject({ content: 'The Eiffel Tower is', reasoning_content: REASONING });

    const frame = (delta: object, finish: string | null = null) => chunkFrame([{ index: 0, delta, logprobs: null, finish_reason: finish }]);
    r1.upstream.setBehavior({
      rawSse: [frame({ role: 'assistant', content: '' }), frame({ content: '', reasoning: REASONING }), frame({ content: 'The Eiffel ' }), frame({ content: 'Tower is' }, 'length'), 'data: [DONE]\n\n'],
    });
    expect(await streamedText({ max_tokens: 20 })).toMatchObject({ content: 'The Eiffel Tower is', reasoning: REASONING });
  });
});

describe('a hybrid model served for both modes (SVC_UPSTREAM_MODEL=Qwen/Qwen3-8B, no separate thinking model)', () => {
  // Qwen3-8B thinks unless its template is told not to: svc.thinking (off by default) is that switch.
  const REASONING = 'The document gives the height: 330 metres.';
  const ANSWER = 'It is 330 metres tall.';
  const messages = [
    { role: 'system' as const, content: DOC },
    { role: 'user' as const, content: 'How tall is the Eiffel Tower?' },
  ];
  type Message = OpenAI.ChatCompletionMessage & { reasoning_content?: string };
  const reasoningOf = (res: OpenAI.ChatCompletion) => (res.choices[0]!.message as Message).reasoning_content;

  it.each(['Qwen/Qwen3-8B', 'zai-org/GLM-4.5-Air'])(
    'behind vLLM (%s): answers without thinking unless svc.thinking asks for it (an effort set for both modes does not); the client’s own chat_template_kwargs win',
    async (model) => {
      const hybrid = await startAuditedServer({ SVC_UPSTREAM_MODEL: model });
      try {
        hybrid.upstream.setBehavior({ hybrid: 'vllm', reasoning: REASONING, answer: ANSWER });
        const plain = await hybrid.client.chat.completions.create({ model: 'svc01', messages });
        expect(plain.choices[0]!.message.content).toBe(ANSWER);
        expect(reasoningOf(plain)).toBeUndefined();
        const stream = await hybrid.client.chat.completions.create({ model: 'svc01', messages, stream: true });
        expect(await readStream(stream)).toMatchObject({ content: ANSWER, reasoning: '' });

        const thinking = await hybrid.client.chat.completions.create({ model: 'svc01', messages, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        expect(reasoningOf(thinking)).toBe(REASONING);
        expect(reasoningOf(await hybrid.client.chat.completions.create({ model: 'svc01', messages, reasoning_effort: 'low' }))).toBeUndefined();
        const own = { model: 'svc01', messages, chat_template_kwargs: { enable_thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming;
        expect(reasoningOf(await hybrid.client.chat.completions.create(own))).toBe(REASONING);
      } finally {
        await hybrid.close();
      }
    },
  );

  it('behind Ollama (qwen3:8b, <think> in content): reasoning_effort "none" is sent while thinking is off, over an effort set for both modes', async () => {
    const hybrid = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'qwen3:8b' });
    try {
      hybrid.upstream.setBehavior({ hybrid: 'ollama', reasoning: REASONING, reasoningField: 'think-tags', answer: ANSWER });
      const plain = await hybrid.client.chat.completions.create({ model: 'svc01', messages, reasoning_effort: 'low' });
      expect(plain.choices[0]!.message.content).toBe(ANSWER);
      expect(reasoningOf(plain)).toBeUndefined();
      const thinking = await hybrid.client.chat.completions.create({ model: 'svc01', messages, reasoning_effort: 'low', svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect(thinking.choices[0]!.message.content).toBe(ANSWER);
      expect(reasoningOf(thinking)).toBe(`\n${REASONING}\n`);
    } finally {
      await hybrid.close();
    }
  });

  it('SVC_UPSTREAM_THINKING_SWITCH: a hybrid served under a name of its own (llama.cpp\'s "local") gets the switch it names; "off" sends none', async () => {
    const named = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'local', SVC_UPSTREAM_THINKING_SWITCH: 'enable_thinking' });
    try {
      named.upstream.setBehavior({ hybrid: 'vllm', reasoning: REASONING, answer: ANSWER });
      const plain = await named.client.chat.completions.create({ model: 'svc01', messages });
      expect(reasoningOf(plain)).toBeUndefined();
      expect(named.upstream.requests[0]!.body.chat_template_kwargs).toEqual({ enable_thinking: false });
      const thinking = await named.client.chat.completions.create({ model: 'svc01', messages, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect(reasoningOf(thinking)).toBe(REASONING);
    } finally {
      await named.close();
    }
    // A host that refuses chat_template_kwargs (or an operator who wants the model's own default): nothing is sent.
    const off = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'Qwen/Qwen3-8B', SVC_UPSTREAM_THINKING_SWITCH: 'off' });
    try {
      off.upstream.setBehavior({ refuseFields: ['chat_template_kwargs'], answer: ANSWER });
      for (const svc of [{ thinking: false }, { thinking: true }]) {
        const res = await off.client.chat.completions.create({ model: 'svc01', messages, svc } as OpenAI.ChatCompletionCreateParamsNonStreaming);
        expect(res.choices[0]!.message.content).toBe(ANSWER);
      }
      expect(off.upstream.requests.map((r) => 'chat_template_kwargs' in r.body)).toEqual([false, false]);
    } finally {
      await off.close();
    }
  });

  it('leaves models that only answer or only think as they are (no switch sent): Qwen3-30B-A3B-Instruct-2507, o4-mini', async () => {
    const instruct = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'Qwen/Qwen3-30B-A3B-Instruct-2507' });
    try {
      await instruct.client.chat.completions.create({ model: 'svc01', messages });
      expect(instruct.upstream.requests[0]!.body).not.toHaveProperty('chat_template_kwargs');
    } finally {
      await instruct.close();
    }
    await client.chat.completions.create({ model: 'svc01', messages, svc: { thinking: true } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(upstream.requests[0]!.body).not.toHaveProperty('chat_template_kwargs');
  });
});
