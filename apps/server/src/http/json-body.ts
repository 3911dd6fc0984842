import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Transform } from 'node:stream';
import { MAX_BODY_BYTES } from '../config.js';
import { jsonShapeProblem, JsonShapeScan, MAX_JSON_DEPTH, MAX_JSON_ITEMS, MAX_JSON_MEMBERS, type JsonShapeProblem } from '../json-depth.js';
import { parseJsonInTurns, PART_BYTES, scanInTurns } from '../json-in-turns.js';
import { pace, turns } from '../turns.js';
import { ApiError, quoted } from './errors.js';
import { bodyErrors } from './body-errors.js';
import { continueBody } from './expect-continue.js';

/** The chat route's body limit (design §4 `request_too_large`). */
export const JSON_BODY_LIMIT = MAX_BODY_BYTES;

const overloaded = (mine: boolean) =>
  new ApiError(
    'rate_limit_exceeded',
    mine
      ? 'This API key is sending too many request bodies at once (its share of what the server reads at once is full). Please retry in a moment.'
      : 'The server is receiving too many request bodies at once. Please retry in a moment.',
    { headers: { 'retry-after': '1' } },
  );

/**
 * The request-body bytes held by one process, over all requests being read (SVC_MAX_BODY_BYTES_IN_FLIGHT):
 * without a bound, many slow 10 MiB uploads at once hold gigabytes. A body declares its size (content-length) and is
 * refused at once when it does not fit; a chunked or compressed one takes its bytes as they arrive.
 * Bytes are given back when the body is parsed or the request fails.
 *
 * @example
 * const budget = new BodyBudget(256 * 1024 * 1024);
 * const body = await readJsonBody(req, JSON_BODY_LIMIT, budget, key.id);
 */
export class BodyBudget {
  private held = 0;
  private readonly byOwner = new Map<string, number>();

  /**
   * @param max bytes held at once over all bodies
   * @param maxPerOwner bytes one owner (an API key) may hold at once: a quarter of `max`, and at least one body
   *   of the largest size, so that one key declaring bodies it never sends cannot hold every other key's out
   */
  constructor(
    readonly max: number,
    readonly maxPerOwner = Math.max(Math.floor(max / 4), Math.min(max, MAX_BODY_BYTES)),
  ) {}

  /** Bytes held now (for tests and metrics). */
  get inFlight(): number {
    return this.held;
  }

  /** Takes `bytes` for `owner` if they fit; 'server' or 'owner' (nothing taken) when the server's or the owner's share is full. */
  take(bytes: number, owner?: string): true | 'server' | 'owner' {
    const mine = owner === undefined ? 0 : (this.byOwner.get(owner) ?? 0);
    if (owner !== undefined && mine + bytes > this.maxPerOwner) return 'owner';
    if (this.held + bytes > this.max) return 'server';
    this.held += bytes;
    if (owner !== undefined) this.byOwner.set(owner, mine + bytes);
    return true;
  }

  give(bytes: number, owner?: string): void {
    this.held = Math.max(0, this.held - bytes);
    if (owner === undefined) return;
    const left = (this.byOwner.get(owner) ?? 0) - bytes;
    if (left > 0) this.byOwner.set(owner, left);
    else this.byOwner.delete(owner);
  }
}

/** What one body holds of a budget: its declared size up front, or its bytes as they come. */
class Hold {
  private held = 0;

  constructor(
    private readonly budget: BodyBudget | undefined,
    private readonly owner: string | undefined,
  ) {}

  /** Holds at least `bytes` in all; else (nothing more held) the error to answer with. */
  atLeast(bytes: number): ApiError | undefined {
    if (!this.budget || bytes <= this.held) return undefined;
    const taken = this.budget.take(bytes - this.held, this.owner);
    if (taken !== true) return overloaded(taken === 'owner');
    this.held = bytes;
    return undefined;
  }

  release(): void {
    this.budget?.give(this.held, this.owner);
    this.held = 0;
  }
}

const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/**
 * Reads and parses a JSON request body the way `express.json({ limit: '10mb', type: () => true, strict: false })`
 * did, without its stream plumbing: any content type, UTF-8 only, gzip/deflate/br bodies inflated, the
 * limit applied to the inflated size. No body at all → `undefined`; an empty body → `{}`.
 * Rejects with an `ApiError` (400 invalid_json / invalid_request, 413 request_too_large, 429
 * rate_limit_exceeded with `retry-after` when `budget` has no room for the body).
 *
 * @example
 * const body = await readJsonBody(req);
 */
