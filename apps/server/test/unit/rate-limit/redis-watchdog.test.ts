// The watchdog of the shared rate-limit store's connection, against a real Redis: a connection that answers
// nothing is dropped and opened again, and a healthy one is kept while this process is too busy to read it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis, type Command } from 'ioredis';
import type { Logger } from 'pino';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { REDIS_WATCHDOG_MS, redisOptions, watchRedis } from '../../../src/rate-limit/redis-watchdog.js';
import { startTcpRelay, testRedis, type TcpRelay } from '../../support/databases.js';

const redisTarget = await testRedis('redis-watchdog');

/** A logger that keeps its warn and info lines. */
function recordingLogger() {
  const lines: string[] = [];
  const logger = {
    warn: (_fields: unknown, message: string) => lines.push(`warn ${message}`),
    info: (message: string) => lines.push(`info ${message}`),
  } as unknown as Logger;
  return { logger, lines };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met after ${timeoutMs} ms`);
    await sleep(25);
  }
}

/** Keeps the thread busy without yielding, as a large parse or a GC pause does. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe.skipIf(!redisTarget)('Redis watchdog', () => {
  let relay: TcpRelay;
  beforeAll(async () => {
    relay = await startTcpRelay(redisTarget!.url);
  });
  afterAll(() => relay.close());

  async function watched() {
    const redis = new Redis(relay.url, redisOptions);
    redis.on('error', () => {});
    let reconnects = 0;
    redis.on('reconnecting', () => (reconnects += 1));
    const { logger, lines } = recordingLogger();
    const metrics = createMetrics();
    const stop = watchRedis(redis, logger, metrics);
    await until(() => redis.status === 'ready', 5000);
    const up = async () => /^svc_redis_up 1$/m.test(await metrics.registry.metrics());
    const close = () => {
      stop();
      redis.disconnect();
    };
    return { redis, lines, up, reconnects: () => reconnects, close };
  }

  it('keeps a healthy connection while the process is too busy to read the ping’s answer in time', async () => {
    const { redis, lines, up, reconnects, close } = await watched();
    try {
      // Right after each ping goes out the thread stays busy past the command timeout: the answer arrives and
      // waits unread in the socket while the due timers run first.
      let pings = 0;
      const send = redis.sendCommand.bind(redis);
      redis.sendCommand = ((command: Command, stream?: unknown) => {
        const sent = send(command, stream as never);
        if (command.name === 'ping') {
          pings += 1;
          busy(Number(redisOptions.commandTimeout) + 300);
        }
        return sent;
      }) as typeof redis.sendCommand;
      await until(() => pings >= 4, 12 * REDIS_WATCHDOG_MS);
      await sleep(REDIS_WATCHDOG_MS * 1.5);
      expect(lines).toEqual([]);
      expect(reconnects()).toBe(0);
      expect(redis.status).toBe('ready');
      expect(await up()).toBe(true);
      expect(await redis.get('svc-watchdog-absent')).toBeNull();
    } finally {
      close();
    }
  });

  it('drops a connection that stops answering, says so once, and says when Redis is back', async () => {
    const { redis, lines, up, close } = await watched();
    try {
      relay.hold();
      await until(() => lines.includes('warn redis unavailable; rate limits fall back to this instance until it is back'), 10_000);
      expect(await up()).toBe(false);
      // A check while it is down fails at once rather than waiting (no offline queue).
      await expect(redis.get('svc-watchdog-absent')).rejects.toThrow();
      await relay.restore();
      await until(() => redis.status === 'ready', 15_000);
      await until(() => lines.includes('info redis reachable again; rate limits are shared again'), 5000);
      expect(await up()).toBe(true);
      expect(lines.filter((l) => l.startsWith('warn'))).toHaveLength(1);
      expect(await redis.get('svc-watchdog-absent')).toBeNull();
    } finally {
      await relay.restore();
      close();
    }
  });
});
