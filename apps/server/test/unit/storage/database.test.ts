import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, WalCheckpointer, type DatabaseHandle } from '../../../src/storage/database.js';

describe('SQLite WAL checkpoints', () => {
  let dir: string | undefined;
  let handle: DatabaseHandle | undefined;
  afterEach(async () => {
    await handle?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('copies the WAL into the database file on a timer, not in the commit that passes 1,000 pages', async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-db-'));
    const file = join(dir, 'svc.db');
    handle = openDatabase(`sqlite:${file}`);
    const sqlite = handle.sqlite!;
    expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(10_000);
    // 2 MB of page cache, not better-sqlite3's 16 MB (the outbox would fill it and keep it).
    expect(sqlite.pragma('cache_size', { simple: true })).toBe(-2048);
    // A new database gets 8 KiB pages (outbox rows share pages).
    const pageSize = sqlite.pragma('page_size', { simple: true }) as number;
    expect(pageSize).toBe(8192);
    sqlite.exec('create table t (v text)');
    const insert = sqlite.prepare('insert into t (v) values (?)');
    // ~1,500 WAL frames (one commit each): past SQLite's default autocheckpoint (1,000), below ours.
    for (let i = 0; i < 1500; i++) insert.run('x'.repeat(3000));
    const walFrames = () => statSync(`${file}-wal`).size / (pageSize + 24);
    expect(walFrames()).toBeGreaterThan(1000);
    const before = statSync(file).size;
    expect(before).toBeLessThan(64 * 1024); // nothing checkpointed in a commit
    await new Promise((resolve) => setTimeout(resolve, 1300));
    expect(statSync(file).size).toBeGreaterThan(1500 * 3000); // the timer's checkpoint copied the pages
  });

  it('keeps the page size of a database made before (4 KiB), whose data stays readable', async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-db-'));
    const file = join(dir, 'svc.db');
    const old = new SQLite(file);
    old.pragma('journal_mode = WAL');
    old.exec("create table t (v text); insert into t (v) values ('kept')");
    old.close();
    handle = openDatabase(`sqlite:${file}`);
    const sqlite = handle.sqlite!;
    expect(sqlite.pragma('page_size', { simple: true })).toBe(4096);
    sqlite.prepare('insert into t (v) values (?)').run('added');
    expect(sqlite.prepare('select v from t order by rowid').pluck().all()).toEqual(['kept', 'added']);
  });
});

describe('WalCheckpointer', () => {
  let dir: string | undefined;
  let sqlite: SQLite.Database | undefined;
  afterEach(() => {
    sqlite?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('checkpoints once enough rows changed, else once the interval passed, never inside a transaction', () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-db-'));
    const file = join(dir, 'svc.db');
    const db = (sqlite = new SQLite(file));
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0'); // only the checkpointer copies pages here
    db.exec('create table t (v text)');
    const insert = db.prepare('insert into t (v) values (?)');
    const rows = (n: number) => {
      for (let i = 0; i < n; i++) insert.run('x'.repeat(3000));
    };
    const fileSize = () => statSync(file).size;
    let now = 0;
    const checkpoints = new WalCheckpointer(db, { intervalMs: 1000, changes: 100, now: () => now });

    rows(99);
    now = 10;
    const before = fileSize();
    expect(checkpoints.tick()).toBe(false); // 99 changes, 10 ms: not due
    expect(fileSize()).toBe(before);
    rows(1);
    expect(checkpoints.tick()).toBe(true); // 100 changes
    expect(fileSize()).toBeGreaterThan(before + 99 * 3000);

    rows(5);
    now = 500;
    expect(checkpoints.tick()).toBe(false); // 5 changes, 490 ms since the last one
    now = 1010;
    const small = fileSize();
    expect(checkpoints.tick()).toBe(true); // the interval passed
    expect(fileSize()).toBeGreaterThan(small);

    rows(200);
    db.exec('begin');
    expect(checkpoints.tick()).toBe(false); // a transaction is open on the connection
    db.exec('commit');
    expect(checkpoints.tick()).toBe(true);
  });
});
