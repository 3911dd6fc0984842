import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CLI_BIN } from './cli-process.js';

const HOOKS = new URL('./record-imports.mjs', import.meta.url).href;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-cli-start-up-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The modules `svc-cli ARGS` loads, by resolved URL. */
async function modulesLoaded(args: string[]): Promise<string[]> {
  const record = join(dir, 'modules.txt');
  const register = `data:text/javascript,import{register}from"node:module";register(${JSON.stringify(HOOKS)});`;
  await promisify(execFile)(process.execPath, ['--import', register, CLI_BIN, ...args], { env: { ...process.env, RECORD_IMPORTS: record, NO_COLOR: '1' } });
  return readFileSync(record, 'utf8').split('\n').filter(Boolean);
}

// Every command answers --help and --version at once: the HTTP client (undici) and the schemas (zod) load only in
// the commands that use them.
describe('svc-cli start-up', () => {
  it.each([['--help'], ['--version'], ['deliveries', '--help'], ['listen', '--help']])('%s %s loads neither undici nor zod', async (...args) => {
    const modules = await modulesLoaded(args.filter((arg) => arg !== undefined));
    expect(modules.some((url) => url.includes('/commander/'))).toBe(true);
    expect([...new Set(modules.map((url) => /\/node_modules\/(undici|zod)\//.exec(url)?.[1]).filter(Boolean))]).toEqual([]);
  });
});
