import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { backupSqlite } from '../../../src/storage/sqlite-backup.js';
import { openStore } from '../../../src/storage/store.js';

/**
 * The backup's file, whatever an earlier backup cut short (or anyone who can write to the backup directory) left
 * at its `.partial` name: the copy holds key hashes, sealed signing secrets and every payload.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function migratedDatabase(): Promise<{ dir: string; file: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-backup-unit-'));
  dirs.push(dir);
  const file = join(dir, 'svc.db');
  const store = await openStore(`sqlite:${file}`);
  await store.close();
  return { dir, file };
}

describe('backupSqlite', () => {
  it('writes the copy with mode 0600 when a .partial readable by others is already there', async () => {
    const { dir, file } = await migratedDatabase();
    const target = join(dir, 'copy.db');
    writeFileSync(`${target}.partial`, '', { mode: 0o644 });
    expect(statSync(`${target}.partial`).mode & 0o777).toBe(0o644);

    backupSqlite(file, target);

    expect(statSync(target).mode & 0o777).toBe(0o600);
  });

  it('does not write through a link left at the .partial name', async () => {
    const { dir, file } = await migratedDatabase();
    const elsewhere = join(dir, 'elsewhere');
    writeFileSync(elsewhere, '', { mode: 0o644 });
    const target = join(dir, 'copy.db');
    symlinkSync(elsewhere, `${target}.partial`);

    backupSqlite(file, target);

    expect(readFileSync(elsewhere).length).toBe(0);
    expect(statSync(target).isFile()).toBe(true);
    expect(statSync(target).mode & 0o777).toBe(0o600);
  });

  it('takes over the lock a backup killed midway left, and refuses while its process lives', async () => {
    const { dir, file } = await migratedDatabase();
    const target = join(dir, 'copy.db');
    // The test process is alive: its lock is a backup in progress.
    writeFileSync(`${target}.lock`, `${process.pid}\n`);
    expect(() => backupSqlite(file, target)).toThrow(`another backup to ${target} is being written (svc-server backup, process ${process.pid})`);

    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(`${target}.lock`, `${gone}\n`);
    backupSqlite(file, target);
    expect(statSync(target).isFile()).toBe(true);
    expect(existsSync(`${target}.lock`)).toBe(false);
  });
});
