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

/**
 * The process logger (pino, JSON lines). `destination` lets tests capture the stream.
 *
 * @example
 * const logger = createLogger('info');
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { level, base: { service: 'svc' }, redact: { paths: REDACT, censor: '[redacted]' } },
    destination ?? pino.destination({ fd: 2, sync: false }),
  );
}
