import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { resolve } from 'node:path';

export const SERVER_BIN = resolve(import.meta.dirname, '../../dist/bin.js');

/** The test process's environment without any SVC_* setting, plus `extra`. */
export function serverEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  return { ...clean, SVC_HOST: '127.0.0.1', SVC_PORT: '0', SVC_LOG_LEVEL: 'warn', ...extra };
}

/** Runs an admin command of the built binary and returns its stdout (throws with stderr on failure). */
export function adminCommand(args: string[], env: NodeJS.ProcessEnv): string {
  const r = spawnSync(process.execPath, [SERVER_BIN, ...args], { env, encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`svc-server ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/**
 * `adminCommand` without blocking the test process: a relay or fake server that lives in it keeps serving
 * while the command runs (on a loaded host a CLI start takes a second or more).
 */
export async function adminCommandAsync(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  try {
    return (await promisify(execFile)(process.execPath, [SERVER_BIN, ...args], { env, encoding: 'utf8', timeout: 30_000 })).stdout;
  } catch (err) {
    throw new Error(`svc-server ${args.join(' ')} failed: ${(err as { stderr?: string }).stderr ?? String(err)}`);
  }
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `svc-server start [args…]` and resolves once it listens (rejects after `timeoutMs`). */
export function startServerProcess(env: NodeJS.ProcessEnv, args: string[] = [], { timeoutMs = 30_000 } = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, [SERVER_BIN, 'start', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stdout!.resume();
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${err}`)), timeoutMs);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${err}`));
    };
    child.once('exit', onExit);
    child.stderr!.on('data', (d) => {
      err += d;
      const match = /svc listening on (http:\/\/\S+)/.exec(err);
      if (match) {
        clearTimeout(timer);
        child.off('exit', onExit);
        resolvePromise({
          child,
          url: match[1]!,
          stderr: () => err,
          stop: (signal = 'SIGTERM') =>
            new Promise((done) => {
              if (child.exitCode !== null || child.signalCode !== null) return done(child.exitCode);
              child.once('exit', (code) => done(code));
              child.kill(signal);
            }),
        });
      }
    });
  });
}
