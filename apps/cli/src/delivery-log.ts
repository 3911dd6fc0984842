import { appendFile, mkdir, open, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { CliError } from './errors.js';
import { printable, processIo, type Io } from './output.js';

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
  /** Request headers, lower-cased names (listen writes strings; a repeated header may be a list). */
  headers: Record<string, string | string[]>;
  /** The raw body, exactly as received. */
  body_base64: string;
  signature: 'valid' | 'invalid' | 'unchecked';
  /** What the listener answered. */
  status: number;
}

/**
 * The log holds every prompt and answer delivered, with their signatures: a directory it creates is 0700 and
 * the file 0600 (as the server's own database), so other users of a shared machine cannot read them.
 */
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

/**
 * Appends deliveries as JSON lines, one write at a time (creating the directory first), so that
 * concurrent deliveries never interleave. A log whose last line was cut short (a listen killed mid-write, a full
 * disk) is first ended with a line break: appended to it, the next delivery would be part of a line that is not
 * JSON, and `replay --last 1` would pass over it.
 */
export function createDeliveryLog(file: string): { append(entry: LoggedDelivery): Promise<void>; file: string } {
  let chain: Promise<void> = mkdir(dirname(file), { recursive: true, mode: DIR_MODE }).then(async () => {
    if (await endsMidLine(file)) await appendFile(file, '\n', { mode: FILE_MODE });
  });
  return {
    file,
    append(entry) {
      const next = chain.then(() => appendFile(file, `${JSON.stringify(entry)}\n`, { mode: FILE_MODE }));
      chain = next.catch(() => undefined);
      return next;
    },
  };
}

/** Whether `file` exists and its last byte is not a line break. */
async function endsMidLine(file: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch {
    return false;
  }
  try {
    const { size } = await handle.stat();
    if (size === 0) return false;
    const last = Buffer.alloc(1);
    await handle.read(last, 0, 1, size - 1);
    return last[0] !== 0x0a;
  } finally {
    await handle.close();
  }
}

/** Makes sure the log can be written before the listener says Ready. */
export async function ensureWritable(file: string): Promise<void> {
  try {
    await mkdir(dirname(file), { recursive: true, mode: DIR_MODE });
    await appendFile(file, '', { mode: FILE_MODE });
  } catch (err) {
    throw new CliError(`cannot write the delivery log ${file}: ${fsReason(err)}`);
  }
}

/**
 * Reads every well-formed entry of a log written by `listen`, oldest first. A line that is not JSON (cut
 * short by a crash) or has a field of the wrong type (edited by hand, written by something else) is skipped
 * with a warning on `io.err` naming its line and field, so one bad line never stops a replay.
 *
 * @example
 * const entries = await readDeliveryLog('.svc/deliveries.jsonl', io);
 */
export async function readDeliveryLog(file: string, io: Pick<Io, 'err'> = processIo): Promise<LoggedDelivery[]> {
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
  const lines = text.split('\n');
  for (const [index, line] of lines.entries()) {
    if (!line.trim()) continue;
    let entry = parseLine(line);
    // Earlier versions appended after a line cut short: the entry that follows on the same line is whole.
    const glued = entry === undefined ? line.lastIndexOf(ENTRY_START) : -1;
    if (glued > 0) {
      io.err(`skipped the start of line ${index + 1} of ${printable(file)}: cut short; the entry after it is kept\n`);
      entry = parseLine(line.slice(glued));
    }
    const problem = entry === undefined ? 'not JSON' : invalidField(entry);
    if (problem === undefined) entries.push(entry as LoggedDelivery);
    else io.err(`skipped line ${index + 1} of ${printable(file)}: ${problem}\n`);
  }
  return entries;
}

/** How every line `listen` writes starts (`JSON.stringify` keeps the field order of `LoggedDelivery`). */
const ENTRY_START = '{"time":"';

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const SIGNATURES: readonly unknown[] = ['valid', 'invalid', 'unchecked'];

const isString = (value: unknown): value is string => typeof value === 'string';
const isHeaderValue = (value: unknown): boolean => isString(value) || (Array.isArray(value) && value.every(isString));

/** What is wrong with a parsed log line (`'id is not a string or null'`), or undefined when it is a `LoggedDelivery`. */
function invalidField(entry: unknown): string | undefined {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return 'not a JSON object';
  const e = entry as Record<string, unknown>;
  if (!isString(e.time)) return 'time is not a string';
  if (!(e.id === null || isString(e.id))) return 'id is not a string or null';
  if (!(e.event === null || isString(e.event))) return 'event is not a string or null';
  if (!isString(e.method)) return 'method is not a string';
  if (!isString(e.url) || e.url === '') return 'url is not a non-empty string';
  if (e.headers === null || typeof e.headers !== 'object' || Array.isArray(e.headers)) return 'headers is not an object';
  for (const [name, value] of Object.entries(e.headers)) {
    if (!isHeaderValue(value)) return `header ${printable(JSON.stringify(name))} is not a string or a list of strings`;
  }
  if (!isString(e.body_base64) || e.body_base64.length % 4 !== 0 || !BASE64.test(e.body_base64)) return 'body_base64 is not base64';
  if (!SIGNATURES.includes(e.signature)) return 'signature is not "valid", "invalid" or "unchecked"';
  if (!Number.isInteger(e.status)) return 'status is not a whole number';
  return undefined;
}

function fsReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'EEXIST' || code === 'ENOTDIR') return 'a part of the path is a file, not a directory';
  if (code === 'EISDIR') return 'it is a directory';
  return code ?? (err as Error).message;
}
