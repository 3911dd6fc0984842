import { Command, type Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';

/** How long a rate-limit check waits for Redis before the instance counts alone (the insurance limiter). */
const REDIS_COMMAND_TIMEOUT_MS = 500;

/** The shared rate-limit store's connection: it fails fast rather than make requests wait for Redis. */
export const redisOptions: RedisOptions = {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
  // A Redis that holds the connection and answers nothing (frozen, a partition without a reset) would hold every
  // rate-limit check, and so every request, for good: the check gives up and counts here instead. A process busy
  // past this (see watchRedis) counts that one check here too: a small leak, where a longer wait would hold requests.
  commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
  // A check that timed out was already counted here: sent again on the next connection it would count twice.
  autoResendUnfulfilledCommands: false,
};

/** How often the connection is checked: a ping still unanswered at the next check drops it. */
export const REDIS_WATCHDOG_MS = 1000;

/**
 * Says when Redis is lost and when it is back, once each (ioredis reports every reconnection attempt: a line
 * every 2 s for as long as it is down), and exposes `svc_redis_up`. A connection that stays open and answers
 * nothing is dropped and opened again: a ping unanswered for a whole check period, or a ready check unanswered
 * for two checks. While ioredis reconnects, a check fails at once (no offline queue), so requests wait for no
 * timeout. Returns the function that stops the checks.
 *
 * The ping is judged by the loop, not by a timer. A process busy for longer than a command timeout (a large
 * request's parse, a GC pause, a starved CPU) runs its due timers before it reads the socket, so a timer would see
 * an answer sitting unread as missing and drop a healthy connection, sending every rate-limit check to the
 * per-instance count until the reconnect. A ping still pending at a check is looked at again after the loop has
 * read its sockets (`setImmediate` runs after the poll phase); only then is it missing.
 */
export function watchRedis(redis: Redis, logger: Logger, metrics: Metrics): () => void {
  let lost = false;
  const markLost = (reason: string) => {
    if (lost) return;
    lost = true;
    logger.warn({ err: reason }, 'redis unavailable; rate limits fall back to this instance until it is back');
  };
  redis.on('error', (err) => markLost(err.message));
  redis.on('ready', () => {
    if (!lost) return;
    lost = false;
    logger.info('redis reachable again; rate limits are shared again');
  });
  // Not up once lost, until ioredis says ready again: a dropped connection stays 'ready' until its socket has
  // closed, a few turns of the loop after the drop was said.
  metrics.redis(() => redis.status === 'ready' && !lost);
  let unreadyChecks = 0;
  let pending: Command | undefined;
  const drop = (reason: string) => {
    markLost(reason);
    unreadyChecks = 0;
    pending = undefined;
    redis.disconnect(true);
  };
  const ping = () => {
    const command = new Command('ping', []);
    // Set before sending, so ioredis keeps it rather than SVC's short rate-limit command timeout: the watchdog
    // decides when the ping is missing. This timer only frees the command if the connection never closes.
    command.setTimeout(REDIS_WATCHDOG_MS * 30);
    pending = command;
    const settle = () => {
      if (pending === command) pending = undefined;
    };
    redis.sendCommand(command);
    command.promise.then(settle, settle);
  };
  const check = () => {
    unreadyChecks = redis.status === 'connect' ? unreadyChecks + 1 : 0;
    if (unreadyChecks >= 2) return drop('redis accepted the connection but did not answer its ready check');
    if (redis.status !== 'ready') {
      pending = undefined;
      return;
    }
    const waiting = pending;
    if (!waiting) return ping();
    setImmediate(() => {
      if (pending === waiting && redis.status === 'ready') drop('redis did not answer a ping in time');
    });
  };
  const watchdog = setInterval(check, REDIS_WATCHDOG_MS);
  watchdog.unref();
  return () => clearInterval(watchdog);
}
