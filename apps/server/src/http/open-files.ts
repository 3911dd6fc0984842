import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { H2_STREAMS_PER_CONNECTION, mayMultiplex } from '../upstream/upstream-pool.js';

/** Descriptors kept aside from streams: the listening socket, the database and its WAL, logs, Redis, timers. */
const RESERVED = 64;

/**
 * This process's soft limit of open files (`ulimit -n`), read from /proc/self/limits; undefined where that
 * file does not exist (not Linux) or says "unlimited".
 *
 * @example
 * openFilesLimit('Max open files            1024                 524288               files') === 1024;
 */
export function openFilesLimit(limits: string | undefined = readLimits()): number | undefined {
  const soft = limits && /^Max open files\s+(\d+)\s/m.exec(limits)?.[1];
  return soft ? Number(soft) : undefined;
}

function readLimits(): string | undefined {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * How many open streams `limit` descriptors hold: each stream has its client's connection, and over HTTP/1.1 an
 * upstream connection of its own (over HTTP/2 one per 100 streams); webhook attempts in flight hold one each.
 */
export function streamsThatFit(limit: number, options: { http2: boolean; webhookConcurrency: number }): number {
  const perStream = options.http2 ? 1 + 1 / H2_STREAMS_PER_CONNECTION : 2;
  return Math.max(0, Math.floor((limit - RESERVED - options.webhookConcurrency) / perStream));
}

/**
 * Says at start when a server process may open too few files for SVC_MAX_IN_FLIGHT streams: past the limit new
 * connections fail (EMFILE) long before svc would answer 429. The installed command raises the soft limit to
 * the hard one; this is for what is still short (a hard limit of 1,024, a process started otherwise). Called
 * once per server: by the process itself, or by a multi-process server's primary for all its workers, which
 * inherit its limit and each hold SVC_MAX_IN_FLIGHT streams.
 */
export function warnIfFilesShort(config: Config, logger: Pick<Logger, 'warn'>, limit = openFilesLimit()): void {
  if (limit === undefined) return;
  const http2 = mayMultiplex(config.upstream.baseUrl ?? '', config.upstream.http2);
  const fit = streamsThatFit(limit, { http2, webhookConcurrency: config.webhooks.concurrency });
  if (fit >= config.maxInFlight) return;
  const who = config.processes > 1 ? `each of the ${config.processes} server processes` : 'this process';
  logger.warn(
    { open_files_limit: limit, streams_that_fit: fit, max_in_flight: config.maxInFlight },
    `${who} may open ${limit} files, enough for about ${fit} open streams, fewer than SVC_MAX_IN_FLIGHT=${config.maxInFlight}: ` +
      'past that, new connections fail. Raise the limit (ulimit -n, systemd LimitNOFILE=, docker --ulimit nofile=) or lower SVC_MAX_IN_FLIGHT',
  );
}
