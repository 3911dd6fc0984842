// Starts svc-server (apps/server/dist/bin.js) on a fresh SQLite data dir with the bench's keys.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';
import { freePort, hasTaskset, spawnPinned, waitHttp } from './procs.mjs';

const run = promisify(execFile);
export const REPO = new URL('../../', import.meta.url).pathname;
/** The server measured: this checkout's build, or SVC_BENCH_BIN (a copy of a build, kept apart from rebuilds). */
export const SVC_BIN = process.env.SVC_BENCH_BIN ?? join(REPO, 'apps/server/dist/bin.js');
const EMAIL = 'bench@example.com';
/**
 * glibc's malloc thresholds as the installed command (apps/server/bin/svc-server) gives them to node, read from
 * it: the bench starts node itself (to add node flags or a wrapper) and measures svc as installed. The bench's
 * own GLIBC_TUNABLES wins; `GLIBC_TUNABLES=` (empty) measures glibc's defaults.
 */
const INSTALLED = readFileSync(join(REPO, 'apps/server/bin/svc-server'), 'utf8');
const INSTALLED_TUNABLES = /export GLIBC_TUNABLES="([^$"]*)/.exec(INSTALLED)[1];
/**
 * The GC flag the installed command gives node when the process has one CPU (or SVC_SINGLE_THREADED_GC=1),
 * read from it; the bench pins svc with taskset and applies the same rule to the core list it pins to.
 */
const INSTALLED_ONE_CPU_FLAGS = /^single_threaded_gc=(\S+)/m.exec(INSTALLED)[1].split(' ');
function gcFlagsFor(core, env) {
  const chosen = env.SVC_SINGLE_THREADED_GC;
  const pinnedToOne = hasTaskset && String(core).split(',').length === 1 && !String(core).includes('-');
  const oneCpu = chosen === undefined || chosen === '' ? pinnedToOne : chosen === '1';
  return oneCpu ? INSTALLED_ONE_CPU_FLAGS : [];
}
/** High enough never to limit: the limiter still runs on every request. */
export const BENCH_RPM = 10_000_000;

export function svcBuilt() {
  return existsSync(SVC_BIN);
}

/** Exits with status 2 and says how to build when the server is not built. */
export function exitUnlessSvcBuilt() {
  if (svcBuilt()) return;
  process.stderr.write(`${SVC_BIN} is missing: build first with  npx turbo run build --filter=@svc/server...\n`);
  process.exit(2);
}

/**
 * Creates a data dir, a user and one API key (with webhook + signing secret when `webhookUrl` is given),
 * then starts the server pinned to `core` (a taskset list: `1`, or `0,1`), with `startArgs` after `start`. `nodeArgs` (e.g. --cpu-prof) go before the script; `bin` is
 * another build's bin.js (A/B runs), by default this checkout's; `wrapper` is a command the server runs
 * under (e.g. valgrind and its flags); `env` adds settings (e.g. SVC_MAX_IN_FLIGHT).
 * Returns { proc, url, key, dbPath, dataDir }.
 */
export async function startSvc({ core, upstreamUrl, webhookUrl, nodeArgs = [], logLevel, bin = SVC_BIN, wrapper = [], startTimeoutMs, startArgs = [], env: extraEnv = {} }) {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const dbPath = join(dataDir, 'svc.db');
  const port = await freePort();
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    GLIBC_TUNABLES: process.env.GLIBC_TUNABLES ?? INSTALLED_TUNABLES,
    SVC_HOST: '127.0.0.1',
    SVC_PORT: String(port),
    SVC_DATABASE_URL: `sqlite:${dbPath}`,
    SVC_UPSTREAM_BASE_URL: upstreamUrl,
    SVC_UPSTREAM_API_KEY: 'sk-bench',
    SVC_RATE_LIMIT_RPM: String(BENCH_RPM),
    // The operator's cap on a key's own limit (default 100,000 rpm) must allow the bench's.
    SVC_MAX_KEY_RATE_LIMIT_RPM: String(BENCH_RPM),
    ...(logLevel ? { SVC_LOG_LEVEL: logLevel } : {}),
    // `SVC_SINGLE_THREADED_GC=0 npm run bench:streams` measures svc without the one-CPU GC flag.
    ...(process.env.SVC_SINGLE_THREADED_GC ? { SVC_SINGLE_THREADED_GC: process.env.SVC_SINGLE_THREADED_GC } : {}),
    ...extraEnv,
  };
  const admin = async (...args) => (await run(process.execPath, [bin, ...args], { env, cwd: dataDir })).stdout;
  await admin('users', 'create', '--email', EMAIL, '--password', 'bench-password-1234');
  const keyArgs = ['keys', 'create', '--email', EMAIL, '--name', 'bench', '--rate-limit-rpm', String(BENCH_RPM), '--json'];
  if (webhookUrl) keyArgs.push('--webhook-url', webhookUrl, '--signing-secret', 'whsec_benchbenchbenchbenchbenchbenchbenchbench');
  const { key } = JSON.parse(await admin(...keyArgs));
  const command = [...wrapper, process.execPath, ...gcFlagsFor(core, env), ...nodeArgs, bin, 'start', ...startArgs];
  const proc = spawnPinned(core, command[0], command.slice(1), {
    env,
    cwd: dataDir,
    logFile: join(dataDir, 'server.log'),
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHttp(`${url}/healthz`, { proc, ...(startTimeoutMs ? { timeoutMs: startTimeoutMs } : {}) });
  return { proc, url, key, dbPath, dataDir };
}

/** Deliveries not yet sent (status 'pending'), read straight from the SQLite outbox. */
export function webhookBacklog(dbPath) {
  const require = createRequire(join(REPO, 'package.json'));
  const Database = require('better-sqlite3');
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 2000');
    const count = (status) => db.prepare('select count(*) as n from webhook_deliveries where status = ?').get(status).n;
    return { pending: count('pending'), delivered: count('delivered'), failed: count('failed') };
  } finally {
    db.close();
  }
}
