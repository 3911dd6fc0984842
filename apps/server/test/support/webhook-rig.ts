import { afterEach, expect } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.js';
import { startTestServer, type TestServer } from './test-server.js';
import { startReceiver, type Receiver } from './webhooks.js';

/**
 * A server on a fake upstream, and webhook receivers, all closed after each test: receivers first, so the
 * server's hung attempts end at once and it stops without waiting out their timeout.
 *
 * @example
 * const rig = useWebhookRig();
 * const srv = await rig.start({ SVC_WEBHOOK_TIMEOUT_MS: '2000' });
 * const hanging = await rig.receiver({ hang: true });
 */
export function useWebhookRig() {
  let upstream: FakeUpstream | undefined;
  let server: TestServer | undefined;
  const receivers: Receiver[] = [];
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    await server?.close();
    await upstream?.close();
    server = undefined;
    upstream = undefined;
  });
  return {
    async start(env: Record<string, string>): Promise<TestServer> {
      upstream = await startFakeUpstream({ answer: 'Hello.' });
      server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, ...env } });
      return server;
    },
    async receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
      const r = await startReceiver(...args);
      receivers.push(r);
      return r;
    },
  };
}

/** `n` chat completions at once with `token`; each must be answered 200. */
export async function chatMany(srv: TestServer, token: string, n: number): Promise<void> {
  const statuses = await Promise.all(
    Array.from({ length: n }, () =>
      fetch(`${srv.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
      }).then((res) => res.status),
    ),
  );
  expect(statuses.every((s) => s === 200)).toBe(true);
}
