import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.js';
import { startTestServer, type TestServer } from './test-server.js';
import { startReceiver, type Receiver } from './webhooks.js';

/** A server in front of the fake upstream, with a key whose audit webhook goes to a local receiver. */
export interface AuditedServer {
  upstream: FakeUpstream;
  server: TestServer;
  receiver: Receiver;
  token: string;
  /** `${server.url}/v1`, for other clients (AI SDK, LangChain). */
  baseURL: string;
  /** An openai client with the key, not retrying. */
  client: OpenAI;
  close(): Promise<void>;
}

/**
 * Starts the receiver, the fake upstream and a server with `env` (the upstream's URL and loopback webhooks added):
 * what the stream and provider suites share.
 *
 * @example
 * const rig = await startAuditedServer({ SVC_UPSTREAM_MODEL: 'gpt-4o' });
 */
export async function startAuditedServer(env: Record<string, string>): Promise<AuditedServer> {
  const receiver = await startReceiver();
  const upstream = await startFakeUpstream();
  const server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'true', ...env } });
  const { token } = await server.createKey({ webhookUrl: receiver.url });
  const baseURL = `${server.url}/v1`;
  return {
    upstream,
    server,
    receiver,
    token,
    baseURL,
    client: new OpenAI({ apiKey: token, baseURL, maxRetries: 0 }),
    async close() {
      await server.close();
      await upstream.close();
      await receiver.close();
    },
  };
}
