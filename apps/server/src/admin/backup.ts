import { Command } from 'commander';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../config.js';
import { EMBEDDED_KEY_FILE } from '../crypto/embedded-key.js';
import { CommandError } from './command-error.js';

export interface BackupIO {
  stdout: (line: string) => void;
  stderr: (line: string) => void;
}

/**
 * `svc-server backup PATH [--json]`: a consistent copy of the embedded SQLite database, taken while svc runs
 * (`backupSqlite`). On Postgres it says to use pg_dump.
 *
 * @example
 * program.addCommand(makeBackupCommand(io, async () => loadConfig(process.env)));
 */
export function makeBackupCommand(io: BackupIO, config: () => Promise<Config>): Command {
  return new Command('backup')
    .description('copy the embedded SQLite database to PATH (a new file) while svc runs: consistent and compact; restore by starting svc on the copy')
    .argument('<path>', 'the backup file to write (must not exist)')
    .option('--json', 'print {"path","bytes","pending_deliveries","secret_key_file"} as JSON')
    .action(async (path: string, opts: { json?: boolean }) => {
      const cfg = await config();
      if (!cfg.databaseUrl.startsWith('sqlite:')) {
        throw new CommandError(
          'svc-server backup copies the embedded SQLite database; SVC_DATABASE_URL is Postgres: back it up with pg_dump (pg_dump -Fc "$SVC_DATABASE_URL" > svc.dump) or your provider\'s snapshots, and keep SVC_SECRET_KEY with them',
        );
      }
      const file = cfg.databaseUrl.slice('sqlite:'.length);
      if (file === ':memory:') throw new CommandError('SVC_DATABASE_URL is sqlite::memory:: there is no file to back up');
      // The SQLite driver is loaded by the command that uses it, not by every svc-server command.
      const { BackupError, backupSqlite } = await import('../storage/sqlite-backup.js');
      let done;
      try {
        done = backupSqlite(file, path);
      } catch (err) {
        if (err instanceof BackupError) throw new CommandError(`backup failed: ${err.message}`);
        throw err;
      }
      // The signing secrets in the copy are sealed with the key; a copy without it restores keys whose secrets
      // cannot be read (their deliveries then fail to be signed).
      const keyFile = cfg.secretKey ? undefined : join(dirname(resolve(file)), EMBEDDED_KEY_FILE);
      if (opts.json) {
        io.stdout(JSON.stringify({ path: done.path, bytes: done.bytes, pending_deliveries: done.pendingDeliveries, secret_key_file: keyFile ?? null }));
      } else {
        io.stderr(`backed up ${resolve(file)} to ${done.path} (${done.bytes} bytes, ${done.pendingDeliveries} deliveries pending)`);
      }
      if (keyFile && existsSync(keyFile)) {
        io.stderr(`the signing secrets in it are encrypted with ${keyFile}: keep a copy of that file apart from the backups (it does not change until you rotate it); to restore, put it beside the restored database`);
      } else if (!keyFile) {
        io.stderr('the signing secrets in it are encrypted with SVC_SECRET_KEY: a restore needs the same key');
      }
    });
}
