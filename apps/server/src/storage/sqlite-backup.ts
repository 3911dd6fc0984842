import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync, type BigIntStats } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';

export interface SqliteBackup {
  /** The copy's absolute path. */
  path: string;
  bytes: number;
  /** Deliveries in the copy still to be sent (`pending`): the start from the copy sends them. */
  pendingDeliveries: number;
}

/** A backup that could not be made: says why, and what to do. */
export class BackupError extends Error {
  readonly code = 'SVC_BACKUP';
  constructor(message: string) {
    super(message);
    this.name = 'BackupError';
  }
}

/**
 * Copies the SQLite database `source` to `target` while servers may be using it: `VACUUM INTO` reads one
 * snapshot (a read transaction: in WAL mode writers go on meanwhile, and what they commit after it began is not
 * in the copy), so the copy is consistent, with everything committed to the WAL so far, and compact (no free
 * pages). Copying the file with `cp` is not: the recent commits live in `svc.db-wal`, and a file copied while a
 * checkpoint writes into it can be torn. (The backup API, `sqlite3_backup_step`, restarts whenever another
 * process writes, which a busy server does every second.)
 *
 * The copy is written as `target.partial` (mode 0600: it holds key hashes, sealed secrets and payloads), synced
 * to disk, checked (`quick_check`) and only then renamed to `target`, so a backup cut short never leaves a file
 * that looks whole. `target` must not exist. A second backup to the same `target` while one runs is refused
 * (`target.lock`, for the copy's time).
 *
 * @example
 * const { bytes } = backupSqlite('./data/svc.db', '/backups/svc-2026-11-30.db');
 */
export function backupSqlite(source: string, target: string): SqliteBackup {
  const from = resolve(source);
  const to = resolve(target);
  if (from === to) throw new BackupError(`the backup ${to} would overwrite the database itself`);
  if (!existsSync(from)) throw new BackupError(`no database at ${from} (SVC_DATABASE_URL)`);
  // Else the first file it fails to write is the lock, whose ENOENT names a file the user never asked for.
  if (!existsSync(dirname(to))) throw new BackupError(`the directory ${dirname(to)} does not exist: create it first (mkdir -p ${dirname(to)})`);
  // Two backups to one name at once would share `.partial`: each removing or renaming the other's copy, one claiming a
  // copy the other was still writing. The lock makes the second refuse, naming the first.
  const release = lockTarget(to);
  try {
    if (existsSync(to)) throw new BackupError(`${to} already exists: give a new file name (a backup never overwrites one)`);
    return copyInto(from, to);
  } finally {
    release();
  }
}

function copyInto(from: string, to: string): SqliteBackup {
  const partial = `${to}.partial`;
  try {
    // An earlier backup cut short may have left a .partial: removed, not reused. Reused, it would keep its own mode
    // (open's mode applies only to a file it creates) and a link there would be followed, so the copy of key hashes,
    // sealed secrets and payloads could be readable by others or written where the link points. 'wx' creates the
    // file (0600) or fails, never follows a link; an empty file is what VACUUM INTO accepts.
    removeLeftover(partial);
    closeSync(openSync(partial, 'wx', 0o600));
  } catch (err) {
    throw new BackupError(`cannot write ${partial}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    const db = new SQLite(from, { fileMustExist: true });
    try {
      // A server's write lock is held for milliseconds; the copy itself takes none.
      db.pragma('busy_timeout = 5000');
      // The copy gives freed pages back (svc's setting for new databases), also when the original predates it.
      // On the original nothing changes: the setting waits for a VACUUM of it, which never runs here.
      db.pragma('auto_vacuum = INCREMENTAL');
      db.prepare('vacuum into ?').run(partial);
    } finally {
      db.close();
    }
    syncFile(partial);
    const copy = new SQLite(partial, { readonly: true, fileMustExist: true });
    let pendingDeliveries: number;
    try {
      const check = copy.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new BackupError(`the copy failed its integrity check (${String(check)}); the database itself may be damaged: run sqlite3 ${from} 'PRAGMA integrity_check'`);
      pendingDeliveries = copy.prepare("select count(*) from webhook_deliveries where status = 'pending'").pluck().get() as number;
    } finally {
      copy.close();
    }
    renameSync(partial, to);
    syncFile(dirname(to));
    return { path: to, bytes: statSync(to).size, pendingDeliveries };
  } catch (err) {
    try {
      unlinkSync(partial);
    } catch {
      // Already gone.
    }
    if (err instanceof BackupError) throw err;
    const { code, message } = err as { code?: string; message?: string };
    if (code === 'SQLITE_FULL') throw new BackupError(`the disk holding ${dirname(to)} is full: the copy needs about the database's size (${statSync(from).size} bytes) free`);
    throw new BackupError(`could not copy ${from} to ${to}: ${code ? `${code}: ` : ''}${message ?? String(err)}`);
  }
}

/**
 * Takes `target.lock` (created exclusively, holding this process's id) for one backup's time; returns its release.
 * A lock whose process is gone (a backup killed) is taken over, by one of two backups taking it over at once: the
 * other refuses, naming the first.
 *
 * @example
 * const release = lockTarget('/backups/svc.db');
 * try { copy(); } finally { release(); }
 */
export function lockTarget(target: string): () => void {
  const lock = `${target}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(lock, 'wx', 0o600);
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      return () => removeLeftover(lock);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new BackupError(`cannot write ${lock}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
    }
    // Seen before its holder is read: what is removed below is this very file, judged left over.
    const seen = statSync(lock, { bigint: true, throwIfNoEntry: false });
    if (!seen) continue;
    const holder = lockHolder(lock);
    if (holder) throw new BackupError(`another backup to ${target} is being written (${holder}): wait for it to finish, or give another file name`);
    removeStaleLock(lock, seen);
  }
  throw new BackupError(`cannot take ${lock}: remove it if no backup to ${target} is running`);
}

