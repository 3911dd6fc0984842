import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CheckpointThread } from '../../../src/storage/checkpoint-thread.js';
import { checkpointOnThreadOrHere, openDatabase, queryWaitFor, WalCheckpointer, type DatabaseHandle } from '../../../src/storage/database.js';

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
    // The timer's checkpoint (on its thread) copies the pages within about a second.
    for (let i = 0; i < 100 && statSync(file).size <= 1500 * 3000; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(statSync(file).size).toBeGreaterThan(1500 * 3000);
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

/** Databases of the tests below, closed and removed after each. */
const opened: Array<{ dir: string; db: SQLite.Database }> = [];
afterEach(() => {
  for (const { dir, db } of opened.splice(0)) {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A WAL database with one table, SQLite's own autocheckpoint off (only what the test runs copies pages), and `rows(n)` to commit n rows of 3,000 characters. */
function walDatabase() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-db-'));
  const file = join(dir, 'svc.db');
  const db = new SQLite(file);
  opened.push({ dir, db });
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('create table t (v text)');
  const insert = db.prepare('insert into t (v) values (?)');
  const rows = (n: number) => {
    for (let i = 0; i < n; i++) insert.run('x'.repeat(3000));
  };
  return { db, dir, file, rows };
}

describe('a transaction SQLite rolled back itself', () => {
  it('fails with the error that made it (SQLITE_FULL), not with the rollback that followed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-db-'));
    const handle = openDatabase(`sqlite:${join(dir, 'svc.db')}`);
    try {
      const sqlite = handle.sqlite!;
      sqlite.exec('create table t (v text)');
      sqlite.pragma(`max_page_count = ${sqlite.pragma('page_count', { simple: true }) as number}`);
      const write = handle.db.transaction().execute(async (trx) => {
        await sql`insert into t (v) values (${'x'.repeat(100_000)})`.execute(trx);
      });
      // Was "cannot rollback - no transaction is active": SQLite ends the transaction on SQLITE_FULL.
      await expect(write).rejects.toMatchObject({ code: 'SQLITE_FULL' });
      expect(sqlite.inTransaction).toBe(false);
      sqlite.pragma('max_page_count = 4294967294');
      await handle.db.transaction().execute((trx) => sql`insert into t (v) values ('fits')`.execute(trx));
    } finally {
      await handle.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('WalCheckpointer', () => {
  it('checkpoints once enough rows changed, else once the interval passed, never inside a transaction', () => {
    const { db, file, rows } = walDatabase();
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

describe('checkpoints on a thread of their own', () => {
  let thread: CheckpointThread | undefined;
  afterEach(async () => {
    await thread?.close();
    thread = undefined;
  });

  const until = async (done: () => boolean) => {
    for (let i = 0; i < 500 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    return done();
  };

  it("copies the WAL into the file from its own connection, one checkpoint at a time, while this one goes on writing", async () => {
    const { db, file, rows } = walDatabase();
    rows(1500);
    const before = statSync(file).size;
    thread = new CheckpointThread(file);
    expect(thread.request()).toBe(true);
    expect(thread.request()).toBe(false); // one is running: asked again at a later tick
    rows(10); // the writer is not held up by the checkpointer
    expect(await until(() => thread!.completed === 1)).toBe(true);
    expect(thread.lastError).toBeUndefined();
    expect(statSync(file).size).toBeGreaterThan(before + 1500 * 3000);
    expect(db.prepare('select count(*) from t').pluck().get()).toBe(1510);
    expect(thread.request()).toBe(true);
    expect(await until(() => thread!.completed === 2)).toBe(true);
  });

  it('the checkpointer asks the thread only when due, and asks again when the thread was busy', () => {
    const { db, rows } = walDatabase();
    let now = 0;
    const answers = [false, true];
    const asked: number[] = [];
    const checkpoints = new WalCheckpointer(db, { intervalMs: 1000, changes: 100, now: () => now, checkpoint: () => (asked.push(now), answers.shift()!) });
    rows(50);
    now = 10;
    expect(checkpoints.tick()).toBe(false);
    expect(asked).toEqual([]);
    rows(50);
    now = 20;
    expect(checkpoints.tick()).toBe(false); // due, but the thread is busy
    now = 30;
    expect(checkpoints.tick()).toBe(true); // still due: asked again
    expect(asked).toEqual([20, 30]);
  });

  it('close() ends the thread and its connection (the last one to close removes the WAL); a request after it starts nothing', async () => {
    const { db, file, rows } = walDatabase();
    rows(10);
    thread = new CheckpointThread(file);
    expect(thread.request()).toBe(true);
    expect(await until(() => thread!.completed === 1)).toBe(true);
    await thread.close();
    expect(thread.request()).toBe(false);
    expect(thread.failed).toBe(false);
    db.close();
    opened.pop();
    expect(existsSync(`${file}-wal`)).toBe(false);
  });

  it('a thread whose connection cannot open is failed: it says why, refuses requests, and closes at once', async () => {
    const { dir } = walDatabase();
    thread = new CheckpointThread(join(dir, 'missing.db'));
    expect(thread.request()).toBe(true); // the thread starts with the first request
    expect(await until(() => thread!.failed)).toBe(true);
    expect(thread.lastError).toMatch(/cannot open .*missing\.db/);
    expect(thread.request()).toBe(false);
    await thread.close();
  });

  it('once the thread has failed, checkpoints run on the writer connection, and the fallback is told once why', async () => {
    const { db, dir, rows } = walDatabase();
    thread = new CheckpointThread(join(dir, 'missing.db'));
    const reasons: string[] = [];
    const checkpoint = checkpointOnThreadOrHere(thread, db, (reason) => reasons.push(reason));
    expect(checkpoint()).toBe(true); // asks the thread, which then fails to open
    expect(await until(() => thread!.failed)).toBe(true);
    expect(reasons).toEqual([]);
    rows(50);
    const pragma = vi.spyOn(db, 'pragma');
    expect(checkpoint()).toBe(true);
    expect(pragma).toHaveBeenCalledWith('wal_checkpoint(PASSIVE)');
    expect(checkpoint()).toBe(true);
    expect(pragma).toHaveBeenCalledTimes(2);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/cannot open .*missing\.db/);
  });
});

describe('the Postgres query wait bound', () => {
  it.each([
    ['postgres://svc@db.example/svc', 15_000],
    ['postgres://svc@db.example/svc?lock_timeout=30000', 35_000],
    // A shorter or disabled lock_timeout keeps the default bound: the bound is for packets dropped, not for locks.
    ['postgres://svc@db.example/svc?lock_timeout=2000', 15_000],
    ['postgres://svc@db.example/svc?lock_timeout=0', 15_000],
  ])('%s: a query waits at most %i ms for its answer (past lock_timeout, so a lock wait fails as 55P03)', (url, bound) => {
    expect(queryWaitFor(url)).toBe(bound);
  });
});
