import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startTestServer, type TestServer } from './support/test-server.js';

/** One GET /healthz over a raw socket; resolves with the answer's head and a promise of the socket's close. */
async function getOverSocket(url: string): Promise<{ head: string; closed: Promise<void> }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let text = '';
  const head = await new Promise<string>((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\n') && text.includes('"status"')) resolve(text.slice(0, text.indexOf('\r\n\r\n')));
    });
    socket.once('error', reject);
    socket.write(`GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
  });
  return { head, closed };
}

describe('idle client connections (SVC_KEEP_ALIVE_TIMEOUT_MS)', () => {
  let defaults: TestServer;
  let short: TestServer;
  beforeAll(async () => {
    defaults = await startTestServer();
    short = await startTestServer({ env: { SVC_KEEP_ALIVE_TIMEOUT_MS: '1000' } });
  });
  afterAll(async () => {
    await defaults?.close();
    await short?.close();
  });

  it('are kept 65 s by default, longer than a load balancer keeps them (AWS ALB: 60 s), and say so', async () => {
    // Was 5 s: a balancer reusing its connection after 5 s idle met svc closing it, and answered its client 502.
    const { head } = await getOverSocket(defaults.url);
    expect(head.toLowerCase()).toContain('keep-alive: timeout=65');
  });

  it('are closed once idle for the configured time', async () => {
    const { head, closed } = await getOverSocket(short.url);
    expect(head.toLowerCase()).toContain('keep-alive: timeout=1');
    await closed;
  });

  it.each([['0'], ['999'], ['600001'], ['65s']])('refuses SVC_KEEP_ALIVE_TIMEOUT_MS=%s', (value) => {
    expect(() => loadConfig({ SVC_KEEP_ALIVE_TIMEOUT_MS: value })).toThrow(/SVC_KEEP_ALIVE_TIMEOUT_MS/);
  });
});

describe('stopping with a connection that never sent a byte (a load balancer or browser preconnect)', () => {
  // The test's timeout is below the header timeout (30 s): without the fix, close() waited a minute and more.
  it('closes it at once, writing nothing to it, and the stop completes', async () => {
    const server = await startTestServer();
    const { hostname, port } = new URL(server.url);
    const socket = connect(Number(port), hostname);
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    // A served request on another connection first: the silent one is not the only connection the server has had.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    await server.close();
    await closed;
    expect(received).toBe('');
  });
});
