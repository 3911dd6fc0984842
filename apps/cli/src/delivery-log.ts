import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { CliError } from './errors.js';

export const DEFAULT_LOG_FILE = '.svc/deliveries.jsonl';

/** One line of the delivery log: everything needed to replay the request byte-for-byte. */
export interface LoggedDelivery {
  /** When the listener received it, ISO 8601 UTC. */
  time: string;
  /** `X-Svc-Delivery`, the id `replay` selects by. */
  id: string | null;
  event: string | null;
  method: string;
  /** The listener URL the delivery arrived at (path and query included): replay's default target. */
  url: string;
  /** Request headers, lower-cased names. */
  headers: Record<string, string>;
  /** The raw body, exactly as received. */
  body_base64: string;
  signature: 'valid' | 'invalid' | 'unchecked';
  /** What the listener answered. */
  status: number;
}

/**
 * Appends deliveries as JSON lines, one write at a time (creating the directory first), so that
 * concurrent deliveries never interleave.
 */
export function createDeliveryLog(file: string): { append(entry: LoggedDelivery): Promise<void>; file: string } {
  let chain: Promise<void> = mkdir(dirname(file), { recursive: true }).then(() => undefined);
  return {
    file,
    append(entry) {
      const next = chain.then(() => appendFile(file, `${JSON.stringify(entry)}\n`));
      chain = next.catch(() => undefined);
      return next;
    },
  };
}

/** Makes sure the log can be written before the listener says Ready. */
export async function ensureWritable(file: string): Promise<void> {
  try {
    await mkdir(dirname(file), { recursive: true });
    await appendFile(file, '');
  } catch (err) {
    throw new CliError(`cannot write the delivery log ${file}: ${fsReason(err)}`);
  }
}

/** Reads every well-formed entry of a log written by `listen`, oldest first. */
export async function readDeliveryLog(file: string): Promise<LoggedDelivery[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new CliError(`no delivery log at ${file}: run "svc-cli listen" first or pass --log FILE`);
    }
    throw new CliError(`cannot read the delivery log ${file}: ${fsReason(err)}`);
  }
  const entries: LoggedDelivery[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const entry = JSON.parse(line) as Partial<LoggedDelivery>;
      if (typeof entry.body_base64 === 'string' && typeof entry.url === 'string' && entry.headers && typeof entry.headers === 'object') {
        entries.push(entry as LoggedDelivery);
      }
    } catch {
      // A line cut short by a crash is skipped; the rest of the log is still usable.
    }
  }
  return entries;
}

function fsReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'EEXIST' || code === 'ENOTDIR') return 'a part of the path is a file, not a directory';
  if (code === 'EISDIR') return 'it is a directory';
  return code ?? (err as Error).message;
}
