import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logging/logger.js';
import { startServer, type RunningServer } from '../src/server.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const quietLogger = () =>
  createLogger(
    'warn',
    new Writable({
      write: (_chunk, _enc, cb) => cb(),
    }),
  );

async function takenPort(): Promise<number> {
  const blocker: Server = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  return (blocker.address() as { port: number }).port;
}

describe('svc-server start failing after the store opened', () => {
  it('a taken port is said with the setting to change, and the store is released: the next start on the same database succeeds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-start-fail-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const env = { SVC_HOST: '127.0.0.1', SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`, SVC_LOG_LEVEL: 'warn' };
    const port = await takenPort();

    const refused = startServer(loadConfig({ ...env, SVC_PORT: String(port) }), { logger: quietLogger() });
    await expect(refused).rejects.toThrow(
      `cannot listen on 127.0.0.1:${port} (SVC_HOST:SVC_PORT): the port is already in use by another program (another svc?): stop it, or set SVC_PORT to a free port`,
    );

    // The failed start held the server lock (and the SQLite connection): this start was refused as "another svc
    // server is already running" by a process with no server in it.
    let running: RunningServer | undefined;
    try {
      running = await startServer(loadConfig({ ...env, SVC_PORT: '0' }), { logger: quietLogger() });
      expect((await fetch(`${running.url}/readyz`)).status).toBe(200);
    } finally {
      await running?.close();
    }
  });
});
