import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseDurationList, parseProcesses, riskySettings } from '../../src/config.js';

describe('loadConfig', () => {
  it('applies design §2 defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      databaseUrl: 'sqlite:./data/svc.db',
      redisUrl: undefined,
      upstream: { baseUrl: undefined, model: 'gpt-4o-mini', thinkingModel: 'gpt-4o-mini', timeoutMs: 120_000 },
      maxInFlight: 4096,
      databasePoolSize: 20,
      streamKeepAliveMs: 15_000,
      rateLimitRpm: 600,
      webhooks: { timeoutMs: 10_000, allowPrivate: 'loopback', retentionDays: 30 },
      logLevel: 'info',
    });
    expect(config.webhooks.retryScheduleMs).toEqual([5e3, 3e5, 18e5, 72e5, 18e6, 36e6, 36e6]);
  });

  it('blocks private webhook targets by default when bound beyond loopback', () => {
    expect(loadConfig({ SVC_HOST: '0.0.0.0' }).webhooks.allowPrivate).toBe(false);
    expect(loadConfig({ SVC_HOST: '0.0.0.0', SVC_WEBHOOK_ALLOW_PRIVATE: 'true' }).webhooks.allowPrivate).toBe(true);
  });

  it('reads SVC_WEBHOOK_ALLOW_PRIVATE as false, loopback or true, whatever the bind', () => {
    expect(loadConfig({ SVC_HOST: '0.0.0.0', SVC_WEBHOOK_ALLOW_PRIVATE: 'loopback' }).webhooks.allowPrivate).toBe('loopback');
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'false' }).webhooks.allowPrivate).toBe(false);
    expect(loadConfig({ SVC_HOST: '::1' }).webhooks.allowPrivate).toBe('loopback');
    expect(() => loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'private' })).toThrow(/SVC_WEBHOOK_ALLOW_PRIVATE: must be false, loopback or true/);
  });

  it('reads SVC_UPSTREAM_HTTP2 as auto (the default) or off', () => {
    expect(loadConfig({}).upstream.http2).toBe('auto');
    expect(loadConfig({ SVC_UPSTREAM_HTTP2: 'off' }).upstream.http2).toBe('off');
    expect(() => loadConfig({ SVC_UPSTREAM_HTTP2: 'on' })).toThrow(/SVC_UPSTREAM_HTTP2: must be auto \(HTTP\/2 when an https upstream offers it\) or off/);
  });

  it('reads the operator caps on keys', () => {
    expect(loadConfig({}).limits).toEqual({ maxKeyRateLimitRpm: 100_000, maxKeysPerUser: 100 });
    expect(loadConfig({ SVC_MAX_KEY_RATE_LIMIT_RPM: '1200', SVC_MAX_KEYS_PER_USER: '3' }).limits).toEqual({ maxKeyRateLimitRpm: 1200, maxKeysPerUser: 3 });
    expect(() => loadConfig({ SVC_MAX_KEYS_PER_USER: '0' })).toThrow(/SVC_MAX_KEYS_PER_USER/);
  });

  it('maps the thinking model and trims the base URL', () => {
    const config = loadConfig({ SVC_UPSTREAM_BASE_URL: 'https://api.example.com/v1/', SVC_UPSTREAM_THINKING_MODEL: 'o3' });
    expect(config.upstream.baseUrl).toBe('https://api.example.com/v1');
    expect(config.upstream.thinkingModel).toBe('o3');
  });

  it('lists every problem at once', () => {
    try {
      loadConfig({ SVC_PORT: 'eighty', SVC_RATE_LIMIT_RPM: '-1', SVC_WEBHOOK_RETRY_SCHEDULE: '5s,soon', SVC_DATABASE_URL: 'mysql://x' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const name of ['SVC_PORT', 'SVC_RATE_LIMIT_RPM', 'SVC_WEBHOOK_RETRY_SCHEDULE', 'SVC_DATABASE_URL']) expect(problems).toContain(name);
    }
  });

  it('takes SVC_MAX_IN_FLIGHT as a positive whole number', () => {
    expect(loadConfig({ SVC_MAX_IN_FLIGHT: '5' }).maxInFlight).toBe(5);
    for (const bad of ['0', '-3', '2.5', 'many', ' ', '1e3', '0x10']) {
      expect(() => loadConfig({ SVC_MAX_IN_FLIGHT: bad })).toThrow(/SVC_MAX_IN_FLIGHT/);
    }
  });

  it('refuses a port of spaces alone (was port 0: a random port)', () => {
    expect(() => loadConfig({ SVC_PORT: ' ' })).toThrow(/SVC_PORT: must be a whole number from 0 to 65535/);
    expect(loadConfig({ SVC_PORT: ' 8081 ' }).port).toBe(8081);
  });

  it('requires SVC_SECRET_KEY with Postgres', () => {
    expect(() => loadConfig({ SVC_DATABASE_URL: 'postgres://localhost/db' })).toThrow(/SVC_SECRET_KEY/);
    // An operator moving to Postgres is told how to make the key, and that the instances share it.
    expect(() => loadConfig({ SVC_DATABASE_URL: 'postgres://localhost/db' })).toThrow('generate one with `openssl rand -base64 32` and give every instance the same key');
    expect(() => loadConfig({ SVC_DATABASE_URL: 'postgres://localhost/db', SVC_SECRET_KEY: Buffer.alloc(32, 1).toString('base64') })).not.toThrow();
  });
});

describe('parseDurationList', () => {
  it('parses units', () => {
    expect(parseDurationList('100ms, 2s,1.5m,1h,1d')).toEqual([100, 2000, 90_000, 3_600_000, 86_400_000]);
    expect(() => parseDurationList('5 seconds')).toThrow(/duration/);
  });
});

