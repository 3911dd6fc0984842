import { afterAll, afterEach, beforeAll } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.js';
import { startTestServer, type TestServer } from './test-server.js';

export interface ServerPerTest {
  /** The file's fake upstream, started before its first test and closed after its last. */
  readonly upstream: FakeUpstream;
  /** An svc server on that upstream for this test alone (closed after it), with a key of its own. */
  start(key?: { webhookUrl?: string }, server?: { backgroundLeaseMs?: number }): Promise<{ srv: TestServer; token: string; keyId: string }>;
}

/**
 * One fake upstream for a test file and a fresh svc server on it for each test that asks: for tests that change a
 * server's store or its running state, which the next test must not find.
 *
 * @example
 * const servers = serverPerTest();
 * it('…', async () => {
 *   const { srv, token } = await servers.start();
 *   servers.upstream.nextBehavior({ answer: 'Hi.' });
 * });
 */
export function serverPerTest(): ServerPerTest {
  let upstream: FakeUpstream | undefined;
  let srv: TestServer | undefined;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await upstream?.close();
  });
  afterEach(async () => {
    await srv?.close();
    srv = undefined;
  });
  return {
    get upstream() {
      if (upstream === undefined) throw new Error('serverPerTest: the upstream starts in beforeAll; read it in a test');
      return upstream;
    },
    async start(key = {}, server = {}) {
      srv = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: this.upstream.url }, ...server });
      const { token, key: record } = await srv.createKey(key);
      return { srv, token, keyId: record.id };
    },
  };
}
