import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCommand, childrenOf, exitOf, SERVER_BIN, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { postChat } from './support/reliability-http.js';

const TERMINAL = join(import.meta.dirname, 'support/terminal.py');

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
      const res = await postChat(server.url, key, { stream: true, content: 'Hi' });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read();
      const exit = exitOf(server.child);
      server.child.kill('SIGTERM');
      while (!server.stderr().includes('SIGTERM received: finishing')) await sleep(10);
      // Later than one stop sent twice at once (see the test after the next), as a human's second Ctrl-C comes.
      await sleep(300);
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

  it.each(['SIGTERM', 'SIGHUP'] as const)('with --processes 2, a %s to the whole group while the workers start stops every process cleanly (exit 0)', async (signal) => {
    // Its own process group, as under a service manager or a terminal: the signal reaches the workers too.
    const child = spawn(process.execPath, [SERVER_BIN, 'start', '--processes', '2'], { env: env('group'), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.resume();
    const exited = exitOf(child);
    // As soon as a worker exists: it is still loading, long before it listens.
    while (childrenOf(child.pid!).length === 0 && child.exitCode === null) await sleep(5);
    expect(child.exitCode, stderr).toBeNull();
    process.kill(-child.pid!, signal);
    const code = await exited;
    expect(stderr).not.toMatch(/error|Unhandled|EPIPE|    at /);
    expect(stderr).toMatch(new RegExp(`${signal} received while starting: stopped every process|svc stopped`));
    expect(code).toBe(0);
  });

  it('with --processes 2, a SIGHUP to the whole group (its terminal closed) stops every process gracefully, as a SIGTERM does', async () => {
    const child = spawn(process.execPath, [SERVER_BIN, 'start', '--processes', '2'], { env: env('group-hup'), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.resume();
    const exited = exitOf(child);
    try {
      while (!stderr.includes('svc listening on') && child.exitCode === null) await sleep(10);
      const workers = childrenOf(child.pid!);
      expect(workers).toHaveLength(2);
      process.kill(-child.pid!, 'SIGHUP');
      expect(await exited).toBe(0);
      expect(stderr).toMatch(/SIGHUP received: finishing in-flight requests and deliveries in every process…\n(.*\n)*svc stopped \(in-flight requests and deliveries finished in \d+\.\d s\)\n/);
      expect(stderr).not.toMatch(/error|Unhandled|    at /);
      for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
    } finally {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
    }
  });
});

/** A server with a user and a key, and an upstream whose next answer waits until `answer()` is called. */
async function serverWithHeldAnswer(name: string) {
  const upstream = await startFakeUpstream();
  const vars = { ...env(name), SVC_UPSTREAM_BASE_URL: upstream.url };
  adminCommand(['users', 'create', '--email', 'ops@example.com', '--password', 'long-enough-pw'], vars);
  const { key } = JSON.parse(adminCommand(['keys', 'create', '--email', 'ops@example.com', '--json'], vars)) as { key: string };
  let answer!: () => void;
  upstream.nextBehavior({ answer: 'Still here.', silentUntil: new Promise<void>((resolve) => (answer = resolve)) });
  return { upstream, vars, key, answer: () => answer() };
}

/** A streamed completion; resolves once the stream ends, with its text and whether it ended with [DONE]. */
function streamedCompletion(url: string, key: string): Promise<{ status: number; text: string; done: boolean }> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
  }).then(async (res) => {
    const body = await res.text();
    const frames = body.split('\n').filter((line) => line.startsWith('data: {'));
    const text = frames.map((line) => (JSON.parse(line.slice(6)) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '').join('');
    return { status: res.status, text, done: body.endsWith('data: [DONE]\n\n') };
  });
}

async function untilOpenUpstream(upstream: FakeUpstream): Promise<void> {
  while (upstream.open === 0) await sleep(10);
}

/**
 * A server answering a streamed completion held open by its upstream, signalled by `signal` meanwhile; once `signal`
 * has resolved, the answer is let through. Resolves with the completion as its client got it, the server's exit code
 * and its stderr.
 */
async function signalledWhileAnswering(name: string, signal: (server: ServerProcess) => Promise<void>) {
  const { upstream, vars, key, answer } = await serverWithHeldAnswer(name);
  const server = await startServerProcess(vars);
  try {
    const completion = streamedCompletion(server.url, key);
    await untilOpenUpstream(upstream);
    const exit = exitOf(server.child);
    await signal(server);
    answer();
    return { completion: await completion, code: await exit, stderr: server.stderr() };
  } finally {
    await server.stop('SIGKILL');
    await upstream.close();
  }
}

