import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Retention } from '../../../src/storage/retention.js';
import { backupSqlite } from '../../../src/storage/sqlite-backup.js';
import { freeSpace, shrinkAfterPurge } from '../../../src/storage/sqlite-free-pages.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { storedResponse } from '../../support/responses.js';

const DAY = 86_400_000;
const NOW = 100 * DAY;
const dirs: string[] = [];
const stores: Store[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function storeIn(file: string): Promise<Store> {
  const store = await openStore(`sqlite:${file}`);
  stores.push(store);
  return store;
}

/** 2,000 stored responses of 4 KB each, 40 days old: about 10 MB that the retention purge removes. */
async function fillWithOldResponses(store: Store): Promise<void> {
  const text = 'x'.repeat(4000);
  for (let i = 0; i < 2000; i++) {
    await store.responses.save('key', storedResponse({ id: `resp_${i}`, createdAt: Math.floor((NOW - 40 * DAY) / 1000), text }), []);
  }
}

/** The file's size once the WAL is copied back into it (as the server's checkpoints do). */
function fileSize(store: Store, file: string): number {
  store.handle.sqlite!.pragma('wal_checkpoint(TRUNCATE)');
  return statSync(file).size;
}

function purgeWithLog(store: Store): { retention: Retention; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const retention = new Retention({
    stores: { responses: store.responses },
    retentionDays: 30,
    clock: () => NOW,
    logger,
    afterPurge: shrinkAfterPurge(store.handle.sqlite!, logger),
  });
  return { retention, lines };
}

describe('the SQLite file after a retention purge', () => {
  it('shrinks: a database svc creates gives the purged rows\' pages back (it stayed at its peak until a VACUUM with svc stopped)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-free-pages-'));
    dirs.push(dir);
    const file = join(dir, 'svc.db');
    const store = await storeIn(file);
    await fillWithOldResponses(store);
    const before = fileSize(store, file);
    expect(before).toBeGreaterThan(8_000_000);

    const { retention, lines } = purgeWithLog(store);
    await retention.purge();
    const after = fileSize(store, file);
    expect(after).toBeLessThan(before / 10);
    expect(freeSpace(store.handle.sqlite!).freeBytes).toBe(0);
    const line = lines.find((l) => String(l.msg).startsWith('gave the free pages'));
    expect(line?.freed_bytes).toBeGreaterThan(before / 2);
  });

  it('a database created before svc set it is told once to convert through a backup, whose copy is compact and shrinks from then on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-free-pages-'));
    dirs.push(dir);
    const file = join(dir, 'svc.db');
    // As an earlier release created it: auto_vacuum NONE.
    const old = new SQLite(file);
    old.pragma('page_size = 8192');
    old.pragma('journal_mode = WAL');
    old.exec('create table placeholder (x)');
    old.close();
    const store = await storeIn(file);
    await fillWithOldResponses(store);
    // Ten times the data, as a month of traffic: the free space passes the note's threshold.
    for (let round = 0; round < 6; round++) {
      const text = 'y'.repeat(12_000);
      for (let i = 0; i < 1000; i++) {
        await store.responses.save('key', storedResponse({ id: `resp_${round}_${i}`, createdAt: Math.floor((NOW - 40 * DAY) / 1000), text }), []);
      }
    }
    const before = fileSize(store, file);
    const { retention, lines } = purgeWithLog(store);
    await retention.purge();
    expect(freeSpace(store.handle.sqlite!)).toMatchObject({ reclaimable: false });
    const notes = () => lines.filter((l) => String(l.msg).startsWith('the database file keeps the space of purged rows'));
    expect(notes()).toHaveLength(1);
    expect(notes()[0]!.free_bytes).toBeGreaterThan(64 * 1024 * 1024);

    const copy = join(dir, 'copy.db');
    backupSqlite(file, copy);
    expect(statSync(copy).size).toBeLessThan(before / 10);
    const restored = await storeIn(copy);
    expect(freeSpace(restored.handle.sqlite!).reclaimable).toBe(true);
  });
});
