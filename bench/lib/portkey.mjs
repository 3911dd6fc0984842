// Portkey's gateway, installed on demand into a temp dir (never a project dependency).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, spawnPinned, waitHttp } from './procs.mjs';

const run = promisify(execFile);
export const PORTKEY_VERSION = '1.15.2';
const DIR = join(tmpdir(), `svc-bench-portkey-${PORTKEY_VERSION}`);
const ENTRY = join(DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js');

/**
 * Installs @portkey-ai/gateway into a temp dir (reused across runs) with the overrides its streaming needs.
 * Returns the entry script path, or throws with npm's message.
 */
export async function installPortkey() {
  if (existsSync(ENTRY)) {
    const pkg = JSON.parse(readFileSync(join(DIR, 'node_modules/@portkey-ai/gateway/package.json'), 'utf8'));
    if (pkg.version === PORTKEY_VERSION) return ENTRY;
  }
  mkdirSync(DIR, { recursive: true });
  writeFileSync(
    join(DIR, 'package.json'),
    JSON.stringify(
      {
        name: 'svc-bench-portkey',
        private: true,
        dependencies: { '@portkey-ai/gateway': PORTKEY_VERSION },
        overrides: { '@hono/node-server': '1.13.5', '@hono/node-ws': '1.2.0' },
      },
      null,
      2,
    ),
  );
  await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], {
    cwd: DIR,
    timeout: 300_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  if (!existsSync(ENTRY)) throw new Error(`npm install finished but ${ENTRY} is missing`);
  return ENTRY;
}

/** Starts the gateway pinned to `core`. Returns { proc, url, headers } for calls through it to `upstreamUrl`. */
export async function startPortkey({ core, entry, upstreamUrl }) {
  const port = await freePort();
  const proc = spawnPinned(core, process.execPath, [entry, `--port=${port}`, '--headless'], {
    cwd: DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' },
    logFile: join(DIR, 'gateway.log'),
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHttp(`${url}/`, { proc });
  return {
    proc,
    url,
    headers: { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamUrl, authorization: 'Bearer x' },
  };
}
