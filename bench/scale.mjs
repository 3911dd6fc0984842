// Scale-out measurement for docs/scaling.md: svc everything-on (auth, rate limit via Redis, grounding, signed
// webhook) on Postgres + Redis, one instance vs two instances behind the same load, plus the Postgres
// commits/s and Redis commands/s that load costs. Loopback only; bounded; everything stopped in finally.
//
//   node bench/scale.mjs [--duration 15] [--connections 50]
//
// Needs Postgres (postgres://postgres@127.0.0.1:5432/test, trust auth) and Redis (127.0.0.1:6379).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { load } from './lib/load.mjs';
import { freePort, spawnPinned, waitHttp, stopAll, killAllSync, memoryOf, round, pinSelf } from './lib/procs.mjs';
import { REPO, SVC_BIN, BENCH_RPM } from './lib/svc.mjs';
import { requestBody } from './lib/fixtures.mjs';
import { machineInfo, table } from './lib/report.mjs';

const HERE = new URL('.', import.meta.url).pathname;
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const DURATION = arg('duration', 15);
const CONNECTIONS = arg('connections', 50);
const require = createRequire(join(REPO, 'package.json'));
const pg = require('pg');
const { Redis } = require('ioredis');
const run = promisify(execFile);

const ADMIN_URL = process.env.SVC_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.SVC_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const dbName = `svc_bench_${randomBytes(4).toString('hex')}`;
const dbUrl = new URL(ADMIN_URL);
dbUrl.pathname = `/${dbName}`;

process.on('SIGINT', () => {
  killAllSync();
  process.exit(130);
});
const watchdog = setTimeout(() => {
  console.error('scale bench: watchdog fired');
  killAllSync();
  process.exit(1);
}, (DURATION * 4 + 180) * 1000);
watchdog.unref();
pinSelf(0);

async function adminQuery(sql) {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

async function pgCommits() {
  const { rows } = await adminQuery(`select xact_commit::bigint as c from pg_stat_database where datname = '${dbName}'`);
  return Number(rows[0]?.c ?? 0);
}

async function redisCommands(redis) {
  const info = await redis.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
}

const env = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  NODE_ENV: 'production',
  SVC_HOST: '127.0.0.1',
  SVC_DATABASE_URL: dbUrl.toString(),
  SVC_REDIS_URL: REDIS_URL,
  SVC_SECRET_KEY: randomBytes(32).toString('base64'),
  SVC_RATE_LIMIT_RPM: String(BENCH_RPM),
  SVC_MAX_KEY_RATE_LIMIT_RPM: String(BENCH_RPM),
  SVC_LOG_LEVEL: 'warn',
};

async function startInstance(core, upstream) {
  const port = await freePort();
  const proc = spawnPinned(core, process.execPath, [SVC_BIN, 'start'], {
    env: { ...env, SVC_PORT: String(port), SVC_UPSTREAM_BASE_URL: `${upstream}/v1`, SVC_UPSTREAM_API_KEY: 'sk-bench' },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHttp(`${url}/healthz`, { proc });
  return { proc, url };
}

const body = requestBody({ model: 'svc01', stream: false });
const results = { machine: machineInfo(REPO), durationS: DURATION, connections: CONNECTIONS, cases: [] };

try {
  await adminQuery(`create database ${dbName}`);
  const upstream = await startFakeUpstream(0);
  const receiver = await startWebhookReceiver(0);

  await run(process.execPath, [SVC_BIN, 'migrate'], { env });
  await run(process.execPath, [SVC_BIN, 'users', 'create', '--email', 'bench@example.com', '--password', 'bench-password-1234'], { env });
  const created = await run(
    process.execPath,
    [SVC_BIN, 'keys', 'create', '--email', 'bench@example.com', '--rate-limit-rpm', String(BENCH_RPM), '--webhook-url', `${receiver.url}/hook`, '--signing-secret', 'whsec_benchbenchbenchbenchbench', '--json'],
    { env },
  );
  const { key } = JSON.parse(created.stdout);
  const headers = { authorization: `Bearer ${key}` };
  const redis = new Redis(REDIS_URL);

  const instances = [await startInstance(1, upstream.url)];
  for (const count of [1, 2]) {
    if (count === 2) instances.push(await startInstance(0, upstream.url));
    for (const instance of instances) await load({ url: `${instance.url}/v1/chat/completions`, body, headers, connections: 4, durationS: 2 });
    const [commits0, redis0] = [await pgCommits(), await redisCommands(redis)];
    const runs = await Promise.all(
      instances.map((instance) =>
        load({ url: `${instance.url}/v1/chat/completions`, body, headers, connections: Math.ceil(CONNECTIONS / count), durationS: DURATION }),
      ),
    );
    const [commits1, redis1] = [await pgCommits(), await redisCommands(redis)];
    const rps = runs.reduce((s, r) => s + r.rps, 0);
    results.cases.push({
      instances: count,
      rps,
      p50: Math.max(...runs.map((r) => r.p50)),
      p99: Math.max(...runs.map((r) => r.p99)),
      non2xx: runs.reduce((s, r) => s + r.non2xx, 0),
      pgCommitsPerS: round((commits1 - commits0) / DURATION, 0),
      redisOpsPerS: round((redis1 - redis0) / DURATION, 0),
      pgCommitsPerRequest: round((commits1 - commits0) / Math.max(1, runs.reduce((s, r) => s + r.requests, 0)), 2),
      redisOpsPerRequest: round((redis1 - redis0) / Math.max(1, runs.reduce((s, r) => s + r.requests, 0)), 2),
      peakRssMb: instances.map((i) => memoryOf(i.proc.pid)?.peakRssMb ?? null),
    });
  }
  redis.disconnect();
  results.loadAvgEnd = (await import('node:os')).loadavg();
  console.log(
    table(
      ['instances', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'PG commits/s', 'PG commits/req', 'Redis ops/s', 'Redis ops/req'],
      results.cases.map((c) => [String(c.instances), c.rps, c.p50, c.p99, c.non2xx, c.pgCommitsPerS, c.pgCommitsPerRequest, c.redisOpsPerS, c.redisOpsPerRequest]),
    ),
  );
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(join(HERE, 'results/scale-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  await stopAll();
  await adminQuery(`drop database if exists ${dbName} with (force)`).catch(() => {});
}