export function readJsonBody(req: IncomingMessage, limit = JSON_BODY_LIMIT, budget?: BodyBudget, owner?: string): Promise<unknown> {
  const headers = req.headers;
  const length = headers['content-length'];
  // type-is' hasBody: a transfer-encoding, or any numeric content-length (0 included).
  if (headers['transfer-encoding'] === undefined && (length === undefined || Number.isNaN(Number(length)))) {
    req.resume();
    return Promise.resolve(undefined);
  }
  const charset = charsetOf(headers['content-type']);
  // Only UTF-8 is read (RFC 8259 §8.1). A body labelled UTF-16 or UTF-32 is not read as UTF-8 either: its ASCII-only
  // text would fail as unparsable JSON, and one labelled so by mistake is better told than guessed at.
  if (charset !== undefined && !isUtf8Label(charset)) return refuse(req, bodyErrors.notUtf8(charset));
  const encoding = (headers['content-encoding'] ?? 'identity').toLowerCase();
  const hold = new Hold(budget, owner);
  if (encoding === 'identity') {
    if (length !== undefined && Number(length) > limit) return refuse(req, bodyErrors.tooLarge(limit));
    const full = length === undefined ? undefined : hold.atLeast(Number(length));
    if (full) return refuse(req, full);
    continueBody(req);
    return collect(req, limit, hold);
  }
  const decoder = DECODERS[encoding];
  if (!decoder) return refuse(req, bodyErrors.unsupportedEncoding(encoding));
  continueBody(req);
  const inflate = decoder();
  // The connection's own failures arrive as ApiErrors; any other error of the decoder is the body's content.
  req.on('error', () => inflate.destroy(bodyErrors.incomplete()));
  req.on('aborted', () => inflate.destroy(bodyErrors.incomplete()));
  // Once the body is refused nothing more is inflated: a few KB of brotli can inflate to terabytes, and the
  // answer going out would not stop the decoder from working through all of it. Only the compressed bytes
  // still arriving are read (and dropped), as for any refused body.
  const stop = () => {
    req.unpipe(inflate);
    inflate.destroy();
    req.resume();
  };
  return collect(req.pipe(inflate), limit, hold, bodyErrors.notInflated, stop);
}

/** Answers now; the unread body is discarded (node keeps the connection usable). */
function refuse(req: IncomingMessage, error: ApiError): Promise<never> {
  req.resume();
  return Promise.reject(error);
}

function collect(
  stream: NodeJS.ReadableStream & { destroy?: (err?: Error) => void },
  limit: number,
  hold: Hold,
  unreadable: () => ApiError = bodyErrors.incomplete,
  stop: () => void = () => stream.resume(),
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    let settled = false;
    const fail = (error: ApiError) => {
      if (settled) return;
      settled = true;
      parts.length = 0;
      hold.release();
      stream.removeListener('data', onData);
      // Keep reading (and dropping) what is left so the answer can go out on a usable connection.
      stop();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return fail(bodyErrors.tooLarge(limit));
      const full = hold.atLeast(size);
      if (full) return fail(full);
      parts.push(chunk);
    };
    stream.on('data', onData);
    stream.on('end', () => {
      if (settled) return;
      settled = true;
      const buffer = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
      parts.length = 0;
      if (size < LARGE_BODY_BYTES) {
        try {
          resolve(parseJson(buffer));
        } catch (err) {
          reject(err);
        } finally {
          hold.release();
        }
        return;
      }
      inLargeBodyTurns(() => parseLargeJson(buffer, turns()))
        .then(resolve, reject)
        .finally(() => hold.release());
    });
    stream.on('aborted', () => fail(bodyErrors.incomplete()));
    stream.on('error', (err: unknown) => fail(err instanceof ApiError ? err : unreadable()));
    stream.on('close', () => {
      if (!settled) fail(bodyErrors.incomplete());
    });
  });
}

/**
 * Bodies of this size or more are read and parsed in turns of the event loop: parsing 9 MiB is a step of tens to
 * hundreds of milliseconds (250,000 small objects take longest), in which no other request would be served.
 */
const LARGE_BODY_BYTES = 1024 * 1024;

let largeBodies: Promise<unknown> = Promise.resolve();

/**
 * Runs `parse` once the large bodies before it are parsed, starting in a turn of its own: several large bodies that
 * finish arriving together would otherwise share their turns, each turn taking a step of each.
 */
function inLargeBodyTurns<T>(parse: () => Promise<T>): Promise<T> {
  const run = largeBodies.then(() => yieldToEventLoop()).then(parse);
  largeBodies = run.catch(() => undefined);
  return run;
}

