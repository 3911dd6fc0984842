import { isIP } from 'node:net';
import { DEFAULT_GROUNDING_THRESHOLD } from '@svc/grounding';
import { z } from 'zod';
import { parseCorsOrigins, type CorsOrigins } from './http/cors.js';
import type { ThinkingSwitch } from './upstream/hybrid-thinking.js';
import { parseProcesses } from './cluster/processes.js';

// In a module of its own, for `--processes` to be checked without loading the rest of this one.
export { parseProcesses };

/**
 * SVC_WEBHOOK_ALLOW_PRIVATE (design §2): `false` public addresses only; `'loopback'` also loopback receivers
 * (127.0.0.0/8, ::1 and its IPv4-mapped form: local development); `true` also private, link-local (the cloud
 * metadata address) and every other non-public range.
 */
export type AllowPrivate = boolean | 'loopback';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1']);

/** Parses "5s,5m,30m,2h" into milliseconds. */
export function parseDurationList(text: string): number[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(part);
      if (!match) throw new Error(`"${part}" is not a duration like 500ms, 5s, 5m, 2h or 1d`);
      const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
      return Math.round(Number(match[1]) * unit);
    });
}

/** Parses one duration ("24h", "30m", "0s") into milliseconds. */
export function parseDuration(text: string): number {
  const list = parseDurationList(text);
  if (list.length !== 1) throw new Error(`"${text}" is not one duration like 30m, 24h or 7d`);
  return list[0]!;
}

/** What Express's `trust proxy` takes: false, true (every hop), a hop count, or addresses/CIDRs/names. */
export type TrustProxy = boolean | number | string[];

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * SVC_TRUST_PROXY, in the forms of Express's `trust proxy`: `false`, `true`, a hop count (`1`), or a
 * comma-separated list of addresses, CIDRs and the names loopback, linklocal, uniquelocal.
 *
 * @example
 * parseTrustProxy('loopback, 10.0.0.0/8'); // ['loopback', '10.0.0.0/8']
 */
export function parseTrustProxy(text: string): TrustProxy {
  const value = text.trim();
  if (value === 'false' || value === '') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  const entries = value.split(',').map((part) => part.trim()).filter(Boolean);
  for (const entry of entries) {
    if (PROXY_NAMES.has(entry)) continue;
    const [address = '', bits, extra] = entry.split('/');
    const family = isIP(address);
    const maxBits = family === 6 ? 128 : 32;
    const bitsOk = bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= maxBits) || (family === 4 && isIP(bits) === 4);
    if (family === 0 || extra !== undefined || !bitsOk) {
      throw new Error(`"${entry}" is not an address, CIDR or one of loopback, linklocal, uniquelocal (use false, true, a hop count, or a comma-separated list)`);
    }
  }
  return entries;
}

/**
 * SVC_ALLOWED_HOSTS: comma-separated host names the dashboard and /metrics answer to besides localhost, the
 * bind host and IP addresses; `.example.com` allows the name and every subdomain.
 *
 * @example
 * parseAllowedHosts('svc.example.com, .internal'); // ['svc.example.com', '.internal']
 */
export function parseAllowedHosts(text: string): string[] {
  const names = text.split(',').map((part) => part.trim().toLowerCase()).filter(Boolean);
  for (const name of names) {
    if (!/^\.?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/.test(name)) {
      throw new Error(`"${name}" is not a host name (like svc.example.com, or .example.com for every subdomain)`);
    }
  }
  return names;
}
const SIZE_UNITS = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 } as const;

/**
 * A byte count: a whole number of bytes, or one with a unit (`B`, `KiB`, `MiB`, `GiB`), e.g. `256MiB`.
 * Throws an Error whose message says what is accepted.
 *
 * @example
 * parseByteSize('256MiB'); // 268435456
 */
