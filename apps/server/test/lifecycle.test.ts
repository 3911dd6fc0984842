import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCommand, SERVER_BIN, serverEnv, startServerProcess } from './support/processes.js';
import { startFakeUpstream } from './support/fake-upstream.js';

let dataDir: string;
beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'svc-lifecycle-'));
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

// A directory each: svc marks the directory of its database as its own.
const env = (name: string) => {
  const dir = mkdtempSync(join(dataDir, `${name}-`));
  return serverEnv({ SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`, SVC_UPSTREAM_BASE_URL: 'http://127.0.0.1:9' });
};

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

describe('svc-server start under a supervisor', () => {
  it('says it stopped, and how long draining took, after a SIGTERM', async () => {
    const server = await startServerProcess(env('single'));
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.stderr()).toMatch(/SIGTERM received: finishing in-flight requests and deliveries…\n.*svc stopped \(in-flight requests and deliveries finished in \d+\.\d s\)\n/);
  });

  it('a second SIGTERM while draining stops at once, says so, and exits with the signal’s code', async () => {
    const upstream = await startFakeUpstream();
    // A stream that never ends keeps the graceful stop waiting.
    upstream.setBehavior({ hangMidStream: true });
    const twice = { ...env('twice'), SVC_UPSTREAM_BASE_URL: upstream.url };
    adminCommand(['migrate'], twice);
    adminCommand(['users', 'create', '--email', 'ops@example.com', '--password', 'long-enough-pw'], twice);
    const { key } = JSON.parse(adminCommand(['keys', 'create', '--email', 'ops@example.com', '--json'], twice)) as { key: string };
    const server = await startServerProcess(twice);
    try {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read();
      const exit = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
      server.child.kill('SIGTERM');
      while (!server.stderr().includes('SIGTERM received: finishing')) await sleep(10);
      server.child.kill('SIGTERM');
      expect(await exit).toBe(143);
      expect(server.stderr()).toContain('SIGTERM received again: stopping now');
      expect(server.stderr()).not.toContain('svc stopped');
      await reader.cancel().catch(() => {});
    } finally {
      await server.stop('SIGKILL');
      await upstream.close();
    }
  });

  it('with --processes 2, a SIGTERM to the whole group while the workers start stops every process cleanly (exit 0)', { timeout: 90_000 }, async () => {
    // Its own process group, as under a service manager or a terminal: the signal reaches the workers too.
    const child = spawn(process.execPath, [SERVER_BIN, 'start', '--processes', '2'], { env: env('group'), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.resume();
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // As soon as a worker exists: it is still loading, long before it listens.
    while (childrenOf(child.pid!).length === 0 && child.exitCode === null) await sleep(5);
    expect(child.exitCode, stderr).toBeNull();
    process.kill(-child.pid!, 'SIGTERM');
    const code = await exited;
    expect(stderr).not.toMatch(/error|Unhandled|EPIPE|    at /);
    expect(stderr).toMatch(/SIGTERM received while starting: stopped every process|svc stopped/);
    expect(code).toBe(0);
  });
});
