import pino, { type Logger } from 'pino';
import { outputGone } from './output-gone.js';
import { storageFault } from '../storage/storage-fault.js';
import { StorageFaultLog } from './storage-fault-log.js';

export type { Logger };

/** Paths that must never reach a log line, whatever the level. */
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-svc-signature"]',
  'authorization',
  'apiKey',
  'api_key',
  'key',
  'token',
  'secret',
  'signingSecret',
  'signing_secret',
  'password',
];

/** Bytes of log lines gathered before a write, and the longest a line waits for one. */
const BATCH_BYTES = 4096;
const BATCH_MS = 100;

/**
 * The process logger (pino, JSON lines) on stderr. Lines are written in batches of up to 4 KiB, at least
 * every 100 ms and at exit (`BatchedStderr`). A SIGKILL can lose the last 100 ms of lines (never data:
 * deliveries are in the database). `destination` lets tests capture the stream.
 *
 * @example
 * const logger = createLogger('info');
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream, options: LoggerOptions = {}): Logger {
  const base = options.multiProcess ? { service: 'svc', pid: process.pid } : { service: 'svc' };
  // Lines of a database outage go through `faults` (rate-limited, with counts); its own summaries pass as they are.
  let summarising = false;
  const faults = new StorageFaultLog((level, fields, msg) => {
    summarising = true;
    try {
      logger[level](fields, msg);
    } finally {
      summarising = false;
    }
  });
  const logger: Logger = pino(
    {
      level,
      base,
      redact: { paths: REDACT, censor: '[redacted]' },
      serializers: { err: serializeError },
      hooks: {
        logMethod(args, method) {
          const [first, second] = args as unknown[];
          const msg = typeof first === 'string' ? first : typeof second === 'string' ? second : '';
          if (summarising || faults.admit(first, msg)) method.apply(this, args);
        },
      },
    },
    destination ?? BatchedStderr.shared(options.multiProcess),
  );
  faultLogs.set(logger, faults);
  return logger;
}

const faultLogs = new WeakMap<Logger, StorageFaultLog>();

/**
 * The rate limit of `logger`'s database-outage lines (see StorageFaultLog), to give it the probe that tells when
 * the database is back; undefined for a logger `createLogger` did not make.
 *
 * @example
 * storageFaultsOf(logger)?.watch(() => store.unready());
 */
export function storageFaultsOf(logger: Logger): StorageFaultLog | undefined {
  return faultLogs.get(logger);
}

/**
 * pino's error serializer, except for a fault of the database's surroundings (a full disk, a lock, Postgres
 * restarting): expected in operation, it is logged as what to do about it, without a stack trace.
 */
function serializeError(err: unknown): unknown {
  const fault = storageFault(err);
  if (fault === undefined) return pino.stdSerializers.err(err as Error);
  const { name, code, message } = err as { name?: string; code?: unknown; message?: string };
  return { type: name, code, message, fault };
}

export interface LoggerOptions {
  /**
   * Several server processes write to one stderr (node:cluster workers): every line carries `pid`, and each
   * write stays within PIPE_BUF so the kernel never interleaves two processes' lines.
   */
  multiProcess?: boolean;
}

/** Writes to a pipe up to this size are atomic (POSIX minimum; 4 KiB on Linux). */
const PIPE_BUF = 4096;

/**
 * Log lines gathered in memory and written to stderr in one write per 4 KiB or 100 ms, and at exit.
 * One write per line costs a syscall (or, with pino's asynchronous destination, a thread-pool hand-off)
 * each, a sizeable share of a proxied request's CPU when the server has one core. It is not sonic-boom's
 * `minLength` either: that appends each line to a growing string and measures the whole string's byte length
 * per line, which copies the batch again at every line and leaves that much garbage per request.
 * `process.stderr` writes synchronously to files and pipes on Linux, so a batch is one `write`
 * and nothing is left in flight at exit. Once the reader is gone (a closed pipe, a hung-up terminal) lines are dropped. `atomic`
 * batches stay within PIPE_BUF bytes (shared with other processes: a longer write may be interleaved).
 */
export class BatchedStderr implements pino.DestinationStream {
  private static instance: BatchedStderr | undefined;
  private lines: string[] = [];
  private bytes = 0;
  private broken = false;

  /** One per process (stderr is one): every logger of the process shares its batch and its exit flush. */
  static shared(atomic = false): BatchedStderr {
    if (!BatchedStderr.instance) {
      const batch = (BatchedStderr.instance = new BatchedStderr(process.stderr, atomic));
      setInterval(() => batch.flush(), BATCH_MS).unref();
      process.on('exit', () => batch.flush());
    }
    return BatchedStderr.instance;
  }

  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly atomic = false,
  ) {
    out.on('error', (err: NodeJS.ErrnoException) => {
      if (!outputGone(err)) throw err;
      this.broken = true;
      this.lines = [];
    });
  }

  write(line: string): void {
    if (this.broken) return;
    if (this.atomic) return this.writeAtomic(line);
    this.lines.push(line);
    this.bytes += line.length;
    if (this.bytes >= BATCH_BYTES) this.flush();
  }

  /** Flushes before a line would take the batch past PIPE_BUF bytes (counted in bytes: lines may hold UTF-8). */
  private writeAtomic(line: string): void {
    const size = Buffer.byteLength(line);
    if (this.bytes + size > PIPE_BUF) this.flush();
    this.lines.push(line);
    this.bytes += size;
    if (this.bytes >= PIPE_BUF) this.flush();
  }

  flush(): void {
    if (this.lines.length === 0) return;
    const data = this.lines.length === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.bytes = 0;
    this.out.write(data);
  }
}