describe('SVC_PROCESSES', () => {
  it('defaults to 1 (a single process, no cluster); takes a positive integer or auto', () => {
    expect(loadConfig({}).processes).toBe(1);
    expect(loadConfig({ SVC_PROCESSES: '4' }).processes).toBe(4);
    expect(loadConfig({ SVC_PROCESSES: 'auto' }).processes).toBe(availableParallelism());
    expect(parseProcesses(' 2 ')).toBe(2);
  });

  it.each(['0', '-2', 'two', '1.5', '2e3', '0x4', '4096'])('refuses %j with a clear message', (value) => {
    try {
      loadConfig({ SVC_PROCESSES: value });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toEqual([
        `SVC_PROCESSES: "${value}" is not a number of processes: use a whole number from 1 to 1024, or auto (one per core)`,
      ]);
    }
    expect(() => parseProcesses(value)).toThrow('is not a number of processes');
  });

  it('needs a database file several processes can share', () => {
    expect(() => loadConfig({ SVC_PROCESSES: '2', SVC_DATABASE_URL: 'sqlite::memory:' })).toThrow(/SVC_PROCESSES: several processes need a database file/);
    expect(loadConfig({ SVC_PROCESSES: '1', SVC_DATABASE_URL: 'sqlite::memory:' }).processes).toBe(1);
  });
});

describe('parseTrustProxy (SVC_TRUST_PROXY)', () => {
  it.each([
    ['false', false],
    ['true', true],
    ['1', 1],
    ['loopback', ['loopback']],
    ['loopback, 10.0.0.0/8, 192.168.1.5, fd00::/8, 172.16.0.0/255.240.0.0', ['loopback', '10.0.0.0/8', '192.168.1.5', 'fd00::/8', '172.16.0.0/255.240.0.0']],
  ])('reads %s', (text, value) => {
    expect(loadConfig({ SVC_TRUST_PROXY: text }).trustProxy).toEqual(value);
  });

  it('defaults to false and refuses what Express would not understand', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    for (const bad of ['yes please', '10.0.0.0/33', 'proxy.example.com', '1.2.3.4/8/9']) {
      expect(() => loadConfig({ SVC_TRUST_PROXY: bad }), bad).toThrow(/SVC_TRUST_PROXY: .*not an address, CIDR/);
    }
  });
});

describe('SVC_MAX_BODY_BYTES_IN_FLIGHT', () => {
  it('defaults to 256 MiB; takes bytes or a size with a unit, at least one largest body', () => {
    expect(loadConfig({}).maxBodyBytesInFlight).toBe(256 * 1024 * 1024);
    expect(loadConfig({ SVC_MAX_BODY_BYTES_IN_FLIGHT: '1GiB' }).maxBodyBytesInFlight).toBe(1024 ** 3);
    expect(loadConfig({ SVC_MAX_BODY_BYTES_IN_FLIGHT: '20971520' }).maxBodyBytesInFlight).toBe(20 * 1024 * 1024);
    for (const bad of ['1MiB', 'lots', '-5', '2TB']) {
      expect(() => loadConfig({ SVC_MAX_BODY_BYTES_IN_FLIGHT: bad })).toThrow(/SVC_MAX_BODY_BYTES_IN_FLIGHT/);
    }
  });
});

describe('SVC_RESPONSE_STREAM_MAX_BYTES', () => {
  it('defaults to 8 MiB; takes bytes or a size with a unit, from 1 KiB to 1 GiB', () => {
    expect(loadConfig({}).responseStreamMaxBytes).toBe(8 * 1024 * 1024);
    expect(loadConfig({ SVC_RESPONSE_STREAM_MAX_BYTES: '64KiB' }).responseStreamMaxBytes).toBe(64 * 1024);
    expect(loadConfig({ SVC_RESPONSE_STREAM_MAX_BYTES: '1024' }).responseStreamMaxBytes).toBe(1024);
    for (const bad of ['1000', 'lots', '-5', '2GiB']) {
      expect(() => loadConfig({ SVC_RESPONSE_STREAM_MAX_BYTES: bad })).toThrow(/SVC_RESPONSE_STREAM_MAX_BYTES/);
    }
  });
});

describe('riskySettings', () => {
  const risky = (env: Record<string, string>) => riskySettings(loadConfig(env), env);

  it('warns when a loopback bind behind a proxy lets webhooks reach loopback by default, saying what to set', () => {
    expect(risky({ SVC_TRUST_PROXY: 'loopback' })).toEqual([expect.stringMatching(/^SVC_TRUST_PROXY is set and SVC_HOST is loopback: webhooks may reach .*set SVC_WEBHOOK_ALLOW_PRIVATE=false$/)]);
  });

  it('says nothing once SVC_WEBHOOK_ALLOW_PRIVATE is set (to anything), without a proxy, or off loopback', () => {
    expect(risky({ SVC_TRUST_PROXY: 'loopback', SVC_WEBHOOK_ALLOW_PRIVATE: 'false' })).toEqual([]);
    expect(risky({ SVC_TRUST_PROXY: 'loopback', SVC_WEBHOOK_ALLOW_PRIVATE: 'loopback' })).toEqual([]);
    expect(risky({ SVC_TRUST_PROXY: 'false' })).toEqual([]);
    expect(risky({})).toEqual([]);
    expect(risky({ SVC_TRUST_PROXY: 'loopback', SVC_HOST: '0.0.0.0' })).toEqual([]);
  });
});
