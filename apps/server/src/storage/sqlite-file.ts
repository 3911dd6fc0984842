import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Written into a data directory svc created (or adopted with its database): "a database belongs here". */
export const DATA_DIR_MARKER = '.svc-data-dir';

/** The SQLite file is missing where one is expected, or was deleted or replaced under a running server. */
export class DatabaseFileError extends Error {
  readonly code = 'SVC_DATABASE_FILE';
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseFileError';
  }
}

const MARKER_TEXT = 'This directory holds an svc database. svc refuses to start with a new, empty database here while this file exists.\n';

/** Owner-only modes for the database and its WAL and shared-memory files (SQLite gives the last two the database's mode). */
function tighten(file: string): void {
  for (const path of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
    } catch {
      // Missing, or not ours to change (a read-only mount): the open reports what matters.
    }
  }
}

function writeMarker(dir: string): void {
  try {
    writeFileSync(join(dir, DATA_DIR_MARKER), MARKER_TEXT, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * Gets the SQLite file at `file` ready to open. An existing database is opened as it is (its modes tightened
 * to 0600, its directory marked as svc's). A new one is created, mode 0600, only where no data can be
 * expected: in a directory svc creates now (mode 0700) or an empty one. A missing database in a directory
 * svc set up (the marker is there), or in a directory holding other files, is a DatabaseFileError saying how
 * to proceed — a new empty database there would silently hide the data that is missing.
 *
 * @example
 * prepareSqliteFile(resolve('./data/svc.db'));
 */
export function prepareSqliteFile(file: string): void {
  const dir = dirname(file);
  if (existsSync(file)) {
    tighten(file);
    try {
      writeMarker(dir);
    } catch {
      // A read-only directory: nothing to mark, and the database opens read-only or fails on its own.
    }
    return;
  }
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } else if (existsSync(join(dir, DATA_DIR_MARKER))) {
    throw new DatabaseFileError(
      `The database ${file} is missing, but ${dir} was set up by svc (${DATA_DIR_MARKER} is there): it was deleted or moved. ` +
        `Restore it (with its -wal file, if any) from a backup, or point SVC_DATABASE_URL at it. ` +
        `To start over with an empty database instead, point SVC_DATABASE_URL at a new directory, or move everything out of ${dir} (its secret.key too: it only decrypts the lost data).`,
    );
  } else if (readdirSync(dir).length > 0) {
    throw new DatabaseFileError(
      `Refusing to create a new database ${file}: ${dir} already holds other files, so data may be expected there. ` +
        `Point SVC_DATABASE_URL at a file in a new or empty directory (svc creates it), ` +
        `or, if a new database belongs in ${dir}, create an empty file ${join(dir, DATA_DIR_MARKER)} and start again.`,
    );
  }
  writeMarker(dir);
  closeSync(openSync(file, 'a', 0o600));
}

/** What identifies the database file: a deleted or replaced file has another (or none). */
export function fileIdentity(file: string): string | undefined {
  try {
    const stats = statSync(file);
    return `${stats.dev}:${stats.ino}`;
  } catch {
    return undefined;
  }
}