/** `parseJson` in `turn`'s turns: the shape check a slice at a time, then the containers of 32 KB or more a part at a time. */
async function parseLargeJson(buffer: Buffer, turn: () => boolean): Promise<unknown> {
  const scan = new JsonShapeScan(buffer, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, PART_BYTES, MAX_JSON_ITEMS);
  const problem = await scanInTurns(scan, turn);
  if (problem) throw shapeError(problem);
  const start = bomLength(buffer);
  if (!isUtf8(buffer.subarray(start))) throw bodyErrors.notUtf8();
  await pace(turn);
  try {
    return await parseJsonInTurns(buffer, scan.roots, turn, start);
  } catch {
    throw bodyErrors.invalidJson();
  }
}

/** `{}` for an empty body (as body-parser); a UTF-8 byte-order mark is skipped (as its decoder does). */
function parseJson(buffer: Buffer): unknown {
  if (buffer.length === 0) return {};
  const problem = jsonShapeProblem(buffer, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, MAX_JSON_ITEMS);
  if (problem) throw shapeError(problem);
  const start = bomLength(buffer);
  // Invalid bytes would otherwise become U+FFFD silently: the text a model and an audit record see would not
  // be the text the client sent.
  if (!isUtf8(buffer.subarray(start))) throw bodyErrors.notUtf8();
  try {
    return JSON.parse(buffer.toString('utf8', start)) as unknown;
  } catch {
    throw bodyErrors.invalidJson();
  }
}

function bomLength(buffer: Buffer): number {
  return buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
}

function shapeError(problem: JsonShapeProblem): ApiError {
  if (problem.kind === 'depth') {
    return new ApiError('invalid_request', `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.`);
  }
  // The field is the client's own name for it, which may be megabytes long.
  const field = problem.field === undefined ? undefined : quoted(problem.field);
  const where = field === undefined ? '' : ` (in '${field}')`;
  if (problem.kind === 'items') {
    return new ApiError('invalid_request', `The request body has an array with more than ${MAX_JSON_ITEMS.toLocaleString('en-US')} items${where}.`, { param: field ?? null });
  }
  return new ApiError('invalid_request', `The request body has an object with more than ${MAX_JSON_MEMBERS.toLocaleString('en-US')} keys${where}.`, {
    param: field ?? null,
  });
}

/** What the WHATWG Encoding Standard calls UTF-8 (`utf8` is a common spelling of it). */
const UTF8_LABELS: ReadonlySet<string> = new Set(['utf-8', 'utf8', 'unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'x-unicode20utf8']);

/** Whether a Content-Type's charset (lower case) names UTF-8. */
export function isUtf8Label(charset: string): boolean {
  return UTF8_LABELS.has(charset);
}

/**
 * `express.json()`'s `verify` for a body read the way `readJsonBody` reads it: labelled UTF-8 (body-parser would
 * decode UTF-16 and UTF-32) and made of UTF-8 bytes (body-parser would store invalid ones as U+FFFD).
 *
 * @example
 * router.use(express.json({ limit: '100kb', verify: verifyUtf8 }));
 */
export function verifyUtf8(_req: IncomingMessage, _res: unknown, body: Buffer, encoding: string): void {
  if (!isUtf8Label(encoding.toLowerCase())) throw bodyErrors.notUtf8(encoding.toLowerCase());
  if (!isUtf8(body)) throw bodyErrors.notUtf8();
}

/**
 * Relabels a request whose Content-Type names UTF-8 by another of its labels (`charset=utf8`) as `charset=utf-8`,
 * for `express.json()`: body-parser takes only charsets spelled `utf-…` and refused the rest with 415, so the
 * dashboard API refused a body the API's own reader takes.
 *
 * @example
 * router.use((req, _res, next) => { labelUtf8(req); next(); }, express.json({ verify: verifyUtf8 }));
 */
export function labelUtf8(req: IncomingMessage): void {
  const contentType = req.headers['content-type'];
  const charset = charsetOf(contentType);
  if (charset === undefined || charset === 'utf-8' || !isUtf8Label(charset)) return;
  req.headers['content-type'] = contentType!.replace(/(;\s*charset\s*=\s*)"?[^";\s]+"?/i, '$1utf-8');
}

/** The `charset` parameter of a content type, lower-cased; undefined when there is none. */
function charsetOf(contentType: string | undefined): string | undefined {
  if (!contentType) return undefined;
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType);
  return match ? match[1]!.toLowerCase() : undefined;
}
