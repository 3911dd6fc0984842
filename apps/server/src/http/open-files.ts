import { readFileSync } from 'node:fs';

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
  const perStream = options.http2 ? 1.01 : 2;
  return Math.max(0, Math.floor((limit - RESERVED - options.webhookConcurrency) / perStream));
}