/**
 * A takeover mark older than this is left over whoever it names: a mark lives from its creation to its removal a
 * few statements later, so an old one names a process killed in between whose pid another process has since taken.
 */
const MARK_STALE_MS = 60_000;
/** Marks of marks (see `removeStaleLock`) this deep at most: each one needs a backup killed while holding the last. */
const MAX_MARK_DEPTH = 4;

/**
 * Removes the left-over `lock` seen as `seen`, unless it is no longer that file. Two backups taking it over at once
 * would otherwise both remove it, the later one removing the lock the first had just taken in its place, and both
 * run: only the one that creates the takeover mark named after that file (created exclusively, holding its pid)
 * removes it. A mark whose backup was killed before removing it (its process gone, or the mark older than
 * MARK_STALE_MS) is itself taken over the same way, or it would block the lock's takeover for good.
 */
function removeStaleLock(lock: string, seen: BigIntStats, depth = 0): void {
  const mark = `${lock}.takeover-${seen.ino}-${seen.mtimeNs}`;
  if (!createMark(mark)) {
    // Seen before its holder is read, as the lock is (see `lockTarget`).
    const markSeen = statSync(mark, { bigint: true, throwIfNoEntry: false });
    // Another backup is taking the lock over, or has just done so.
    if (!markSeen || depth >= MAX_MARK_DEPTH || !staleMark(mark, markSeen)) return;
    removeStaleLock(mark, markSeen, depth + 1);
    if (!createMark(mark)) return;
  }
  try {
    const now = statSync(lock, { bigint: true, throwIfNoEntry: false });
    if (now && now.ino === seen.ino && now.mtimeNs === seen.mtimeNs) removeLeftover(lock);
  } finally {
    removeLeftover(mark);
  }
}

/** Creates the takeover mark `mark` holding this process's id; false when it exists already. */
function createMark(mark: string): boolean {
  let fd: number;
  try {
    fd = openSync(mark, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new BackupError(`cannot write ${mark}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    writeSync(fd, `${process.pid}\n`);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Whether the takeover mark seen as `seen` was left by a backup killed while holding it. */
function staleMark(mark: string, seen: BigIntStats): boolean {
  if (Date.now() - Number(seen.mtimeMs) >= MARK_STALE_MS) return true;
  return lockHolder(mark) === undefined;
}

/** Who holds `lock` ("svc-server backup, process N"), or undefined when that process is gone. */
function lockHolder(lock: string): string | undefined {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(lock, 'utf8'), 10);
  } catch {
    return undefined;
  }
  // Created, its pid not written yet: a backup starting.
  if (!Number.isSafeInteger(pid) || pid <= 0) return isFresh(lock) ? 'svc-server backup, starting' : undefined;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: the process exists, under another user.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  return `svc-server backup, process ${pid}`;
}

function isFresh(path: string): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs < 5_000;
  } catch {
    return false;
  }
}

/** Removes `path` (a file or a link, not what a link points to) if it is there. */
function removeLeftover(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** fsync: the copy (and its name in the directory) survive a power loss once the backup says it is done. */
function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
