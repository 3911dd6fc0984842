import pino, { type Logger } from 'pino';

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
 * every 100 ms and at exit: one asynchronous write per line costs a thread-pool hand-off each, ~10 % of a
 * proxied request's CPU when the server has one core. A SIGKILL can lose the last 100 ms of lines (never
 * data: deliveries are in the database). `destination` lets tests capture the stream.
 *
 * @example
 * const logger = createLogger('info');
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino({ level, base: { service: 'svc' }, redact: { paths: REDACT, censor: '[redacted]' } }, destination ?? batchedStderr());
}

function batchedStderr(): pino.DestinationStream {
  // pino flushes an asynchronous destination synchronously at process exit.
  const stream = pino.destination({ fd: 2, sync: false, minLength: BATCH_BYTES });
  setInterval(() => stream.flush(), BATCH_MS).unref();
  return stream;
}
