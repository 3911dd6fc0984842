import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatOpenAI } from '@langchain/openai';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';
import { SvcResultSchema, type SvcResult } from '@svc/protocol';
import { startTestServer, type TestServer } from './support/test-server.js';

/**
 * Reading svc's grounding result (`svc`) from LangChain JS, the ways the README documents: LangChain keeps
 * only the fields it knows in `response_metadata`, so the raw completion (or chunk) is asked for with
 * `__includeRawResponse: true` and `svc` read from `additional_kwargs.__raw_response`; the `x-svc-*` headers
 * of a non-streamed answer through the client's `fetch`.
 */

const DOC = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';
const messages = [
  { role: 'system', content: DOC },
  { role: 'user', content: 'When was the Eiffel Tower completed?' },
];

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startTestServer();
  ({ token } = await server.createKey());
});

afterAll(async () => {
  await server?.close();
});

function model(extra: ConstructorParameters<typeof ChatOpenAI>[0] = {}): ChatOpenAI {
  return new ChatOpenAI({ model: 'svc01', apiKey: token, configuration: { baseURL: `${server.url}/v1` }, maxRetries: 0, ...extra });
}

function svcOf(kwargs: Record<string, unknown>): SvcResult | undefined {
  const raw = kwargs.__raw_response as { svc?: unknown } | undefined;
  return raw?.svc === undefined ? undefined : SvcResultSchema.parse(raw.svc);
}

describe('svc from LangChain JS', () => {
  it('invoke: additional_kwargs.__raw_response.svc with __includeRawResponse', async () => {
    const message = await model({ __includeRawResponse: true }).invoke(messages);
    expect(message.content).toContain('Eiffel Tower');
    expect(svcOf(message.additional_kwargs)).toMatchObject({ checked: true, grounded: true, score: expect.any(Number), flagged_spans: [] });
  });

  it('stream: the chunk that finishes the answer carries __raw_response.svc', async () => {
    const found: SvcResult[] = [];
    let text = '';
    for await (const chunk of await model({ __includeRawResponse: true }).stream(messages)) {
      text += chunk.content;
      const svc = svcOf(chunk.additional_kwargs);
      if (svc) found.push(svc);
    }
    expect(text).toContain('Eiffel Tower');
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ checked: true, grounded: true });
  });

  it('the x-svc-* headers of a non-streamed answer, through configuration.fetch', async () => {
    const headers: Headers[] = [];
    const llm = model({
      configuration: {
        baseURL: `${server.url}/v1`,
        fetch: async (input: string | URL | Request, init?: RequestInit) => {
          const res = await fetch(input, init);
          headers.push(res.headers);
          return res;
        },
      },
    });
    await llm.invoke(messages);
    expect(headers[0]?.get('x-svc-checked')).toBe('true');
    expect(headers[0]?.get('x-svc-grounded')).toBe('true');
    expect(Number(headers[0]?.get('x-svc-score'))).toBeGreaterThan(0);
  });
});

describe('svc from the AI SDK', () => {
  it('generateText: result.response.body.svc', async () => {
    const openai = createOpenAI({ apiKey: token, baseURL: `${server.url}/v1` });
    const result = await generateText({ model: openai.chat('svc01'), messages: messages as never, maxRetries: 0 });
    expect(result.text).toContain('Eiffel Tower');
    const body = result.response.body as { svc?: unknown };
    expect(SvcResultSchema.parse(body.svc)).toMatchObject({ checked: true, grounded: true });
    expect(result.response.headers?.['x-svc-checked']).toBe('true');
  });
});

/** The README's way to send svc's options from the AI SDK, which keeps only the fields it knows. */
function withSvc(options: Record<string, unknown>, seen: unknown[]): typeof fetch {
  return async (input, init) => {
    const body = typeof init?.body === 'string' ? JSON.stringify({ ...JSON.parse(init.body), svc: options }) : init?.body;
    const res = await fetch(input, { ...init, body });
    seen.push(await res.clone().json());
    return res;
  };
}

describe("svc's options sent from LangChain JS and the AI SDK", () => {
  it('LangChain: modelKwargs carries svc', async () => {
    const on = await model({ __includeRawResponse: true }).invoke(messages);
    const off = await model({ __includeRawResponse: true, modelKwargs: { svc: { dehallucinate: false } } }).invoke(messages);
    expect(svcOf(on.additional_kwargs)?.dehallucinate_requested).toBe(true);
    expect(svcOf(off.additional_kwargs)?.dehallucinate_requested).toBe(false);
  });

  it("the AI SDK: a fetch that adds svc to the body (providerOptions' unknown keys are dropped)", async () => {
    const seen: unknown[] = [];
    const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: token, fetch: withSvc({ dehallucinate: false }, seen) });
    const { text } = await generateText({ model: openai.chat('svc01'), messages: messages as never, maxRetries: 0 });
    expect(text).toContain('Eiffel Tower');
    expect(SvcResultSchema.parse((seen[0] as { svc: unknown }).svc).dehallucinate_requested).toBe(false);
  });
});

