import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach } from 'vitest';
import { startReceiver, type Receiver } from './receiver.js';

export const CLI_BIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'bin.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout exactly as bytes, for byte-for-byte comparisons. */
  stdoutBytes: Buffer;
}

export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stdout or stderr (already written or future). */
  waitFor(stream: 'stdout' | 'stderr', pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exited: Promise<CliResult>;
}

export interface CliOptions {
  cwd: string;
  env?: Record<string, string | undefined>;
  /** `svc-cli … > file` in a terminal. */
  stdoutToFile?: string;
  /** `stream` written to a terminal `columns` wide, the other one to a pipe (without it, both are pipes). */
  terminal?: { stream: 'stdout' | 'stderr'; columns: number };
}

const running = new Set<ChildProcess>();

/** Environment for the CLI: no SVC_* settings inherited from the developer's shell, no colours. */
function cliEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('SVC_') && name !== 'FORCE_COLOR') base[name] = value;
  const merged: NodeJS.ProcessEnv = { ...base, NO_COLOR: '1', ...env };
  for (const [name, value] of Object.entries(merged)) if (value === undefined) delete merged[name];
  return merged;
}

/**
 * Starts `node dist/bin.js ARGS` in `cwd`. Every process started here is killed by `killAll()`.
 *
 * @example
 * const listen = startCli(['listen', '--port', '0'], { cwd });
 * const [, url] = await listen.waitFor('stderr', /Listening on (\S+)/);
 */
export function startCli(args: string[], options: CliOptions): CliProcess {
  const command = [process.execPath, CLI_BIN, ...args].map(shellQuote).join(' ');
  const spawnOptions = { cwd: options.cwd, env: cliEnv(options.env ?? {}) };
  let child: ChildProcess;
  let sources: { stdout: Readable; stderr: Readable };
  // The stream written to a terminal: its newlines arrive as the terminal's \r\n.
  let onTerminal: 'stdout' | 'stderr' | undefined;
  if (options.terminal !== undefined) {
    // One stream on a terminal `columns` wide (util-linux's script gives it one; stty sets its width), the other
    // a pipe (fd 3). What the terminal shows arrives as script's stdout.
    const { stream, columns } = options.terminal;
    const other = stream === 'stdout' ? '2>&3' : '>&3';
    child = spawn('script', ['-qfec', `stty cols ${columns} rows 24 && exec ${command} ${other}`, '/dev/null'], { ...spawnOptions, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    const terminal = child.stdout!;
    const pipe = child.stdio[3] as Readable;
    sources = stream === 'stdout' ? { stdout: terminal, stderr: pipe } : { stdout: pipe, stderr: terminal };
    onTerminal = stream;
  } else if (options.stdoutToFile !== undefined) {
    // `svc-cli … > file` in a terminal (util-linux's script gives it one): stdout is not a TTY, stderr is; what
    // the terminal shows (stderr) arrives as this process's stdout.
    child = spawn('script', ['-qfec', `${command} > ${shellQuote(options.stdoutToFile)}`, '/dev/null'], { ...spawnOptions, stdio: ['ignore', 'pipe', 'pipe'] });
    sources = { stdout: child.stdout!, stderr: child.stderr! };
  } else {
    child = spawn(process.execPath, [CLI_BIN, ...args], { ...spawnOptions, stdio: ['ignore', 'pipe', 'pipe'] });
    sources = { stdout: child.stdout!, stderr: child.stderr! };
  }
  running.add(child);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const waiters = new Set<() => void>();
  const notify = (): void => {
    for (const waiter of waiters) waiter();
  };
  sources.stdout.on('data', (chunk: Buffer) => {
    out.push(chunk);
    notify();
  });
  sources.stderr.on('data', (chunk: Buffer) => {
    err.push(chunk);
    notify();
  });
  const text = (stream: 'stdout' | 'stderr'): string => {
    const written = Buffer.concat(stream === 'stdout' ? out : err).toString('utf8');
    return stream === onTerminal ? written.replace(/\r\n/g, '\n') : written;
  };
  const exited = new Promise<CliResult>((resolve) => {
    child.on('close', (code, signal) => {
      running.delete(child);
      notify();
      resolve({ code, signal, stdout: text('stdout'), stderr: text('stderr'), stdoutBytes: Buffer.concat(out) });
    });
  });
  return {
    child,
    stdout: () => text('stdout'),
    stderr: () => text('stderr'),
    exited,
    // A guard against a hung CLI, not a measure: `listen` took over 10 s to print Ready on a 2-core host at load 15.
    waitFor(stream, pattern, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const match = text(stream).match(pattern);
          if (match) {
            cleanup();
            resolve(match);
            return true;
          }
          if (child.exitCode !== null || child.signalCode !== null) {
            cleanup();
            reject(new Error(`svc-cli exited before ${pattern} appeared on ${stream}.\nstdout: ${text('stdout')}\nstderr: ${text('stderr')}`));
            return true;
          }
          return false;
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`${pattern} did not appear on ${stream} within ${timeoutMs} ms.\nstdout: ${text('stdout')}\nstderr: ${text('stderr')}`));
        }, timeoutMs);
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(waiter);
        };
        const waiter = (): void => void check();
        if (!check()) waiters.add(waiter);
      });
    },
  };
}

function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Runs the CLI to completion. */
export function runCli(args: string[], options: CliOptions): Promise<CliResult> {
  return startCli(args, options).exited;
}

/** Starts `svc-cli listen --port 0 …` and resolves once it printed its Ready line. */
export async function startListen(args: string[], options: CliOptions): Promise<CliProcess & { url: string }> {
  const proc = startCli(['listen', '--port', '0', ...args], options);
  // Tolerates colour codes around "Ready!" and the URL (FORCE_COLOR tests).
  const match = await proc.waitFor('stderr', /Ready!(?:\u001b\[\d+m)? Listening on (?:\u001b\[\d+m)?(http[^\s\u001b]+)(?:\u001b\[\d+m)? \(\^C to quit\)/);
  return Object.assign(proc, { url: match[1]! });
}

/** Kills every CLI process still running (afterEach). */
export async function killAll(): Promise<void> {
  await Promise.all(
    [...running].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('close', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

/** A fresh working directory (the default delivery log lands in it). */
export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'svc-cli-test-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/**
 * A per-test sandbox: a fresh temp dir (the CLI's cwd) and the receivers a test starts, all removed after each
 * test together with every CLI process still running.
 */
export function useSandbox() {
  let dir: ReturnType<typeof tempDir> | undefined;
  const receivers: Receiver[] = [];
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(async () => {
    await killAll();
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    dir?.remove();
  });
  return {
    get path(): string {
      if (!dir) throw new Error('useSandbox().path is only there inside a test');
      return dir.path;
    },
    async receiver(options: Parameters<typeof startReceiver>[0] = {}): Promise<Receiver> {
      const r = await startReceiver(options);
      receivers.push(r);
      return r;
    },
  };
}
