import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { SvcResult } from '@svc/protocol';
import { startFakeUpstream } from './fake-upstream.js';
import { startTestServer } from './test-server.js';

/** A test server whose fake upstream answers with whatever text `svcOf` (or `setAnswer`) last gave it. */
export interface AnsweringServer {
  client: OpenAI;
  setAnswer(text: string): void;
  /** The `svc` result of `messages` answered with `text` (non-streamed, through the openai client). */
  svcOf(messages: ChatCompletionMessageParam[], text: string): Promise<SvcResult>;
  close(): Promise<void>;
}

/**
 * Starts the fake upstream and a server in front of it, with a key and an openai client that does not retry:
 * what the grounding tests over HTTP share.
 *
 * @example
 * const rig = await startAnsweringServer();
 * const svc = await rig.svcOf([{ role: 'user', content: 'Who wrote Hamlet?' }], 'Shakespeare.');
 */
export async function startAnsweringServer(): Promise<AnsweringServer> {
  let answer = '';
  const upstream = await startFakeUpstream({ answer: () => answer });
  const server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_UPSTREAM_MODEL: 'up-model' } });
  const client = new OpenAI({ apiKey: (await server.createKey()).token, baseURL: `${server.url}/v1`, maxRetries: 0 });
  return {
    client,
    setAnswer: (text) => void (answer = text),
    async svcOf(messages, text) {
      answer = text;
      const res = await client.chat.completions.create({ model: 'svc01', messages });
      return (res as unknown as { svc: SvcResult }).svc;
    },
    async close() {
      await server.close();
      await upstream.close();
    },
  };
}