/** Until the server no longer accepts connections: every signal sent before has been handled (or the process is gone). */
async function untilStoppedListening(url: string): Promise<void> {
  while (!(await fetch(`${url}/healthz`).then(() => false, () => true))) await sleep(10);
}

describe('svc-server start when its terminal closes (SIGHUP)', () => {
  it('a SIGHUP stops it gracefully, as a SIGTERM does: the request in flight completes, the same lines, exit 0', async () => {
    const stopped = await signalledWhileAnswering('hup', async (server) => {
      server.child.kill('SIGHUP');
      while (!server.stderr().includes('SIGHUP received: finishing') && server.child.signalCode === null) await sleep(10);
    });
    expect(stopped.completion).toEqual({ status: 200, text: 'Still here.', done: true });
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).toMatch(/SIGHUP received: finishing in-flight requests and deliveries…\n(.*\n)*svc stopped \(in-flight requests and deliveries finished in \d+\.\d s\)\n/);
  });

  it('a second SIGHUP does not cut the graceful stop short (a closed terminal\'s shell and the kernel each send one)', async () => {
    const stopped = await signalledWhileAnswering('hup-twice', async (server) => {
      server.child.kill('SIGHUP');
      while (!server.stderr().includes('SIGHUP received: finishing') && server.child.exitCode === null) await sleep(10);
      server.child.kill('SIGHUP');
      await untilStoppedListening(server.url);
    });
    expect(stopped.completion).toEqual({ status: 200, text: 'Still here.', done: true });
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).not.toContain('received again');
  });

  it('two SIGTERMs at once (GNU timeout signals the process, then its group) are one graceful stop, not a stop now', async () => {
    const stopped = await signalledWhileAnswering('term-twice', async (server) => {
      server.child.kill('SIGTERM');
      server.child.kill('SIGTERM');
      await untilStoppedListening(server.url);
    });
    expect(stopped.completion).toEqual({ status: 200, text: 'Still here.', done: true });
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).not.toContain('received again');
  });

  /**
   * `svc-server start` on a terminal of its own (test/support/terminal.py), which is then closed: the process
   * gets the kernel's SIGHUP, its writes there fail (EIO), and Node restoring the terminal's modes at exit
   * finds it gone. `ready` resolves with the URL once the server listens; `close()` closes the terminal.
   */
  function onTerminal(vars: NodeJS.ProcessEnv, args: string[] = []) {
    const term: ChildProcessWithoutNullStreams = spawn('python3', [TERMINAL, process.execPath, SERVER_BIN, 'start', ...args], { env: vars });
    let out = '';
    term.stdout.on('data', (d) => (out += d));
    term.stderr.on('data', (d) => (out += d));
    const ended = new Promise<void>((resolve) => term.once('close', () => resolve()));
    const ready = (async () => {
      for (;;) {
        const url = /svc listening on (http:\/\/\S+)/.exec(out)?.[1];
        if (url) return url;
        if (term.exitCode !== null) throw new Error(`the server did not start:\n${out}`);
        await sleep(10);
      }
    })();
    return {
      ready,
      /** Closes the terminal; resolves with the server's exit code (negative: the signal that killed it). */
      async close(): Promise<number> {
        term.stdin.end('close\n');
        await ended;
        const code = /\nexit (-?\d+)\n/.exec(out)?.[1];
        if (code === undefined) throw new Error(`no exit code from the terminal:\n${out}`);
        return Number(code);
      },
      kill: () => term.kill('SIGKILL'),
    };
  }

  it('closing the terminal that runs it lets the request in flight complete, and it exits 0', async () => {
    const { upstream, vars, key, answer } = await serverWithHeldAnswer('terminal');
    const terminal = onTerminal(vars);
    try {
      const completion = streamedCompletion(await terminal.ready, key);
      await untilOpenUpstream(upstream);
      const exit = terminal.close();
      exit.catch(() => {}); // Awaited below; a failure before that is the test's.
      // The server is draining (it no longer accepts connections) when the answer comes.
      while (await fetch(`${(await terminal.ready)}/healthz`).then(() => true, () => false)) await sleep(10);
      answer();
      expect(await completion).toEqual({ status: 200, text: 'Still here.', done: true });
      expect(await exit).toBe(0);
    } finally {
      terminal.kill();
      await upstream.close();
    }
  });

  it('with --processes 2, closing its terminal stops every process cleanly (exit 0)', async () => {
    const terminal = onTerminal(env('terminal-group'), ['--processes', '2']);
    try {
      await terminal.ready;
      expect(await terminal.close()).toBe(0);
    } finally {
      terminal.kill();
    }
  });
});
