import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { DashboardClient } from './support/dashboard-client.js';
import { until } from './support/reliability-http.js';
import { childrenOf, exitOf } from './support/processes.js';
import { createTestPostgres } from './support/databases.js';
import { CommandError, makeProgram, type CommandIO } from '../src/admin/commands.js';

const BIN = resolve(import.meta.dirname, '../dist/bin.js');
/** The command `npm ci` installs (`npx svc-server`, `npm start`): a shell script that runs BIN. */
const INSTALLED = resolve(import.meta.dirname, '../bin/svc-server');
const RETAIN_FREED = resolve(import.meta.dirname, 'support/retain-freed-memory.mjs');
const children: ChildProcess[] = [];
const dirs: string[] = [];

function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bin-'));
  dirs.push(dir);
  return dir;
}

function envFor(dir: string, extra: Record<string, string> = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  return { ...clean, SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`, SVC_PORT: '0', SVC_LOG_LEVEL: 'warn', ...extra };
}

/** Runs an admin command; `input` is its standard input (else an empty one). */
function run(args: string[], env: NodeJS.ProcessEnv, input = '') {
  const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 30_000, input });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Runs an admin command in this process (the program bin.ts runs, its failure printed as bin.ts prints it): for
 * refusals, where a node start each (~0.25 s of CPU) would be most of the test's time. Each test keeps one refusal
 * run through the real binary.
 */
async function runHere(args: string[], env: NodeJS.ProcessEnv, input = '') {
  const out: string[] = [];
  const err: string[] = [];
  const io: CommandIO = {
    env,
    stdout: (line) => out.push(`${line}\n`),
    stderr: (line) => err.push(`${line}\n`),
    stopSignal: () => new Promise<string>(() => {}),
    readStdin: async () => input,
  };
  try {
    await makeProgram(io).exitOverride().parseAsync(['node', 'svc-server', ...args]);
    return { code: 0, stdout: out.join(''), stderr: err.join('') };
  } catch (e) {
    if (!(e instanceof CommandError)) throw e;
    return { code: 1, stdout: out.join(''), stderr: `${err.join('')}${e.message}\n` };
  }
}

/**
 * The first-run banner `start` printed, once its last line has arrived: svc writes it after the listening line, which
 * this process may read first (its own pipe), well before the banner on a loaded host.
 */
async function firstRunBanner(stdout: () => string): Promise<string> {
  await expect.poll(stdout).toMatch(/^ {2}Try it: .*\n/m);
  return stdout();
}

/**
 * Starts `svc-server start` (the built BIN under this node, or `command`) and resolves with its URL and
 * everything it printed by then.
 */
function start(
  env: NodeJS.ProcessEnv,
  command: [string, ...string[]] = [process.execPath, BIN],
): Promise<{ child: ChildProcess; url: string; stdout: () => string; stderr: () => string }> {
  const child = spawn(command[0], [...command.slice(1), 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  return new Promise((resolvePromise, reject) => {
    // A start takes 1-2 s alone, over 20 s on a host running other suites beside this one, and a start of two processes
    // took over 60 s at load 40 on 2 cores: just under the test's own guard (120 s), saying what the server printed.
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${err}`)), 100_000);
    child.stderr!.on('data', (d) => {
      err += d;
      const match = /svc listening on (http:\/\/\S+)/.exec(err);
      if (match) {
        clearTimeout(timer);
        // The first-run banner (stdout) is written after the listening line, and reaches this process on its own pipe,
        // any time later: a test that reads it waits for it (firstRunBanner).
        resolvePromise({ child, url: match[1]!, stdout: () => out, stderr: () => err });
      }
    });
    // All it wrote: 'exit' comes before the pipes' last bytes.
    void exitOf(child).then((code) => reject(new Error(`server exited with ${code}:\n${err}`)));
  });
}

beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run npm run build first (npm test does)`);
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null) {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('svc-server start (what npm start runs)', () => {
  it('exits 1 with a clear message when its database file is deleted under it, and the next start refuses', async () => {
    const dir = tempDir();
    const env = envFor(dir);
    const { child, stderr } = await start(env);
    // 'close', not 'exit': the last lines on stderr may be read after the process ended.
    const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
    for (const f of ['svc.db', 'svc.db-wal', 'svc.db-shm']) if (existsSync(join(dir, f))) unlinkSync(join(dir, f));
    expect(await exited).toBe(1);
    expect(stderr()).toMatch(/svc stopped: the database file .*svc\.db was deleted while svc was running/);
    const again = run(['start'], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/svc\.db is missing, but .* was set up by svc/);
  });

  it('with --processes 2 the whole server stops (exit 1) when its database file is deleted, instead of replacing workers', async () => {
    const dir = tempDir();
    const env = envFor(dir, { SVC_PROCESSES: '2' });
    const { child, stderr } = await start(env);
    // 'close', not 'exit': the last lines on stderr may be read after the process ended.
    const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
    for (const f of ['svc.db', 'svc.db-wal', 'svc.db-shm']) if (existsSync(join(dir, f))) unlinkSync(join(dir, f));
    expect(await exited).toBe(1);
    expect(stderr()).toMatch(/svc stopped: the database file .*svc\.db was deleted while svc was running/);
    expect(stderr()).not.toMatch(/starting a replacement/);
  });

  const linux = process.platform === 'linux';
  const glibc = linux && (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime !== undefined;
  const SVC_TUNABLES = 'glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=1048576';
  /** GLIBC_TUNABLES as the installed command hands it to node (a stand-in `node` first on PATH prints it). */
  const tunablesGivenToNode = (tunables?: string) => {
    const dir = tempDir();
    writeFileSync(join(dir, 'node'), '#!/bin/sh\nprintf %s "${GLIBC_TUNABLES-unset}"\n', { mode: 0o755 });
    const env: NodeJS.ProcessEnv = { ...envFor(dir), PATH: `${dir}:${process.env.PATH}`, GLIBC_TUNABLES: tunables };
    if (tunables === undefined) delete env.GLIBC_TUNABLES;
    return spawnSync(INSTALLED, ['start'], { env, encoding: 'utf8' }).stdout;
  };
  // glibc may cut the copy in /proc/PID/environ after the first tunable it parsed; the process's own
  // environment, which its children inherit, keeps the whole value.
  const tunablesOf = (pid: number) =>
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .find((entry) => entry.startsWith('GLIBC_TUNABLES='));
  /** What a node process started with `tunables` held of 25 MB of blocks, and kept after freeing them. */
  const retained = (tunables: string | undefined) => {
    const env: NodeJS.ProcessEnv = { ...process.env, GLIBC_TUNABLES: tunables };
    if (tunables === undefined) delete env.GLIBC_TUNABLES;
    const r = spawnSync(process.execPath, ['--expose-gc', RETAIN_FREED], { env, encoding: 'utf8', timeout: 30_000 });
    return JSON.parse(r.stdout) as { heldMb: number; retainedMb: number };
  };

  it("the installed command starts node with glibc's malloc thresholds fixed; thresholds the caller set win", () => {
    expect(tunablesGivenToNode()).toBe(SVC_TUNABLES);
    expect(tunablesGivenToNode('glibc.malloc.trim_threshold=0')).toBe('glibc.malloc.trim_threshold=0');
    expect(tunablesGivenToNode('glibc.malloc.mmap_threshold=65536')).toBe('glibc.malloc.mmap_threshold=65536');
    expect(tunablesGivenToNode('glibc.malloc.arena_max=2')).toBe(`${SVC_TUNABLES}:glibc.malloc.arena_max=2`);
  });

  it.skipIf(!linux)('execs node (no process in between), and the workers of --processes inherit the thresholds', async () => {
    const { child } = await start(envFor(tempDir(), { SVC_PROCESSES: '2' }), [INSTALLED]);
    expect(tunablesOf(child.pid!)).toMatch(/^GLIBC_TUNABLES=glibc\.malloc\.mmap_threshold=131072/);
    const workers = childrenOf(child.pid!);
    expect(workers).toHaveLength(2);
    for (const worker of workers) expect(tunablesOf(worker)).toMatch(/^GLIBC_TUNABLES=glibc\.malloc\.mmap_threshold=131072/);
  });

  /** The arguments the installed command hands to node (a stand-in `node` first on PATH prints them), run under `prefix`. */
  const nodeArgsGiven = (extra: Record<string, string> = {}, prefix: string[] = []) => {
    const dir = tempDir();
    writeFileSync(join(dir, 'node'), '#!/bin/sh\nprintf %s "$*"\n', { mode: 0o755 });
    const env: NodeJS.ProcessEnv = { ...envFor(dir, extra), PATH: `${dir}:${process.env.PATH}` };
    const [command, ...args] = [...prefix, INSTALLED, 'start'];
    return spawnSync(command!, args, { env, encoding: 'utf8' }).stdout.split(' ');
  };
  const taskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  const cpus = Number(spawnSync('nproc', { encoding: 'utf8' }).stdout.trim());

  /** A cgroup v2 `cpu.max` holding `line`, for the installed command to read instead of its own cgroup's. */
  const cpuMax = (line: string) => {
    const file = join(tempDir(), 'cpu.max');
    writeFileSync(file, `${line}\n`);
    return { SVC_CGROUP_CPU_MAX: file };
  };
  const NO_QUOTA = 'max 100000';

  it.skipIf(!taskset || cpus < 2)('gives node single-threaded GC when it has one CPU, not when it has more; SVC_SINGLE_THREADED_GC decides instead', () => {
    expect(nodeArgsGiven(cpuMax(NO_QUOTA), ['taskset', '-c', '0'])[0]).toBe('--single-threaded-gc');
    expect(nodeArgsGiven(cpuMax(NO_QUOTA))[0]).toMatch(/dist\/bin\.js$/);
    // GNU nproc answers OMP_NUM_THREADS when it is set: not the CPUs the process may use.
    expect(nodeArgsGiven({ ...cpuMax(NO_QUOTA), OMP_NUM_THREADS: '1' })[0]).toMatch(/dist\/bin\.js$/);
    expect(nodeArgsGiven({ ...cpuMax(NO_QUOTA), SVC_SINGLE_THREADED_GC: '1' })[0]).toBe('--single-threaded-gc');
    expect(nodeArgsGiven({ ...cpuMax(NO_QUOTA), SVC_SINGLE_THREADED_GC: '0' }, ['taskset', '-c', '0'])[0]).toMatch(/dist\/bin\.js$/);
  });

  it.skipIf(cpus < 2)("reads a cgroup v2 quota: one CPU's worth or less is one CPU", () => {
    expect(nodeArgsGiven(cpuMax('50000 100000'))[0]).toBe('--single-threaded-gc');
    expect(nodeArgsGiven(cpuMax('100000 100000'))[0]).toBe('--single-threaded-gc');
    expect(nodeArgsGiven(cpuMax('200000 100000'))[0]).toMatch(/dist\/bin\.js$/);
    expect(nodeArgsGiven(cpuMax(NO_QUOTA))[0]).toMatch(/dist\/bin\.js$/);
    expect(nodeArgsGiven(cpuMax('not a quota'))[0]).toMatch(/dist\/bin\.js$/);
    expect(nodeArgsGiven({ SVC_CGROUP_CPU_MAX: join(tempDir(), 'absent') })[0]).toMatch(/dist\/bin\.js$/);
  });

  it.skipIf(!linux || !taskset)('on one CPU svc runs with single-threaded GC and answers', async () => {
    const dir = tempDir();
    const { child, url, stdout } = await start(envFor(dir), ['taskset', '-c', '0', INSTALLED]);
    expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0')).toContain('--single-threaded-gc');
    const key = /API key:\s+(sk-svc-\S+)/.exec(await firstRunBanner(stdout))![1]!;
    const client = new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'Hello' }] });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text.length).toBeGreaterThan(0);
  });

  const prlimit = linux && spawnSync('prlimit', ['--nofile=512:1024', 'true']).status === 0;

  it.skipIf(!prlimit)('raises its soft limit of open files to the hard limit before node starts', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'node'), '#!/bin/sh\nulimit -Sn\n', { mode: 0o755 });
    const env: NodeJS.ProcessEnv = { ...envFor(dir), PATH: `${dir}:${process.env.PATH}` };
    const soft = spawnSync('prlimit', ['--nofile=512:1024', INSTALLED, 'start'], { env, encoding: 'utf8' }).stdout.trim();
    expect(soft).toBe('1024');
  });

  it.skipIf(!prlimit)('warns at start when the open-files limit holds fewer streams than SVC_MAX_IN_FLIGHT, and still serves', async () => {
    const { url, stderr } = await start(envFor(tempDir(), { SVC_LOG_LEVEL: 'info' }), ['prlimit', '--nofile=1024:1024', INSTALLED]);
    // Log lines are written in batches at least every 100 ms (BatchedStderr): the warning, logged before the
    // listening line, may come after it.
    await until(() => /open streams/.test(stderr()), 30_000, 'the open-files warning');
    expect(stderr()).toMatch(/may open 1024 files, enough for about 352 open streams, fewer than SVC_MAX_IN_FLIGHT=4096/);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    // With room for them nothing is said: warnIfFilesShort's unit tests.
    // Two processes share one limit and one setting: said once, by the primary, for both.
    const two = await start(envFor(tempDir(), { SVC_LOG_LEVEL: 'info', SVC_PROCESSES: '2' }), ['prlimit', '--nofile=1024:1024', INSTALLED]);
    // Counted once every process has stopped and written all it had to say.
    expect(two.stderr()).toMatch(/; 2 processes\)/);
    two.child.kill('SIGTERM');
    await new Promise((resolve) => two.child.once('close', resolve));
    expect(two.stderr().match(/open streams/g)).toHaveLength(1);
    expect(two.stderr()).toMatch(/each of the 2 server processes may open 1024 files, enough for about 352 open streams/);
  });

  it.skipIf(!glibc)('with those thresholds glibc gives freed memory back, where by default it keeps it (it ignores a misspelt tunable)', () => {
    const untouched = retained(undefined);
    const tuned = retained(SVC_TUNABLES);
    // Both processes really held the blocks…
    expect(untouched.heldMb).toBeGreaterThan(20);
    expect(tuned.heldMb).toBeGreaterThan(20);
    // …glibc's dynamic thresholds kept them after they were freed; fixed thresholds gave them back.
    expect(untouched.retainedMb).toBeGreaterThan(20);
    expect(tuned.retainedMb).toBeLessThan(3);
  });

  it('on a first embedded start prints a key once, and a completion with it succeeds on the offline model', async () => {
    const dir = tempDir();
    const { child, url, stdout, stderr } = await start(envFor(dir));
    // Which build is running, in the line an operator's log keeps, and from --version.
    const { version } = JSON.parse(readFileSync(join(dirname(BIN), '..', 'package.json'), 'utf8')) as { version: string };
    expect(stderr()).toContain(`svc listening on ${url}  (version ${version}; dashboard: ${url}/dashboard)`);
    expect(run(['--version'], envFor(dir)).stdout.trim()).toBe(version);
    const banner = await firstRunBanner(stdout);
    const key = /API key:\s+(sk-svc-\S+)/.exec(banner)?.[1];
    expect(key).toBeDefined();
    expect(banner).toMatch(/Dashboard:\s+http:\/\/.*\/dashboard.*password \S+/);
    // the key encrypting signing secrets is generated into the data dir, readable only by its owner
    expect(statSync(join(dir, 'secret.key')).mode & 0o077).toBe(0);

    const client = new OpenAI({ apiKey: key!, baseURL: `${url}/v1`, maxRetries: 0 });
    const res = await client.chat.completions.create({
      model: 'svc01',
      messages: [
        { role: 'system', content: 'The library opens at 9 am. It closes at 5 pm on weekdays and at noon on Saturdays.' },
        { role: 'user', content: 'When does the library close on Saturdays?' },
      ],
    });
    expect(res.choices[0]!.message.content).toContain('noon');
    expect((res as unknown as { svc: { checked: boolean; grounded: boolean } }).svc).toMatchObject({ checked: true, grounded: true });

    // SIGTERM is a clean stop; a second start prints no new key
    child.kill('SIGTERM');
    expect(await new Promise((r) => child.once('exit', r))).toBe(0);
    const again = await start(envFor(dir));
    // All it printed: a banner would have come right after the listening line, before the stop.
    again.child.kill('SIGTERM');
    expect(await exitOf(again.child)).toBe(0);
    expect(again.stdout()).not.toContain('API key:');
  });

  // A new Postgres database gets no first-run user (instances starting together would each make one): an operator saw
  // "svc listening" and a dashboard nobody could sign in to, with nothing saying what to do.
  it('on a new Postgres database says there is no user yet and how to make one; once there is one, nothing', async (ctx) => {
    const pg = await createTestPostgres('svc-server-bin');
    if (!pg) return ctx.skip();
    try {
      const env = envFor(tempDir(), { SVC_DATABASE_URL: pg.url, SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') });
      const first = await start(env);
      first.child.kill('SIGTERM');
      expect(await exitOf(first.child)).toBe(0);
      expect(first.stderr()).toContain('No user yet on this database: make one with svc-server users create --email E --password-stdin, then svc-server keys create --email E');
      expect(first.stdout()).not.toContain('API key:');

      expect(run(['users', 'create', '--email', 'ana@example.com', '--password-stdin'], env, 'a-long-password\n').code).toBe(0);
      const again = await start(env);
      again.child.kill('SIGTERM');
      expect(await exitOf(again.child)).toBe(0);
      expect(again.stderr()).not.toContain('No user yet');
    } finally {
      await pg.drop();
    }
  });

  it('exits non-zero listing every invalid setting', () => {
    const r = run(['start'], envFor(tempDir(), { SVC_PORT: 'x', SVC_RATE_LIMIT_RPM: '0' }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('SVC_PORT: must be a whole number from 0 to 65535');
    expect(r.stderr).toContain('SVC_RATE_LIMIT_RPM');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/);
  });

  it('names the database it could not reach, without its password', () => {
    // Was "error: connect ECONNREFUSED 127.0.0.1:1" alone: not a word of which setting or service.
    const r = run(['migrate'], envFor(tempDir(), { SVC_DATABASE_URL: 'postgres://svc:hunter2secret@127.0.0.1:1/svc', SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') }));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: could not open the database postgres:\/\/svc:\*\*\*@127\.0\.0\.1:1\/svc \(SVC_DATABASE_URL\): connect ECONNREFUSED 127\.0\.0\.1:1\n$/);
    expect(r.stderr).not.toContain('hunter2secret');
  });

  it('warns at start when a loopback bind behind a proxy lets webhooks reach loopback by default, and not once that is set', async () => {
    // The default follows design §2 (loopback on a loopback bind, for local development); behind a reverse proxy
    // the users are remote and could aim a webhook at this host's own services.
    const proxied = await start(envFor(tempDir(), { SVC_TRUST_PROXY: 'loopback' }));
    expect(proxied.stderr()).toContain('warning: SVC_TRUST_PROXY is set and SVC_HOST is loopback: webhooks may reach');
    expect(proxied.stderr()).toContain('set SVC_WEBHOOK_ALLOW_PRIVATE=false');
    // When it is not said (SVC_WEBHOOK_ALLOW_PRIVATE set, no proxy): riskySettings' unit tests.
    // An admin command serves no webhooks: it does not say so.
    const admin = run(['migrate'], envFor(tempDir(), { SVC_TRUST_PROXY: 'loopback' }));
    expect(admin.code).toBe(0);
    expect(admin.stderr).not.toContain('SVC_TRUST_PROXY is set');
  });

  it('refuses to start on a misspelt setting whose real name is unset, and warns about other SVC_ variables it does not know', () => {
    // Was a warning, then a start on the default SQLite file (a new database, a first-run user of its own): the
    // shared Postgres database never saw a write.
    const cwd = tempDir();
    const { SVC_DATABASE_URL: _default, ...env } = envFor(cwd, { SVC_DATABSE_URL: 'postgres://db.internal/svc', SVC_RETENTION_DYAS: '7' });
    // In a directory of its own: without the check it started on ./data/svc.db there (until the timeout).
    const typo = spawnSync(process.execPath, [BIN, 'start'], { env, cwd, encoding: 'utf8', timeout: 60_000 });
    expect(typo.status).toBe(1);
    expect(typo.stderr).toContain('SVC_DATABSE_URL: not an svc setting; did you mean SVC_DATABASE_URL? (SVC_DATABASE_URL is unset, so its default would be used)');
    expect(typo.stderr).toContain('SVC_RETENTION_DYAS: not an svc setting; did you mean SVC_RETENTION_DAYS?');
    expect(typo.stderr).not.toContain('svc listening');
    // Beside the real one it only warns; an unknown name that resembles nothing only warns.
    const r = run(['migrate'], envFor(tempDir(), { SVC_DATABSE_URL: 'postgres://db.internal/svc', SVC_NOT_A_THING: '1', SVC_API_KEY: 'sk-svc-for-svc-cli' }));
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('warning: SVC_DATABSE_URL is not an svc setting and is ignored (did you mean SVC_DATABASE_URL?)');
    expect(r.stderr).toContain('warning: SVC_NOT_A_THING is not an svc setting and is ignored\n');
    // svc-cli's settings share the prefix and are not svc-server's to question.
    expect(r.stderr).not.toContain('SVC_API_KEY');
  });
});

describe('admin commands', () => {
  it('creates users and keys, lists and revokes them', async () => {
    const dir = tempDir();
    const env = envFor(dir);
    expect(run(['migrate'], env).code).toBe(0);
    const user = run(['users', 'create', '--email', 'ana@example.com', '--password', 'long-enough-pw', '--json'], env);
    expect(user.code).toBe(0);
    const userId = JSON.parse(user.stdout).id;
    expect((await runHere(['users', 'create', '--email', 'ana@example.com', '--password', 'long-enough-pw'], env)).stderr).toContain('already exists');

    const created = run(
      ['keys', 'create', '--email', 'ana@example.com', '--name', 'ci', '--webhook-url', 'http://127.0.0.1:9999/hook', '--signing-secret', 'whsec_test_secret', '--rate-limit-rpm', '5', '--json'],
      env,
    );
    expect(created.code).toBe(0);
    const key = JSON.parse(created.stdout);
    expect(key).toMatchObject({ user_id: userId, name: 'ci', webhook_url: 'http://127.0.0.1:9999/hook', rate_limit_rpm: 5, signing_secret: '…cret' });
    expect(key.key).toMatch(/^sk-svc-/);
    expect(key.id).toMatch(/^key_/);

    // neither the key nor the secret is stored in the clear
    const db = (await import('better-sqlite3')).default(join(dir, 'svc.db'), { readonly: true });
    const row = db.prepare('select * from api_keys where id = ?').get(key.id) as Record<string, unknown>;
    db.close();
    expect(JSON.stringify(row)).not.toContain(key.key);
    expect(JSON.stringify(row)).not.toContain('whsec_test_secret');

    const list = JSON.parse(run(['keys', 'list', '--json'], env).stdout);
    expect(list.map((k: { id: string }) => k.id)).toContain(key.id);
    expect(JSON.stringify(list)).not.toContain(key.key);

    // By the key itself, as an operator holding a leaked one has it (it was 'no such key'); then by its id.
    const revoked = run(['keys', 'revoke', key.key], env);
    expect([revoked.code, revoked.stderr]).toEqual([0, `revoked ${key.id} (${list[0].prefix})\n`]);
    const again = run(['keys', 'revoke', key.id], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already revoked');
    expect(JSON.parse(run(['keys', 'list', '--json'], env).stdout)[0].revoked).toBe(true);
  });

  it('loads no HTTP stack for an admin command or --help (they answer in a fraction of start\'s load time)', () => {
    // A module-resolution hook (it runs on a loader thread of its own) writes every package the command
    // resolves to stderr; express, undici and the server's other request-serving packages must not be among them.
    const hooksDir = tempDir();
    const hooks = join(hooksDir, 'hooks.mjs');
    writeFileSync(
      hooks,
      `import { writeSync } from 'node:fs';
      export async function resolve(specifier, context, next) {
        if (/^[@a-z]/.test(specifier) && !specifier.startsWith('node:')) writeSync(2, 'resolved ' + specifier + '\\n');
        return next(specifier, context);
      }`,
    );
    const register = join(hooksDir, 'register.mjs');
    writeFileSync(register, `import { register } from 'node:module'; register(${JSON.stringify(`file://${hooks}`)});`);
    const env = envFor(tempDir());
    const traced = (args: string[]) => {
      const r = spawnSync(process.execPath, ['--import', register, BIN, ...args], { env, encoding: 'utf8', timeout: 30_000 });
      expect(r.status, r.stderr).toBe(0);
      return [...r.stderr.matchAll(/^resolved (\S+)$/gm)].map((m) => m[1]!);
    };
    for (const args of [['--help'], ['migrate'], ['keys', 'list']]) {
      const loaded = traced(args);
      expect(loaded, args.join(' ')).toContain('commander');
      for (const serving of ['express', 'undici', 'helmet', 'prom-client', 'ioredis']) expect(loaded, args.join(' ')).not.toContain(serving);
    }
  });

  it('refuses bad input with one clear line', async () => {
    const env = envFor(tempDir());
    const noUser = run(['keys', 'create', '--email', 'nobody@example.com'], env);
    expect(noUser.code).toBe(1);
    expect(noUser.stderr.trim()).toBe('no such user: nobody@example.com (there are no users yet; create one with: svc-server users create --email nobody@example.com --password P)');
    run(['users', 'create', '--email', 'b@example.com', '--password', 'long-enough-pw'], env);
    const badUrl = await runHere(['keys', 'create', '--webhook-url', 'ftp://example.com/x'], env);
    expect(badUrl.code).toBe(1);
    expect(badUrl.stderr).toMatch(/--webhook-url: .*http/);
    const badRpm = run(['keys', 'create', '--rate-limit-rpm', 'lots'], env);
    expect(badRpm.code).not.toBe(0);
    expect(badRpm.stderr).toContain('positive integer');
    // A pasted newline would be part of the secret: every receiver's check would then fail.
    const pasted = await runHere(['keys', 'create', '--signing-secret', 'whsec_pasted_secret\n'], env);
    expect(pasted.code).toBe(1);
    expect(pasted.stderr.trim()).toBe('--signing-secret has white space around it (a pasted newline?): give it without');
  });

  // A dozen commands, each a node start: 30 s is short on a busy machine.
  it('with --json, a failure prints an error object on stdout too (backup, admin commands); without it stdout stays empty', () => {
    const dir = tempDir();
    const env = envFor(dir);
    expect(run(['migrate'], env).code).toBe(0);
    writeFileSync(join(dir, 'taken.db'), '');
    const failures = [
      ['backup', join(dir, 'taken.db'), '--json'],
      ['keys', 'create', '--email', 'nobody@example.com', '--json'],
      ['users', 'list', '--json'],
    ];
    for (const args of failures.slice(0, 2)) {
      const r = run(args, env);
      expect(r.code, args.join(' ')).toBe(1);
      const message = r.stderr.trim().split('\n').at(-1);
      expect(JSON.parse(r.stdout), args.join(' ')).toEqual({ error: { message, type: 'cli_error', code: null, param: null } });
      expect(run(args.slice(0, -1), env)).toMatchObject({ code: 1, stdout: '' });
    }
    // A command that succeeds prints its JSON alone.
    expect(JSON.parse(run(failures[2]!, env).stdout)).toEqual([]);
  });

  it('keys update sets the webhook URL and signing secret of a key named by the key itself, its prefix or its id', async () => {
    const dir = tempDir();
    const env = envFor(dir);
    run(['users', 'create', '--email', 'ana@example.com', '--password', 'long-enough-pw'], env);
    expect(run(['keys', 'create', '--email', 'nobody@example.com'], env).stderr.trim()).toBe(
      'no such user: nobody@example.com (users: ana@example.com; create one with: svc-server users create --email nobody@example.com --password P)',
    );
    const key = JSON.parse(run(['keys', 'create', '--json'], env).stdout);

    const byToken = run(['keys', 'update', key.key, '--webhook-url', 'http://127.0.0.1:9999/hook', '--signing-secret', 'whsec_first_secret', '--json'], env);
    expect(byToken.code, byToken.stderr).toBe(0);
    expect(JSON.parse(byToken.stdout)).toMatchObject({ id: key.id, webhook_url: 'http://127.0.0.1:9999/hook', signing_secret: '…cret', previous_signing_secret_last4: null });
    expect(byToken.stdout).not.toContain(key.key);

    // A second secret: the first keeps signing beside it for the overlap, as the dashboard's rotation does.
    const byPrefix = run(['keys', 'update', key.prefix, '--signing-secret', 'whsec_second_one', '--name', 'ci'], env);
    expect(byPrefix.code, byPrefix.stderr).toBe(0);
    expect(byPrefix.stderr).toContain(`updated key ${key.id} (ci): webhook http://127.0.0.1:9999/hook, signing secret …_one`);
    const listed = JSON.parse(run(['keys', 'list', '--json'], env).stdout)[0];
    expect(listed).toMatchObject({ name: 'ci', signing_secret: '…_one', previous_signing_secret_last4: 'cret' });
    const db = (await import('better-sqlite3')).default(join(dir, 'svc.db'), { readonly: true });
    const row = db.prepare('select * from api_keys where id = ?').get(key.id) as Record<string, unknown>;
    db.close();
    expect(JSON.stringify(row)).not.toContain('whsec_second_one');

    // From standard input: the secret is in neither shell history nor ps.
    const fromStdin = run(['keys', 'update', key.id, '--signing-secret-stdin', '--json'], env, 'whsec_from_stdin\n');
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(JSON.parse(fromStdin.stdout)).toMatchObject({ signing_secret: '…tdin', previous_signing_secret_last4: '_one' });
    const both = await runHere(['keys', 'update', key.id, '--signing-secret', 'whsec_other_one', '--signing-secret-stdin'], env, 'whsec_from_stdin\n');
    expect(both.stderr.trim()).toBe('give the signing secret once: --signing-secret S or --signing-secret-stdin, not both');
    const created = run(['keys', 'create', '--name', 'piped', '--signing-secret-stdin', '--json'], env, 'whsec_piped_in\n');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'piped', signing_secret: '…d_in' });

    const cleared = run(['keys', 'update', key.id, '--webhook-url', '', '--json'], env);
    expect(JSON.parse(cleared.stdout).webhook_url).toBeNull();

    expect((await runHere(['keys', 'update', key.id], env)).stderr.trim()).toBe('nothing to change: give --webhook-url, --signing-secret, --name or --rate-limit-rpm');
    expect((await runHere(['keys', 'update', 'key_nope', '--name', 'x'], env)).stderr.trim()).toBe('no such key: key_nope (svc-server keys list shows the ids and prefixes)');
    const badUrl = await runHere(['keys', 'update', key.id, '--webhook-url', 'ftp://example.com/x'], env);
    expect(badUrl.code).toBe(1);
    expect(badUrl.stderr).toMatch(/--webhook-url: .*http/);
    run(['keys', 'revoke', key.id], env);
    expect((await runHere(['keys', 'update', key.id, '--name', 'x'], env)).stderr.trim()).toBe(`key ${key.id} is revoked`);
  });

  it('users list shows each user, when created and their active keys, and never a password hash', async () => {
    const dir = tempDir();
    const env = envFor(dir);
    expect(run(['users', 'list'], env).stderr.trim()).toBe('there are no users yet (create one with: svc-server users create --email E --password-stdin)');
    const ana = JSON.parse(run(['users', 'create', '--email', 'ana@example.com', '--password', 'long-enough-pw', '--json'], env).stdout);
    // Read from standard input, one final line break dropped: the password is never on a command line.
    const bo = run(['users', 'create', '--email', 'bo@example.com', '--password-stdin', '--json'], env, 'from stdin pw\n');
    expect(bo.code, bo.stderr).toBe(0);
    const boId = JSON.parse(bo.stdout).id;
    const first = JSON.parse(run(['keys', 'create', '--email', 'ana@example.com', '--json'], env).stdout);
    run(['keys', 'create', '--email', 'ana@example.com'], env);
    run(['keys', 'revoke', first.id], env);

    const listed = JSON.parse(run(['users', 'list', '--json'], env).stdout);
    expect(listed).toEqual([
      { id: ana.id, email: 'ana@example.com', created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/), active_keys: 1 },
      { id: boId, email: 'bo@example.com', created_at: expect.stringMatching(/Z$/), active_keys: 0 },
    ]);
    const text = run(['users', 'list'], env);
    expect(text.stdout).toMatch(new RegExp(`^ana@example\\.com  ${ana.id}  created \\S+Z  1 active key\nbo@example\\.com  ${boId}  created \\S+Z  0 active keys\n$`));

    const db = (await import('better-sqlite3')).default(join(dir, 'svc.db'), { readonly: true });
    const hashes = (db.prepare('select password_hash from users').all() as Array<{ password_hash: string }>).map((r) => r.password_hash);
    db.close();
    expect(hashes).toHaveLength(2);
    for (const out of [JSON.stringify(listed), text.stdout, text.stderr]) {
      expect(out).not.toContain('scrypt');
      for (const hash of hashes) expect(out).not.toContain(hash.split('$').at(-1));
    }

    // The password from standard input is the one that signs in (without its line break).
    const { child, url } = await start(env);
    try {
      expect((await new DashboardClient(url).login('bo@example.com', 'from stdin pw')).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });

  it('users set-password signs in with the new password only and ends the sessions of the old one', async () => {
    const env = envFor(tempDir());
    run(['users', 'create', '--email', 'ana@example.com', '--password', 'forgotten-pw'], env);
    run(['users', 'create', '--email', 'bo@example.com', '--password', 'bos-own-pw'], env);
    const { child, url } = await start(env);
    try {
      const old = new DashboardClient(url);
      expect((await old.login('ana@example.com', 'forgotten-pw')).status).toBe(200);
      expect((await old.request('GET', '/me')).status).toBe(200);
      const other = new DashboardClient(url);
      expect((await other.login('bo@example.com', 'bos-own-pw')).status).toBe(200);

      const reset = run(['users', 'set-password', '--email', 'ANA@example.com', '--password-stdin'], env, 'a-new-password\n');
      expect(reset.code, reset.stderr).toBe(0);
      expect(reset.stderr.trim()).toBe('set a new password for ana@example.com; every dashboard session of theirs has ended');
      expect(reset.stdout).toBe('');

      // The old cookie is refused at once, by the running server; another user's session is untouched.
      const refused = await old.request('GET', '/me');
      expect(refused.status).toBe(401);
      expect(refused.body.error.code).toBe('not_signed_in');
      expect((await other.request('GET', '/me')).status).toBe(200);
      expect((await new DashboardClient(url).login('ana@example.com', 'forgotten-pw')).status).toBe(401);
      const fresh = new DashboardClient(url);
      expect((await fresh.login('ana@example.com', 'a-new-password')).status).toBe(200);
      expect((await fresh.request('GET', '/me')).body.user.email).toBe('ana@example.com');

      // --password as on `users create`.
      expect(run(['users', 'set-password', '--email', 'ana@example.com', '--password', 'third-password'], env).code).toBe(0);
      expect((await fresh.request('GET', '/me')).status).toBe(401);
      expect((await new DashboardClient(url).login('ana@example.com', 'third-password')).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });

  it('users set-password and users create refuse a bad password option, set-password an unknown email, with one clear line', async () => {
    const env = envFor(tempDir());
    run(['users', 'create', '--email', 'ana@example.com', '--password', 'long-enough-pw'], env);
    const cases: Array<[string[], string, string]> = [
      [['users', 'set-password', '--email', 'nobody@example.com', '--password', 'long-enough-pw'], '', 'no such user: nobody@example.com (users: ana@example.com; create one with: svc-server users create --email nobody@example.com --password P)'],
      [['users', 'set-password', '--email', 'ana@example.com', '--password', 'short'], '', 'the password must have at least 8 characters'],
      [['users', 'set-password', '--email', 'ana@example.com', '--password-stdin'], 'short\n', 'the password must have at least 8 characters'],
      [['users', 'set-password', '--email', 'ana@example.com', '--password-stdin'], '', 'the password must have at least 8 characters'],
      [['users', 'set-password', '--email', 'ana@example.com', '--password', 'long-enough-pw', '--password-stdin'], 'long-enough-pw', 'give the password once: --password P or --password-stdin, not both'],
      [['users', 'set-password', '--email', 'ana@example.com'], '', 'give the password: --password P, or --password-stdin to read it from standard input'],
      [['users', 'create', '--email', 'bo@example.com'], '', 'give the password: --password P, or --password-stdin to read it from standard input'],
      [['users', 'create', '--email', 'bo@example.com', '--password', 'long-enough-pw', '--password-stdin'], 'long-enough-pw', 'give the password once: --password P or --password-stdin, not both'],
      [['users', 'create', '--email', 'bo@example.com', '--password-stdin'], 'short', 'the password must have at least 8 characters'],
    ];
    for (const [i, [args, input, line]] of cases.entries()) {
      const r = i === 0 ? run(args, env, input) : await runHere(args, env, input);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(`${line}\n`);
    }
    expect(run(['users', 'list'], env).stdout).not.toContain('bo@example.com');
  });

  it('keys create keeps to SVC_MAX_KEY_RATE_LIMIT_RPM and SVC_MAX_KEYS_PER_USER', async () => {
    const env = { ...envFor(tempDir()), SVC_MAX_KEY_RATE_LIMIT_RPM: '500', SVC_MAX_KEYS_PER_USER: '1' };
    run(['users', 'create', '--email', 'c@example.com', '--password', 'long-enough-pw'], env);
    const over = run(['keys', 'create', '--rate-limit-rpm', '501'], env);
    expect(over.code).toBe(1);
    expect(over.stderr).toMatch(/--rate-limit-rpm: .*1 to 500 .*SVC_MAX_KEY_RATE_LIMIT_RPM/);
    expect(run(['keys', 'create', '--rate-limit-rpm', '500'], env).code).toBe(0);
    const second = await runHere(['keys', 'create'], env);
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(/SVC_MAX_KEYS_PER_USER=1/);
  });
});
