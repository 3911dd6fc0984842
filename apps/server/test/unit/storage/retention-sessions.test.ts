// Expired dashboard sessions are purged by the server's hourly housekeeping, not only when someone signs in:
// an instance nobody signs in to would otherwise keep them for good. SQLite and Postgres.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/logging/logger.js';
import { startServer } from '../../../src/server.js';
import { Retention } from '../../../src/storage/retention.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { createTestPostgres } from '../../support/databases.js';

const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'svc-retention-sessions-'));
const postgres = await createTestPostgres('retention sessions');
afterAll(async () => {
  await postgres?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const variants: Array<[string, string]> = [['sqlite', `sqlite:${join(dir, 'svc.db')}`]];
if (postgres) variants.push(['postgres', postgres.url]);

/** An expired and a live session of a new user; their token hashes. */
async function twoSessions(store: Store, now: number): Promise<{ expired: string; live: string }> {
  const user = await store.users.create({ email: `${randomBytes(4).toString('hex')}@example.test`, passwordHash: 'scrypt$x', now });
  const expired = randomBytes(16).toString('hex');
  const live = randomBytes(16).toString('hex');
  await store.sessions.create({ tokenHash: expired, userId: user.id, csrfToken: 'c', now: now - 8 * DAY, expiresAt: now - DAY });
  await store.sessions.create({ tokenHash: live, userId: user.id, csrfToken: 'c', now, expiresAt: now + DAY });
  return { expired, live };
}

const stored = async (store: Store, tokenHash: string) =>
  (await store.handle.db.selectFrom('sessions').select('token_hash').where('token_hash', '=', tokenHash).executeTakeFirst()) !== undefined;

describe.each(variants)('expired dashboard sessions on %s', (_name, url) => {
  it('are purged by Retention, with no sign-in; live ones stay', async () => {
    const store = await openStore(url);
    try {
      const now = Date.now();
      const { expired, live } = await twoSessions(store, now);
      const lines: string[] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
      await new Retention({ stores: {}, expiring: { 'dashboard sessions': store.sessions }, retentionDays: 30, clock: () => now, logger }).purge();
      expect(await stored(store, expired)).toBe(false);
      expect(await stored(store, live)).toBe(true);
      expect(lines.join('')).toContain('purged expired dashboard sessions');
    } finally {
      await store.close();
    }
  });

  it('are purged by a running server', async () => {
    const store = await openStore(url);
    let sessions: { expired: string; live: string };
    try {
      sessions = await twoSessions(store, Date.now());
    } finally {
      await store.close();
    }
    const lines: string[] = [];
    const running = await startServer(loadConfig({ SVC_HOST: '127.0.0.1', SVC_PORT: '0', SVC_DATABASE_URL: url, SVC_SECRET_KEY: randomBytes(32).toString('base64') }), {
      logger: createLogger('info', { write: (line: string) => lines.push(line) } as unknown as NodeJS.WritableStream),
    });
    try {
      // The first pass runs at start, unawaited: wait for what it says.
      await expect.poll(() => lines.join(''), { timeout: 30_000 }).toContain('purged expired dashboard sessions');
      expect(await stored(running.store, sessions.expired)).toBe(false);
      expect(await stored(running.store, sessions.live)).toBe(true);
    } finally {
      await running.close();
    }
  });
});
