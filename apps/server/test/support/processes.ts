import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { resolve } from 'node:path';
import type { StartOptions } from '../../src/server.js';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { hashPassword } from '../../src/auth/passwords.js';
import { openStore } from '../../src/storage/store.js';

export const SERVER_BIN = resolve(import.meta.dirname, '../../dist/bin.js');

/** The test process's environment without any SVC_* setting, plus `extra`. */
export function serverEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  return { ...clean, SVC_HOST: '127.0.0.1', SVC_PORT: '0', SVC_LOG_LEVEL: 'warn', ...extra };
}

/**
 * `child`'s exit code once it has exited and what it wrote has been read to the end: node emits 'exit' before the
 * pipes' last bytes arrive ('close' after them). A worker left behind may hold the pipes open: then `graceMs` after
 * the exit.
 */
export function exitOf(child: ChildProcess, graceMs = 5_000): Promise<number | null> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      resolve(child.exitCode);
    };
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    if (exited() && [child.stdout, child.stderr].every((s) => !s || s.closed)) return finish();
    child.once('close', finish);
    const afterExit = () => (timer = setTimeout(finish, graceMs));
    if (exited()) afterExit();
    else child.once('exit', afterExit);
  });
}

/** The pids of `pid`'s child processes (Linux: /proc), e.g. the workers of a `--processes` primary. */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * How long an admin command may take before it counts as hung: `migrate` and `users create` (a password hash at
 * OWASP's cost) took over 30 s on a host at load 35, where a test's own budget is minutes.
 */
const ADMIN_COMMAND_TIMEOUT_MS = 120_000;

/** Runs an admin command of the built binary and returns its stdout (throws with stderr on failure). */
export function adminCommand(args: string[], env: NodeJS.ProcessEnv): string {
  const r = spawnSync(process.execPath, [SERVER_BIN, ...args], { env, encoding: 'utf8', timeout: ADMIN_COMMAND_TIMEOUT_MS });
  if (r.status !== 0) throw new Error(`svc-server ${args.join(' ')} failed (${r.status ?? `killed after ${ADMIN_COMMAND_TIMEOUT_MS} ms`}): ${r.stderr}`);
  return r.stdout;
}

/**
 * `adminCommand` without blocking the test process: a relay or fake server that lives in it keeps serving
 * while the command runs (on a loaded host a CLI start takes a second or more).
 */
export async function adminCommandAsync(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  try {
    return (await promisify(execFile)(process.execPath, [SERVER_BIN, ...args], { env, encoding: 'utf8', timeout: ADMIN_COMMAND_TIMEOUT_MS })).stdout;
  } catch (err) {
    const { stderr, killed } = err as { stderr?: string; killed?: boolean };
    throw new Error(`svc-server ${args.join(' ')} failed${killed ? ` (killed after ${ADMIN_COMMAND_TIMEOUT_MS} ms)` : ''}: ${stderr ?? String(err)}`);
  }
}

/** The password hash of every user `userWithKey` makes: made once, since scrypt at OWASP's cost takes a while. */
let passwordHash: Promise<string> | undefined;

/**
 * Migrates the database at `databaseUrl` and makes a user whose email starts with `emailPrefix` and a key of theirs,
 * in this process, through the store, as `svc-server migrate`, `users create` and `keys create` do. For tests about
 * something else: those three commands are three process starts, which took seconds each on a loaded host.
 */
export async function userWithKey(databaseUrl: string, emailPrefix: string): Promise<{ token: string }> {
  const store = await openStore(databaseUrl);
  try {
    const now = Date.now();
    const email = `${emailPrefix}-${randomBytes(4).toString('hex')}@example.test`;
    const user = await store.users.create({ email, passwordHash: await (passwordHash ??= hashPassword('long-enough-pw')), now });
    const key = generateApiKey();
    await store.keys.create({ userId: user.id, name: 'default', prefix: key.prefix, keyHash: key.hash, now });
    return { token: key.token };
  } finally {
    await store.close();
  }
}

/**
 * The env of a server on `databaseUrl` (Postgres) whose statements wait 10 minutes for a lock (svc's own default is
 * 10 s): longer than any test, as a stalled database holds them; SVC_SHUTDOWN_TIMEOUT_MS is 2 s. Migrated, with a
 * user whose email starts with `emailPrefix` and a key of theirs (`userWithKey`).
 */
export async function stallingPostgresServer(databaseUrl: string, upstreamUrl: string, emailPrefix: string): Promise<{ env: NodeJS.ProcessEnv; token: string }> {
  const url = new URL(databaseUrl);
  url.searchParams.set('lock_timeout', '600000');
  const env = serverEnv({
    SVC_DATABASE_URL: url.toString(),
    SVC_SECRET_KEY: randomBytes(32).toString('base64'),
    SVC_UPSTREAM_BASE_URL: upstreamUrl,
    SVC_SHUTDOWN_TIMEOUT_MS: '2000',
    SVC_LOG_LEVEL: 'info',
  });
  const { token } = await userWithKey(url.toString(), emailPrefix);
  return { env, token };
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * How long a server process may take to say it listens before it counts as hung: a start takes 1-2 s alone, over 30 s
 * on this 2-core host at load 15 (reliability-storage's write-lock test failed on a 30 s bound), over 60 s at load 40.
 */
export const SERVER_START_TIMEOUT_MS = 100_000;

/** Starts the built server as `start-server.mjs` does, with `StartOptions` of a test's own. */
const START_SERVER = resolve(import.meta.dirname, 'start-server.mjs');

/**
 * Starts `svc-server start [args…]` and resolves once it listens (rejects after `timeoutMs`). With `startOptions`
 * (what only a test sets, such as a short background lease) it starts the same server through `start-server.mjs`
 * instead, without args and without a graceful stop: stop it with SIGKILL.
 */
export function startServerProcess(
  env: NodeJS.ProcessEnv,
  args: string[] = [],
  { timeoutMs = SERVER_START_TIMEOUT_MS, startOptions }: { timeoutMs?: number; startOptions?: Pick<StartOptions, 'backgroundLeaseMs'> } = {},
): Promise<ServerProcess> {
  const command = startOptions ? [START_SERVER, JSON.stringify(startOptions)] : [SERVER_BIN, 'start', ...args];
  const child = spawn(process.execPath, command, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stdout!.resume();
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      // Not left running behind the failed test.
      child.kill('SIGKILL');
      reject(new Error(`server did not start within ${timeoutMs} ms:\n${err}`));
    }, timeoutMs);
    let listening = false;
    // With all it wrote ('exit' comes before the pipes' last bytes).
    void exitOf(child).then((code) => {
      clearTimeout(timer);
      if (!listening) reject(new Error(`server exited with ${code}:\n${err}`));
    });
    child.stderr!.on('data', (d) => {
      err += d;
      const match = /svc listening on (http:\/\/\S+)/.exec(err);
      if (match) {
        clearTimeout(timer);
        listening = true;
        resolvePromise({
          child,
          url: match[1]!,
          stderr: () => err,
          stop: (signal = 'SIGTERM') =>
            new Promise((done) => {
              if (child.exitCode !== null || child.signalCode !== null) return done(exitOf(child));
              void exitOf(child).then(done);
              child.kill(signal);
            }),
        });
      }
    });
  });
}