export function parseByteSize(text: string): number {
  const match = /^(\d+)\s*(B|KiB|MiB|GiB)?$/.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a size: use a whole number of bytes, or one with B, KiB, MiB or GiB (e.g. 256MiB)`);
  return Number(match[1]) * SIZE_UNITS[(match[2] ?? 'B') as keyof typeof SIZE_UNITS];
}

/** The largest chat request body (design §4 `request_too_large`). */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;

/** A text setting read by `parse`, whose Error message becomes the setting's issue. */
function parsedBy<T>(parse: (text: string) => T, defaultText: string) {
  return z
    .string()
    .default(defaultText)
    .transform((v, ctx) => {
      try {
        return parse(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });
}

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
/** A whole number in [min, max]; every failure says so in those words ("abc" is not "expected number, received NaN"). */
const int = (min: number, max: number) => {
  const error = `must be a whole number from ${min} to ${max}`;
  // Digits only: Number(' ') is 0 (SVC_PORT=" " was a random port), Number('1e3') and Number('0x10') numbers.
  return z
    .string()
    .trim()
    .regex(/^-?\d+$/, { error })
    .transform(Number)
    .pipe(z.number({ error }).int({ error }).min(min, { error }).max(max, { error }));
};

const EnvSchema = z.object({
  SVC_HOST: z.string().min(1).default('127.0.0.1'),
  SVC_PORT: int(0, 65535).default(8080),
  SVC_DATABASE_URL: z
    .string()
    .default('sqlite:./data/svc.db')
    .refine((v) => v.startsWith('sqlite:') || /^postgres(ql)?:\/\//.test(v), 'must be sqlite:PATH or postgres://…'),
  SVC_REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be redis://… or rediss://…').optional(),
  SVC_UPSTREAM_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  SVC_UPSTREAM_API_KEY: z.string().min(1).optional(),
  SVC_UPSTREAM_MODEL: z.string().min(1).default('gpt-4o-mini'),
  SVC_UPSTREAM_THINKING_MODEL: z.string().min(1).optional(),
  SVC_UPSTREAM_TIMEOUT_MS: int(1, 3_600_000).default(120_000),
  SVC_STREAM_KEEPALIVE_MS: int(0, 600_000).default(15_000),
  // auto: HTTP/2 when an https upstream offers it, through svc's own node:http2 client (h2-upstream.ts); off: HTTP/1.1 only.
  SVC_UPSTREAM_THINKING_SWITCH: z
    .enum(['auto', 'off', 'enable_thinking', 'thinking'], {
      message: 'must be auto (by the upstream model\'s name), off (never sent), enable_thinking or thinking (sent under that key whatever the name)',
    })
    .default('auto'),
  SVC_UPSTREAM_HTTP2: z.enum(['auto', 'off'], { message: 'must be auto (HTTP/2 when an https upstream offers it) or off' }).default('auto'),
  SVC_MAX_IN_FLIGHT: int(1, 1_000_000).default(4096),
  SVC_SHUTDOWN_TIMEOUT_MS: int(0, 3_600_000).default(25_000),
  SVC_DATABASE_POOL_SIZE: int(1, 1000).default(20),
  SVC_SECRET_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded (openssl rand -base64 32)')
    .optional(),
  // Keys SVC_SECRET_KEY replaced, comma-separated: they only decrypt (a rotation's old key until `secrets rotate` ran).
  SVC_SECRET_KEY_PREVIOUS: z
    .string()
    .refine(
      (v) => v.split(',').every((k) => Buffer.from(k.trim(), 'base64').length === 32),
      'must be one or more 32-byte base64 keys, comma-separated (the keys SVC_SECRET_KEY replaced)',
    )
    .optional(),
  SVC_RATE_LIMIT_RPM: int(1, 10_000_000).default(600),
  SVC_WEBHOOK_TIMEOUT_MS: int(1, 600_000).default(10_000),
  SVC_WEBHOOK_RETRY_SCHEDULE: parsedBy(parseDurationList, '5s,5m,30m,2h,5h,10h,10h'),
  SVC_WEBHOOK_SECRET_OVERLAP: parsedBy(parseDuration, '24h'),
  SVC_WEBHOOK_ALLOW_PRIVATE: z
    .enum(['true', 'false', '1', '0', 'yes', 'no', 'loopback'], { message: 'must be false, loopback or true' })
    .transform((v): AllowPrivate => (v === 'loopback' ? 'loopback' : v === 'true' || v === '1' || v === 'yes'))
    .optional(),
  SVC_WEBHOOK_CONCURRENCY: int(1, 100_000).default(256),
  SVC_WEBHOOK_RECEIVER_CONCURRENCY: int(1, 100_000).default(64),
  SVC_RETENTION_DAYS: int(1, 3650).default(30),
  SVC_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SVC_GROUNDING_JUDGE: z.enum(['off', 'upstream']).default('off'),
  SVC_GROUNDING_THRESHOLD: z.coerce
    .number({ message: 'must be a number between 0 and 1 (exclusive), such as the one `svc-server grounding calibrate` prints' })
    .gt(0, 'must be greater than 0 and less than 1')
    .lt(1, 'must be greater than 0 and less than 1')
    .default(DEFAULT_GROUNDING_THRESHOLD),
  SVC_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  SVC_PROCESSES: parsedBy(parseProcesses, '1'),
  SVC_TRUST_PROXY: parsedBy(parseTrustProxy, 'false'),
  SVC_ALLOWED_HOSTS: parsedBy(parseAllowedHosts, ''),
  SVC_CORS_ORIGINS: parsedBy(parseCorsOrigins, '*'),
  SVC_KEEP_ALIVE_TIMEOUT_MS: int(1000, 600_000).default(65_000),
  SVC_MAX_KEY_RATE_LIMIT_RPM: int(1, 10_000_000).default(100_000),
  SVC_MAX_KEYS_PER_USER: int(1, 1_000_000).default(100),
  SVC_RESPONSE_STREAM_MAX_BYTES: parsedBy(parseByteSize, '8MiB').refine((v) => v >= 1024 && v <= 1024 ** 3, 'must be from 1KiB to 1GiB'),
  SVC_MAX_BODY_BYTES_IN_FLIGHT: parsedBy(parseByteSize, '256MiB').refine(
    (v) => v >= MAX_BODY_BYTES && v <= 1024 ** 4,
    'must be from 10MiB (one largest body) to 1024GiB',
  ),
});

/** SVC_ variables read by others: bin/svc-server, svc-cli and the receiver examples in docs/webhooks.md. */
const READ_ELSEWHERE = new Set(['SVC_SINGLE_THREADED_GC', 'SVC_CGROUP_CPU_MAX', 'SVC_BASE_URL', 'SVC_API_KEY', 'SVC_WEBHOOK_SECRET', 'SVC_LISTEN_PORT']);

/** Characters to insert, delete or change to turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * SVC_ variables svc does not know, each with what to check: a misspelt setting is otherwise ignored and its
 * default used in silence (SVC_DATABSE_URL=postgres://… would run on a local SQLite file).
 *
 * @example
 * unknownSettings({ SVC_DATABSE_URL: 'postgres://…' }); // ['SVC_DATABSE_URL is not an svc setting and is ignored (did you mean SVC_DATABASE_URL?)']
 */
export function unknownSettings(env: Record<string, string | undefined>): string[] {
  const misspelt = new Set(misspeltSettings(env).map(([name]) => name));
  return unknownNames(env)
    .filter((name) => !misspelt.has(name))
    .map((name) => {
      const closest = closestSetting(name);
      return `${name} is not an svc setting and is ignored${closest ? ` (did you mean ${closest}?)` : ''}`;
    });
}

function unknownNames(env: Record<string, string | undefined>): string[] {
  return Object.keys(env).filter((name) => name.startsWith('SVC_') && !(name in EnvSchema.shape) && !READ_ELSEWHERE.has(name));
}

function closestSetting(name: string): string | undefined {
  return Object.keys(EnvSchema.shape).find((k) => editDistance(name, k) <= 2);
}

/**
 * Unknown SVC_ variables that resemble a setting left unset, with a problem for each: the value was meant for
 * that setting, and starting on its default instead (SVC_DATABSE_URL=postgres://… on a new local SQLite file, with
 * a first-run user of its own) is worse than not starting. One that resembles a setting also set is only a
 * warning (`unknownSettings`).
 *
 * @example
 * misspeltSettings({ SVC_DATABSE_URL: 'postgres://…' }); // [['SVC_DATABSE_URL', 'SVC_DATABSE_URL: not an svc setting; did you mean SVC_DATABASE_URL? …']]
 */
function misspeltSettings(env: Record<string, string | undefined>): Array<[name: string, problem: string]> {
  return unknownNames(env).flatMap((name): Array<[string, string]> => {
    const closest = closestSetting(name);
    if (closest === undefined || (env[closest] ?? '') !== '' || (env[name] ?? '') === '') return [];
    return [[name, `${name}: not an svc setting; did you mean ${closest}? (${closest} is unset, so its default would be used) Rename it, or unset ${name}`]];
  });
}

/**
 * Settings that are valid but unsafe together, each with what to set: on a loopback bind webhooks may reach
 * loopback receivers by default (design §2, for local development), which behind a reverse proxy lets any remote
 * user aim a webhook at this host's own services and read the start of their answers in the attempt log.
 *
 * @example
 * riskySettings(loadConfig({ SVC_TRUST_PROXY: 'loopback' }), {}); // ['SVC_TRUST_PROXY is set and SVC_HOST is loopback: …']
 */
export function riskySettings(config: Config, env: Record<string, string | undefined>): string[] {
  if (config.webhooks.allowPrivate !== 'loopback' || env.SVC_WEBHOOK_ALLOW_PRIVATE !== undefined || config.trustProxy === false || config.trustProxy === 0) return [];
  return [
    'SVC_TRUST_PROXY is set and SVC_HOST is loopback: webhooks may reach this host\'s loopback services ' +
      '(SVC_WEBHOOK_ALLOW_PRIVATE defaults to loopback on a loopback bind, for local development). ' +
      'Behind a reverse proxy, set SVC_WEBHOOK_ALLOW_PRIVATE=false',
  ];
}

export interface Config {
  host: string;
  port: number;
  databaseUrl: string;
  redisUrl: string | undefined;
  upstream: {
    baseUrl: string | undefined;
    apiKey: string | undefined;
    model: string;
    thinkingModel: string;
    /** How a hybrid model's thinking switch is sent (`upstream/hybrid-thinking.ts`). */
    thinkingSwitch: ThinkingSwitch;
    timeoutMs: number;
    /** `auto`: HTTP/2 to an https upstream that offers it by ALPN, many streams per connection; `off`: HTTP/1.1 only. */
    http2: 'auto' | 'off';
  };
  /**
   * Postgres connections each process opens at most (SVC_DATABASE_POOL_SIZE): instances × processes × this must
   * stay below the server's max_connections, or a busy moment's new connections are refused.
   */
  databasePoolSize: number;
  /**
   * Chat requests in flight per process (SVC_MAX_IN_FLIGHT); past it a request gets 429
   * `too_many_requests_in_flight` at once. Nothing else bounds the upstream connections.
   */
  maxInFlight: number;
  /**
   * A graceful stop waits this long for the requests in flight (SVC_SHUTDOWN_TIMEOUT_MS), then cuts the ones still
   * open and records their audit (status 499) before exiting: a supervisor's grace period (Kubernetes' 30 s,
   * systemd's 90 s) ends in SIGKILL, which would lose a long stream's audit with the process.
   */
  shutdownTimeoutMs: number;
  /**
   * A streamed response silent this long (a reasoning model thinking) gets an SSE comment, `: keep-alive`, so
   * proxies that cut idle connections (nginx, load balancers: often 60 s) keep it; 0 = never.
   */
  streamKeepAliveMs: number;
  secretKey: Buffer | undefined;
  /** SVC_SECRET_KEY_PREVIOUS: older keys that still decrypt signing secrets (never encrypt). */
  previousSecretKeys: Buffer[];
  rateLimitRpm: number;
  webhooks: {
    timeoutMs: number;
    retryScheduleMs: number[];
    /** How long a rotated-out signing secret keeps signing beside the new one, unless the key sets its own. */
    secretOverlapMs: number;
    /** false: public receivers only; 'loopback': also loopback; true: also private and link-local (design §2). */
    allowPrivate: AllowPrivate;
    retentionDays: number;
    /** Delivery attempts in flight at most, across receivers. */
    concurrency: number;
    /** Attempts in flight (and connections) to one receiver origin at most. */
    receiverConcurrency: number;
  };
  logLevel: z.infer<typeof EnvSchema>['SVC_LOG_LEVEL'];
  groundingJudge: 'off' | 'upstream';
  /** Scores below it are not grounded (`svc.grounded`, claims, flagged spans, the audit payload). */
  groundingThreshold: number;
  metricsToken: string | undefined;
  /** Server processes sharing the port (node:cluster); 1 = a single process, no cluster. */
  processes: number;
  /** Host names the dashboard and /metrics answer to besides localhost, the bind host and IP addresses. */
  allowedHosts: string[];
  /** Browser origins allowed to call /v1 (CORS): `*` for any, none when empty. */
  corsOrigins: CorsOrigins;
  /**
   * How long an idle client connection is kept open for its next request. Longer than a load balancer's idle
   * timeout (AWS ALB 60 s), so the balancer never sends a request on a connection svc is closing (a 502).
   */
  keepAliveTimeoutMs: number;
  /** Which proxies' X-Forwarded-For / X-Forwarded-Proto are believed (Express `trust proxy`). */
  trustProxy: TrustProxy;
  /** Operator caps on what users may set: a key's own rate limit, and active keys per user. */
  limits: { maxKeyRateLimitRpm: number; maxKeysPerUser: number };
  /** Request-body bytes one process holds at once, over all requests; past it new bodies get 429 at once. */
  maxBodyBytesInFlight: number;
  /**
   * The most a background stream's kept events may hold (SVC_RESPONSE_STREAM_MAX_BYTES, UTF-8 bytes of the events as
   * sent): past it they are given up, and its stream can no longer be read again (GET with `stream=true` says so).
   */
  responseStreamMaxBytes: number;
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * Reads the configuration once, from an environment object (the only place `process.env` is read is the caller).
 * Throws ConfigError listing every problem.
 *
 * @example
 * const config = loadConfig(process.env);
 */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([k, v]) => k.startsWith('SVC_') && v !== ''));
  const parsed = EnvSchema.safeParse(cleaned);
  const misspelt = misspeltSettings(env).map(([, problem]) => problem);
  if (!parsed.success || misspelt.length > 0) {
    throw new ConfigError([...misspelt, ...(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.') || 'env'}: ${i.message}`))]);
  }
  const e = parsed.data;
  if (e.SVC_DATABASE_URL.startsWith('postgres') && !e.SVC_SECRET_KEY) {
    // Said with how to make one: every instance needs the same key, so none can generate its own as an embedded start does.
    throw new ConfigError([
      'SVC_SECRET_KEY: required with a Postgres database (32 bytes, base64): generate one with `openssl rand -base64 32` and give every instance the same key',
    ]);
  }
  if (e.SVC_PROCESSES > 1 && e.SVC_DATABASE_URL === 'sqlite::memory:') {
    throw new ConfigError(['SVC_PROCESSES: several processes need a database file they can share, not sqlite::memory:']);
  }
  return {
    host: e.SVC_HOST,
    port: e.SVC_PORT,
    databaseUrl: e.SVC_DATABASE_URL,
    redisUrl: e.SVC_REDIS_URL,
    upstream: {
      baseUrl: e.SVC_UPSTREAM_BASE_URL?.replace(/\/+$/, ''),
      apiKey: e.SVC_UPSTREAM_API_KEY,
      model: e.SVC_UPSTREAM_MODEL,
      thinkingModel: e.SVC_UPSTREAM_THINKING_MODEL ?? e.SVC_UPSTREAM_MODEL,
      thinkingSwitch: e.SVC_UPSTREAM_THINKING_SWITCH,
      timeoutMs: e.SVC_UPSTREAM_TIMEOUT_MS,
      http2: e.SVC_UPSTREAM_HTTP2,
    },
    maxInFlight: e.SVC_MAX_IN_FLIGHT,
    shutdownTimeoutMs: e.SVC_SHUTDOWN_TIMEOUT_MS,
    databasePoolSize: e.SVC_DATABASE_POOL_SIZE,
    streamKeepAliveMs: e.SVC_STREAM_KEEPALIVE_MS,
    secretKey: e.SVC_SECRET_KEY ? Buffer.from(e.SVC_SECRET_KEY, 'base64') : undefined,
    previousSecretKeys: (e.SVC_SECRET_KEY_PREVIOUS ?? '').split(',').filter((k) => k.trim() !== '').map((k) => Buffer.from(k.trim(), 'base64')),
    rateLimitRpm: e.SVC_RATE_LIMIT_RPM,
    webhooks: {
      timeoutMs: e.SVC_WEBHOOK_TIMEOUT_MS,
      retryScheduleMs: e.SVC_WEBHOOK_RETRY_SCHEDULE,
      secretOverlapMs: e.SVC_WEBHOOK_SECRET_OVERLAP,
      allowPrivate: e.SVC_WEBHOOK_ALLOW_PRIVATE ?? (LOOPBACK_HOSTS.has(e.SVC_HOST) ? 'loopback' : false),
      retentionDays: e.SVC_RETENTION_DAYS,
      concurrency: e.SVC_WEBHOOK_CONCURRENCY,
      receiverConcurrency: Math.min(e.SVC_WEBHOOK_RECEIVER_CONCURRENCY, e.SVC_WEBHOOK_CONCURRENCY),
    },
    logLevel: e.SVC_LOG_LEVEL,
    groundingJudge: e.SVC_GROUNDING_JUDGE,
    groundingThreshold: e.SVC_GROUNDING_THRESHOLD,
    metricsToken: e.SVC_METRICS_TOKEN,
    processes: e.SVC_PROCESSES,
    trustProxy: e.SVC_TRUST_PROXY,
    allowedHosts: e.SVC_ALLOWED_HOSTS,
    corsOrigins: e.SVC_CORS_ORIGINS,
    keepAliveTimeoutMs: e.SVC_KEEP_ALIVE_TIMEOUT_MS,
    limits: { maxKeyRateLimitRpm: e.SVC_MAX_KEY_RATE_LIMIT_RPM, maxKeysPerUser: e.SVC_MAX_KEYS_PER_USER },
    maxBodyBytesInFlight: e.SVC_MAX_BODY_BYTES_IN_FLIGHT,
    responseStreamMaxBytes: e.SVC_RESPONSE_STREAM_MAX_BYTES,
  };
}
