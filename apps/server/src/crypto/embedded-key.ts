import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const EMBEDDED_KEY_FILE = 'secret.key';

/**
 * The key that encrypts signing secrets at rest: SVC_SECRET_KEY when given, else a key generated into the
 * embedded database's directory on first start (mode 0600) and read back on later starts.
 */
export function resolveSecretKey(configured: Buffer | undefined, dataDir: string | undefined): Buffer {
  if (configured) return configured;
  if (!dataDir) throw new Error('SVC_SECRET_KEY is required when the database is not an embedded SQLite file');
  const file = join(dataDir, EMBEDDED_KEY_FILE);
  try {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key`);
    return key;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    const key = randomBytes(32);
    // wx: never overwrite a key another process wrote in the meantime.
    try {
      writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
      return key;
    } catch (writeErr) {
      if ((writeErr as NodeJS.ErrnoException).code === 'EEXIST') return resolveSecretKey(undefined, dataDir);
      throw writeErr;
    }
  }
}
