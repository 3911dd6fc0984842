import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { chat, until, type ChatOutcome } from './support/reliability-http.js';
import { FlappingReceiver, cli, killAll, leakedSecrets, processEnv, requireBuiltServer, spawnServer } from './support/reliability-kit.js';

/**
 * Graceful shutdown under load: SIGTERM to the built server during a burst of slow requests. The
 * requests in flight complete, new connections are refused, the process exits 0, and after a restart on
 * the same database every completed request's delivery arrives.
 */

const SECRET = `whsec_${randomBytes(12).toString('hex')}`;
const children: ChildProcess[] = [];
const output: string[] = [];
let upstream: FakeUpstream;
let receiver: FlappingReceiver | undefined;
let dir: string;

beforeAll(async () => {
  requireBuiltServer();
  // Every answer takes ~0.6 s to stream (12 words, 50 ms apart) after 200 ms: the burst is in flight at SIGTERM.
  upstream = await startFakeUpstream({ answer: 'one two three four five six seven eight nine ten eleven twelve', trickle: { intervalMs: 50 }, delayMs: 200 });
  dir = mkdtempSync(join(tmpdir(), 'svc-rel-shutdown-'));
});

afterEach(async () => {
  await killAll(children);
  await receiver?.close();
});

afterAll(async () => {
  await upstream?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('graceful shutdown under load', () => {
  it('SIGTERM during a burst: in-flight requests complete, new connections refused, exit 0, no delivery lost', async () => {
    receiver = await FlappingReceiver.start();
    // The receiver is down while the first server runs: every delivery is still pending at shutdown.
    await receiver.setMode('down');
    const env = processEnv({
      SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`,
      SVC_PORT: '0',
      SVC_UPSTREAM_BASE_URL: upstream.url,
      SVC_RATE_LIMIT_RPM: '100000',
      SVC_WEBHOOK_TIMEOUT_MS: '500',
      SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s',
    });
    cli(['users', 'create', '--email', 'owner@example.test', '--password', 'correct horse battery'], env);
    const { key } = JSON.parse(
      cli(['keys', 'create', '--email', 'owner@example.test', '--webhook-url', receiver.url, '--signing-secret', SECRET, '--json'], env),
    ) as { key: string };

    const first = await spawnServer(env, output, children);
    const burst = 40;
    const before = upstream.requests.length;
    const outcomes = Array.from({ length: burst }, (_, i) =>
      chat(first.url, key, { stream: i % 2 === 0, content: `Burst ${i}` }).then(
        (out): ChatOutcome | Error => out,
        (err: Error) => err,
      ),
    );
    await until(() => upstream.requests.length - before >= burst, 10_000, 'burst in flight');
    const termAt = performance.now();
    void first.kill('SIGTERM');

    // Shortly after SIGTERM, while the burst is still streaming, the port refuses new connections.
    const { port } = new URL(first.url);
    const refused = await until(
      () =>
        new Promise<boolean>((resolve) => {
          const socket = connect(Number(port), '127.0.0.1');
          socket.once('connect', () => {
            socket.destroy();
            resolve(false);
          });
          socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
        }),
      2000,
      'new connections refused',
    );
    expect(refused).toBe(true);
    expect(first.child.exitCode, 'the server exited before its in-flight requests finished').toBeNull();

    const results = await Promise.all(outcomes);
    const completed: string[] = [];
    for (const r of results) {
      expect(r, String(r)).not.toBeInstanceOf(Error);
      const out = r as ChatOutcome;
      expect(out.status).toBe(200);
      if (out.events) expect(out.events.at(-1)).toBe('[DONE]');
      else expect(out.body.choices[0].message.content).toContain('twelve');
      completed.push(out.requestId);
    }
    const exit = await first.exited;
    const exitMs = performance.now() - termAt;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(receiver.arrivals).toHaveLength(0);

    // Restart on the same database with the receiver up: every accepted delivery arrives, once.
    await receiver.setMode('up');
    const second = await spawnServer(env, output, children);
    const delivered = () => new Set(receiver!.arrivals.map((a) => JSON.parse(a.raw.toString('utf8')).request_id as string));
    await receiver.waitFor(() => completed.every((id) => delivered().has(id)), 20_000);
    expect(new Set(receiver.arrivals.map((a) => a.deliveryId)).size).toBe(completed.length);
    expect((await second.kill('SIGTERM')).code).toBe(0);
    console.info(`[reliability] graceful shutdown: ${burst} in flight at SIGTERM, ${completed.length} completed, exit 0 after ${Math.round(exitMs)} ms, ${delivered().size} delivered after restart, 0 lost`);
    expect(leakedSecrets(output.join(''), { key, SECRET })).toEqual([]);
  });

  it('SIGTERM with streams longer than SVC_SHUTDOWN_TIMEOUT_MS: they are cut, the process exits 0, each cut stream is audited (499)', async () => {
    // 40 words, 300 ms apart: 12 s a stream, far past the 500 ms the stop waits for them.
    const slow = await startFakeUpstream({ answer: Array.from({ length: 40 }, (_, i) => `w${i}`).join(' '), trickle: { intervalMs: 300 } });
    try {
      receiver = await FlappingReceiver.start();
      await receiver.setMode('down');
      const env = processEnv({
        SVC_DATABASE_URL: `sqlite:${join(mkdtempSync(join(dir, 'cut-')), 'svc.db')}`,
        SVC_PORT: '0',
        SVC_UPSTREAM_BASE_URL: slow.url,
        SVC_RATE_LIMIT_RPM: '100000',
        SVC_SHUTDOWN_TIMEOUT_MS: '500',
        SVC_WEBHOOK_TIMEOUT_MS: '500',
        SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s,1s,1s,1s,1s,1s,1s,1s',
      });
      cli(['users', 'create', '--email', 'owner@example.test', '--password', 'correct horse battery'], env);
      const { key } = JSON.parse(cli(['keys', 'create', '--email', 'owner@example.test', '--webhook-url', receiver.url, '--signing-secret', SECRET, '--json'], env)) as { key: string };
      const first = await spawnServer(env, output, children);
      const streams = 6;
      const outcomes = Array.from({ length: streams }, (_, i) => chat(first.url, key, { stream: true, content: `Long ${i}` }).then((out) => out, (err: Error) => err));
      await until(() => slow.requests.length >= streams, 10_000, 'streams in flight');
      void first.kill('SIGTERM');
      expect(await first.exited).toEqual({ code: 0, signal: null });
      // Each client saw its stream end before its [DONE].
      for (const r of await Promise.all(outcomes)) if (!(r instanceof Error)) expect(r.events?.at(-1)).not.toBe('[DONE]');
      expect(output.join('')).toContain('cutting the requests still open after SVC_SHUTDOWN_TIMEOUT_MS');

      await receiver.setMode('up');
      const second = await spawnServer(env, output, children);
      await receiver.waitFor(() => receiver!.arrivals.length >= streams, 20_000);
      const statuses = receiver.arrivals.map((a) => (JSON.parse(a.raw.toString('utf8')) as { status_code: number }).status_code);
      expect(statuses).toEqual(Array.from({ length: streams }, () => 499));
      expect((await second.kill('SIGTERM')).code).toBe(0);
    } finally {
      await slow.close();
    }
  });
});

