import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MIN_CALIBRATION_ROWS } from '@svc/grounding';
import { adminCommand, SERVER_BIN, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';

// What an svc-server command loads: each package is a cost that every admin command and every start pays (node
// reads, compiles and links its modules one by one). The built command runs with the packages it should not
// need refused (support/refuse-packages.mjs): it works only if it did not import them.

const REFUSE = resolve(import.meta.dirname, 'support/refuse-packages.mjs');
const dirs: string[] = [];
const servers: ServerProcess[] = [];

/** The env of a command on a fresh SQLite database, whose imports of `refused` (and their subpaths but `allowed`) fail. */
function envRefusing(refused: string[], allowed: string[] = []): NodeJS.ProcessEnv {
  const dir = mkdtempSync(join(tmpdir(), 'svc-loads-'));
  dirs.push(dir);
  return serverEnv({
    SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`,
    NODE_OPTIONS: `--import=${REFUSE}`,
    TEST_REFUSED_PACKAGES: refused.join(','),
    TEST_ALLOWED_IMPORTS: allowed.join(','),
  });
}

function run(args: string[], env: NodeJS.ProcessEnv) {
  const r = spawnSync(process.execPath, [SERVER_BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  if (!existsSync(SERVER_BIN)) throw new Error(`${SERVER_BIN} is missing: run npm run build first (npm test does)`);
});

afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('what svc-server commands load', () => {
  it('a command that needs a refused package fails, naming it (the refusal works)', () => {
    const r = run(['keys', 'list'], envRefusing(['better-sqlite3']));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('refused by the test: better-sqlite3');
  });

  it('--help, --version and a mistyped command load neither the configuration, the protocol, the grounding check, the database nor the tokenizer', () => {
    const env = envRefusing(
      ['zod', '@svc/protocol', '@svc/grounding', 'better-sqlite3', 'kysely', 'gpt-tokenizer', 'pg', 'express', 'undici'],
      // The one constant the grounding command's help names, in a module of its own.
      ['@svc/grounding/min-calibration-rows'],
    );
    const help = run(['--help'], env);
    expect(help.stderr).toBe('');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: svc-server /);
    const keysHelp = run(['keys', 'create', '--help'], env);
    expect(keysHelp.code).toBe(0);
    expect(keysHelp.stdout).toContain('--webhook-url <url>');
    const calibrateHelp = run(['grounding', 'calibrate', '--help'], env);
    expect(calibrateHelp).toMatchObject({ code: 0, stderr: '' });
    expect(calibrateHelp.stdout.replace(/\s+/g, ' ')).toContain(`at least ${MIN_CALIBRATION_ROWS} rows of both labels`);
    expect(run(['--version'], env)).toMatchObject({ code: 0, stderr: '' });
    const typo = run(['kyes', 'list'], env);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain("unknown command 'kyes'");
    expect(typo.stderr).not.toContain('refused by the test');
  });

  it('the admin commands load neither kysely as a package of its own (it is part of the build) nor the tokenizer', () => {
    const env = envRefusing(['kysely', 'gpt-tokenizer']);
    adminCommand(['users', 'create', '--email', 'ana@example.com', '--password', 'a-password'], env);
    const { id } = JSON.parse(adminCommand(['keys', 'create', '--email', 'ana@example.com', '--json'], env)) as { id: string };
    expect(adminCommand(['keys', 'list'], env)).toContain(id);
  });

  it('start on the offline model listens before it loads the tokenizer (refused here: it says so, and serves on)', async () => {
    const server = await startServerProcess(envRefusing(['gpt-tokenizer']), [], { timeoutMs: 100_000 });
    servers.push(server);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    await expect.poll(() => server.stderr()).toContain("the offline model's tokenizer could not be loaded");
    expect(server.stderr()).toContain('refused by the test: gpt-tokenizer');
    expect(await server.stop()).toBe(0);
  }, 120_000);

  it('start serves, and stops, without kysely as a package of its own', async () => {
    const server = await startServerProcess(envRefusing(['kysely']), [], { timeoutMs: 100_000 });
    servers.push(server);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect(await server.stop()).toBe(0);
    expect(server.stderr()).not.toContain('refused by the test');
  }, 120_000);
});
