import { availableParallelism } from 'node:os';
import { z } from 'zod';

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

/**
 * SVC_PROCESSES / `--processes`: a positive integer, or `auto` for one process per core the OS gives us.
 * Throws an Error whose message says what is accepted.
 *
 * @example
 * parseProcesses('auto'); // os.availableParallelism()
 */
export function parseProcesses(text: string): number {
  const value = text.trim();
  if (value === 'auto') return availableParallelism();
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 1024) {
    throw new Error(`"${text}" is not a number of processes: use a whole number from 1 to 1024, or auto (one per core)`);
  }
  return Number(value);
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
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

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
  SVC_SECRET_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes, base64-encoded (openssl rand -base64 32)')
    .optional(),
  SVC_RATE_LIMIT_RPM: int(1, 10_000_000).default(600),
  SVC_WEBHOOK_TIMEOUT_MS: int(1, 600_000).default(10_000),
  SVC_WEBHOOK_RETRY_SCHEDULE: parsedBy(parseDurationList, '5s,5m,30m,2h,5h,10h,10h'),
  SVC_WEBHOOK_ALLOW_PRIVATE: bool.optional(),
  SVC_RETENTION_DAYS: int(1, 3650).default(30),
  SVC_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SVC_GROUNDING_JUDGE: z.enum(['off', 'upstream']).default('off'),
  SVC_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  SVC_PROCESSES: parsedBy(parseProcesses, '1'),
  SVC_MAX_BODY_BYTES_IN_FLIGHT: parsedBy(parseByteSize, '256MiB').refine(
    (v) => v >= MAX_BODY_BYTES && v <= 1024 ** 4,
    'must be from 10MiB (one largest body) to 1024GiB',
  ),
});

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
    timeoutMs: number;
  };
  secretKey: Buffer | undefined;
  rateLimitRpm: number;
  webhooks: {
    timeoutMs: number;
    retryScheduleMs: number[];
    allowPrivate: boolean;
    retentionDays: number;
  };
  logLevel: z.infer<typeof EnvSchema>['SVC_LOG_LEVEL'];
  groundingJudge: 'off' | 'upstream';
  metricsToken: string | undefined;
  /** Server processes sharing the port (node:cluster); 1 = a single process, no cluster. */
  processes: number;
  /** Request-body bytes one process holds at once, over all requests; past it new bodies get 429 at once. */
  maxBodyBytesInFlight: number;
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
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.') || 'env'}: ${i.message}`));
  }
  const e = parsed.data;
  if (e.SVC_DATABASE_URL.startsWith('postgres') && !e.SVC_SECRET_KEY) {
    throw new ConfigError(['SVC_SECRET_KEY: required with a Postgres database (32 bytes, base64)']);
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
      timeoutMs: e.SVC_UPSTREAM_TIMEOUT_MS,
    },
    secretKey: e.SVC_SECRET_KEY ? Buffer.from(e.SVC_SECRET_KEY, 'base64') : undefined,
    rateLimitRpm: e.SVC_RATE_LIMIT_RPM,
    webhooks: {
      timeoutMs: e.SVC_WEBHOOK_TIMEOUT_MS,
      retryScheduleMs: e.SVC_WEBHOOK_RETRY_SCHEDULE,
      allowPrivate: e.SVC_WEBHOOK_ALLOW_PRIVATE ?? LOOPBACK_HOSTS.has(e.SVC_HOST),
      retentionDays: e.SVC_RETENTION_DAYS,
    },
    logLevel: e.SVC_LOG_LEVEL,
    groundingJudge: e.SVC_GROUNDING_JUDGE,
    metricsToken: e.SVC_METRICS_TOKEN,
    processes: e.SVC_PROCESSES,
    maxBodyBytesInFlight: e.SVC_MAX_BODY_BYTES_IN_FLIGHT,
  };
}
