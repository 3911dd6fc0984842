import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { existsSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { adminCommand, exitOf, SERVER_BIN, SERVER_START_TIMEOUT_MS } from './processes.js';

/** Fails early with a clear message when the binary the process tests spawn is missing. */
export function requireBuiltServer(): void {
  if (!existsSync(SERVER_BIN)) throw new Error(`${SERVER_BIN} is missing: build first (npm run build -w @svc/server)`);
}

/** The test process's environment without SVC_* settings, plus `extra` (loopback, info logs). */
export function processEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  return { ...clean, SVC_HOST: '127.0.0.1', SVC_LOG_LEVEL: 'info', ...extra };
}

/** A port that was free a moment ago (listen on 0, close). */
export async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Runs an admin command of the built binary; returns stdout (throws with stderr on failure). */
export function cli(args: string[], env: NodeJS.ProcessEnv): string {
  return adminCommand(args, env);
}

export interface SpawnedServer {
  child: ChildProcess;
  url: string;
  /** Resolves with the exit code and signal once the process has exited and all it wrote is in `output`. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `svc-server start` (the built binary) and resolves once it listens. Everything it writes (stdout
 * and stderr: logs, banners) is appended to `output` so a suite can search it for secrets.
 */
export function spawnServer(env: NodeJS.ProcessEnv, output: string[], children: ChildProcess[]): Promise<SpawnedServer> {
  const child = spawn(process.execPath, [SERVER_BIN, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  // After its pipes' last bytes ('exit' comes before them): a test reads what it said on its way out.
  const exited = exitOf(child).then(() => ({ code: child.exitCode, signal: child.signalCode }));
  let err = '';
  child.stdout!.on('data', (d: Buffer) => output.push(d.toString('utf8')));
  return new Promise((resolve, reject) => {
    // A start takes 1-2 s alone, and over 20 s on a host running other suites beside this one.
    const timer = setTimeout(() => reject(new Error(`server did not start within ${SERVER_START_TIMEOUT_MS} ms:\n${err.slice(-4000)}`)), SERVER_START_TIMEOUT_MS);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening:\n${err.slice(-4000)}`));
    });
    child.stderr!.on('data', (d: Buffer) => {
      const text = d.toString('utf8');
      output.push(text);
      if (err.length < 100_000) err += text;
      const match = /svc listening on (http:\/\/\S+)/.exec(err);
      if (match) {
        clearTimeout(timer);
        resolve({
          child,
          url: match[1]!,
          exited,
          kill(signal) {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal);
            return exited;
          },
        });
      }
    });
  });
}

/** SIGKILLs every child still running (for afterEach/afterAll). */
export async function killAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.splice(0).map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    }),
  );
}

export type ReceiverMode = 'up' | 'error' | 'hang' | 'down';

export interface Arrival {
  deliveryId: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /** The mode the receiver was in: only 'up' answers 2xx. */
  mode: ReceiverMode;
}

/**
 * A webhook receiver on a fixed port that can flap: 'up' answers 200, 'error' 500, 'hang' never answers,
 * 'down' closes the listener (connections refused) and drops open connections. Every request that
 * reached it is recorded with its raw bytes.
 */
export class FlappingReceiver {
  readonly arrivals: Arrival[] = [];
  /** Counts of requests per mode, and of 'down' periods. */
  readonly faults = { error: 0, hang: 0, down: 0 };
  mode: ReceiverMode = 'up';
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private flapTimer: NodeJS.Timeout | undefined;

  private constructor(readonly port: number) {}

  static async start(): Promise<FlappingReceiver> {
    const receiver = new FlappingReceiver(await freePort());
    await receiver.listen();
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  private async listen(): Promise<void> {
    if (this.server) return;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const mode = this.mode;
        this.arrivals.push({ deliveryId: String(req.headers['x-svc-delivery']), headers: req.headers, raw: Buffer.concat(chunks), mode });
        if (mode === 'hang') {
          this.faults.hang++;
          return;
        }
        if (mode === 'error') {
          this.faults.error++;
          res.writeHead(500, { 'content-type': 'text/plain' }).end('receiver is failing');
          return;
        }
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    server.keepAliveTimeout = 1000;
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    for (let tries = 0; ; tries++) {
      try {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(this.port, '127.0.0.1', () => {
            server.off('error', reject);
            resolve();
          });
        });
        break;
      } catch (err) {
        if (tries >= 20) throw err;
        await delay(50);
      }
    }
    this.server = server;
  }

  private async unlisten(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  async setMode(mode: ReceiverMode): Promise<void> {
    if (mode === 'down' && this.mode !== 'down') this.faults.down++;
    this.mode = mode;
    if (mode === 'down') await this.unlisten();
    else await this.listen();
  }

  /** Cycles through `pattern` (mode, milliseconds) until `stopFlapping`. */
  flap(pattern: Array<[ReceiverMode, number]>): void {
    let i = 0;
    const step = () => {
      const [mode, ms] = pattern[i++ % pattern.length]!;
      void this.setMode(mode).then(() => {
        if (this.flapTimer !== undefined) this.flapTimer = setTimeout(step, ms);
      });
    };
    this.flapTimer = setTimeout(step, 0);
  }

  async stopFlapping(final: ReceiverMode = 'up'): Promise<void> {
    clearTimeout(this.flapTimer);
    this.flapTimer = undefined;
    await delay(20);
    await this.setMode(final);
  }

  /** Polls until `predicate` holds; throws after `timeoutMs`. */
  async waitFor(predicate: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`receiver: condition not met after ${timeoutMs} ms (${this.arrivals.length} arrivals)`);
      await delay(50);
    }
  }

  async close(): Promise<void> {
    clearTimeout(this.flapTimer);
    this.flapTimer = undefined;
    await this.unlisten();
  }
}

export interface LoadResult {
  /** x-request-id of every request whose full response (200 + body, or SSE through [DONE]) arrived. */
  completed: string[];
  /** Requests whose response did not arrive in full (server killed, refused, reset). */
  interrupted: number;
  /** Full responses with a status other than 200. */
  otherStatus: Map<number, number>;
  sent: number;
}

/**
 * Sends `total` chat completions with `concurrency` workers against whatever `baseUrl()` returns now
 * (the server may be restarting); every 4th request is streamed. Bounded by `deadlineMs` overall.
 */
export async function runLoad(options: {
  baseUrl: () => string;
  token: string;
  total: number;
  concurrency: number;
  deadlineMs: number;
  onCompleted?: (count: number) => void;
}): Promise<LoadResult> {
  const result: LoadResult = { completed: [], interrupted: 0, otherStatus: new Map(), sent: 0 };
  const deadline = Date.now() + options.deadlineMs;
  let next = 0;
  const one = async (i: number): Promise<void> => {
    const stream = i % 4 === 3;
    const res = await fetch(`${options.baseUrl()}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${options.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', stream, messages: [{ role: 'user', content: `Request number ${i}: say hello.` }] }),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    const id = res.headers.get('x-request-id') ?? '';
    if (res.status !== 200) {
      result.otherStatus.set(res.status, (result.otherStatus.get(res.status) ?? 0) + 1);
      return;
    }
    const complete = stream ? text.includes('data: [DONE]') : (JSON.parse(text) as { id?: string }).id === id;
    if (!complete) throw new Error('incomplete response');
    result.completed.push(id);
    options.onCompleted?.(result.completed.length);
  };
  const worker = async (): Promise<void> => {
    while (next < options.total && Date.now() < deadline) {
      const i = next++;
      for (;;) {
        try {
          await one(i);
          result.sent++;
        } catch (err) {
          // Refused: the server is restarting and never saw the request; send the same one again.
          if (refused(err) && Date.now() < deadline) {
            await delay(50);
            continue;
          }
          result.sent++;
          result.interrupted++;
        }
        break;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return result;
}

function refused(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string } }).cause;
  return cause?.code === 'ECONNREFUSED';
}

/** Every secret found in `text`, by label (empty when none leaked). */
export function leakedSecrets(text: string, secrets: Record<string, string>): string[] {
  return Object.entries(secrets)
    .filter(([, secret]) => secret.length >= 8 && text.includes(secret))
    .map(([label]) => label);
}
