import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { lockTarget } from '../../../src/storage/sqlite-backup.js';

/**
 * Two backups to one name taking over the lock a killed backup left, at once: exactly one takes it. The second is
 * made to read the left-over lock's holder just before the first takes it over, the moment the race turns on.
 */

/** Called once with the path of the next file the backup reads, before it is read; its result is what is read. */
let beforeRead: ((path: string) => void) | undefined;

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return {
    ...real,
    readFileSync: ((path: fs.PathOrFileDescriptor, options?: unknown) => {
      const content = real.readFileSync(path, options as BufferEncoding);
      const hook = beforeRead;
      beforeRead = undefined;
      hook?.(String(path));
      return content;
    }) as typeof real.readFileSync,
  };
});

const dirs: string[] = [];
afterEach(() => {
  beforeRead = undefined;
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe('the backup lock', () => {
  it('is taken by one of two backups taking over a left-over lock at once; the other refuses', () => {
    const dir = fs.mkdtempSync(join(tmpdir(), 'svc-backup-lock-'));
    dirs.push(dir);
    const target = join(dir, 'copy.db');
    fs.writeFileSync(`${target}.lock`, `${deadPid()}\n`);

    let first: (() => void) | undefined;
    // The second has read the dead holder; before it acts on that, the first takes the lock over.
    beforeRead = () => {
      first = lockTarget(target);
    };
    expect(() => lockTarget(target)).toThrow(`another backup to ${target} is being written (svc-server backup, process ${process.pid})`);
    expect(first).toBeDefined();
    expect(fs.readFileSync(`${target}.lock`, 'utf8')).toBe(`${process.pid}\n`);
    // Nothing left beside the lock but the lock itself.
    expect(fs.readdirSync(dir)).toEqual(['copy.db.lock']);
    first!();
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  /** A lock left by a killed backup, and beside it the takeover mark another backup killed while taking it over left. */
  function leftOverMark(content: string, ageMs = 0) {
    const dir = fs.mkdtempSync(join(tmpdir(), 'svc-backup-lock-'));
    dirs.push(dir);
    const target = join(dir, 'copy.db');
    const lock = `${target}.lock`;
    fs.writeFileSync(lock, `${deadPid()}\n`);
    const seen = fs.statSync(lock, { bigint: true });
    const mark = `${lock}.takeover-${seen.ino}-${seen.mtimeNs}`;
    fs.writeFileSync(mark, content);
    if (ageMs > 0) {
      const then = new Date(Date.now() - ageMs);
      fs.utimesSync(mark, then, then);
    }
    return { dir, target, lock, mark };
  }

  it.each([
    ['its process gone', () => `${deadPid()}\n`, 0],
    ['no process named (killed before writing it), older than a few seconds', () => '', 10_000],
    ['its process still there (another pid by now), older than a minute', () => `${process.pid}\n`, 120_000],
  ])('a takeover mark left by a backup killed while taking the lock over (%s) is taken over too', (_name, content, ageMs) => {
    const { dir, target, lock } = leftOverMark(content(), ageMs);
    const release = lockTarget(target);
    expect(fs.readFileSync(lock, 'utf8')).toBe(`${process.pid}\n`);
    expect(fs.readdirSync(dir)).toEqual(['copy.db.lock']);
    release();
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('a fresh takeover mark of a live backup is left alone: that backup is taking the lock over', () => {
    const { dir, target, mark } = leftOverMark(`${process.pid}\n`);
    expect(() => lockTarget(target)).toThrow(`cannot take ${target}.lock: remove it if no backup to ${target} is running`);
    expect(fs.readdirSync(dir).sort()).toEqual(['copy.db.lock', mark.slice(dir.length + 1)].sort());
  });
});

/** The id of a process that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '']).pid!;
}
