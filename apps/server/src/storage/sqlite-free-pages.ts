import { setImmediate as nextTurn } from 'node:timers/promises';
import type SQLite from 'better-sqlite3';

/** Pages `incremental_vacuum` gives back per step (1 MiB at 8 KiB pages): one step holds the write lock for milliseconds. */
const PAGES_PER_STEP = 128;

/** What the file holds besides live rows. */
export interface FreeSpace {
  /** Bytes of free pages in the file (rows deleted since it last shrank). */
  freeBytes: number;
  /** Whether svc gives them back by itself (`auto_vacuum = INCREMENTAL`, every database svc created since). */
  reclaimable: boolean;
}

/** The free pages of `sqlite`'s database (two PRAGMA reads). */
export function freeSpace(sqlite: SQLite.Database): FreeSpace {
  const pages = sqlite.pragma('freelist_count', { simple: true }) as number;
  const pageSize = sqlite.pragma('page_size', { simple: true }) as number;
  return { freeBytes: pages * pageSize, reclaimable: sqlite.pragma('auto_vacuum', { simple: true }) === 2 };
}

/**
 * Gives the free pages of an `auto_vacuum = INCREMENTAL` database back to the file system, PAGES_PER_STEP at a
 * time with a turn of the event loop between steps (requests write in between), and returns the bytes freed.
 * The file shrinks in the database file at the next checkpoint (in WAL mode the step's pages go to the WAL
 * first). A database created before svc set INCREMENTAL (auto_vacuum NONE) is left alone: 0.
 *
 * @example
 * const freed = await giveBackFreePages(handle.sqlite); // after a retention purge
 */
export async function giveBackFreePages(sqlite: SQLite.Database): Promise<number> {
  if (!sqlite.open || !freeSpace(sqlite).reclaimable) return 0;
  const pageSize = sqlite.pragma('page_size', { simple: true }) as number;
  const step = sqlite.prepare(`pragma incremental_vacuum(${PAGES_PER_STEP})`);
  let freed = 0;
  for (;;) {
    if (!sqlite.open) return freed;
    // A kysely transaction spans event-loop turns on this connection: the step waits for its end.
    if (sqlite.inTransaction) {
      await nextTurn();
      continue;
    }
    const before = sqlite.pragma('freelist_count', { simple: true }) as number;
    if (before === 0) return freed;
    step.run();
    const after = sqlite.pragma('freelist_count', { simple: true }) as number;
    freed += (before - after) * pageSize;
    // Another process's writes took the pages meanwhile, or nothing moved: done for this pass.
    if (after >= before) return freed;
    await nextTurn();
  }
}

/** Free space in a database svc cannot shrink by itself worth a note: past this, and a quarter of the file. */
const NOTE_FREE_BYTES = 64 * 1024 * 1024;

/**
 * What the retention purge runs after a pass that removed rows, on SQLite: gives the free pages back
 * (`giveBackFreePages`) and logs how much; on a database created before svc set INCREMENTAL, says once per
 * process, when the free pages are many, how to convert it.
 *
 * @example
 * new Retention({ …, afterPurge: handle.sqlite && shrinkAfterPurge(handle.sqlite, file, logger) });
 */
export function shrinkAfterPurge(sqlite: SQLite.Database, logger: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void }): () => Promise<void> {
  let noted = false;
  return async () => {
    const freed = await giveBackFreePages(sqlite);
    if (freed > 0) {
      logger.info({ freed_bytes: freed }, 'gave the free pages of the purged rows back to the file system (the file shrinks at the next checkpoint)');
      return;
    }
    const { freeBytes, reclaimable } = freeSpace(sqlite);
    const fileBytes = (sqlite.pragma('page_count', { simple: true }) as number) * (sqlite.pragma('page_size', { simple: true }) as number);
    if (reclaimable || noted || freeBytes < NOTE_FREE_BYTES || freeBytes * 4 < fileBytes) return;
    noted = true;
    logger.warn(
      { free_bytes: freeBytes, file_bytes: fileBytes },
      'the database file keeps the space of purged rows: it was created before svc gave free pages back by itself. `svc-server backup` writes a compact copy that does; restore it (see docs/operations.md, Backups) to convert',
    );
  };
}
