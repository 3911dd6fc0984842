import { randomBytes } from 'node:crypto';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { closingQuote, JsonShapeScan, MAX_JSON_DEPTH, type JsonContainer, type JsonShapeProblem } from './json-depth.js';

/**
 * Strings at least this long are escaped a slice at a time. JSON.stringify runs at about 150 MB/s here, so the
 * 9 MiB of `instructions` a Responses request may echo is 60 ms of one step; a slice is 2 ms at most.
 */
export const LONG_STRING_CHARS = 256 * 1024;

/** What JSON.stringify escapes in a string (quotes, backslashes, control characters, lone surrogates). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * `JSON.stringify(value)` for plain JSON data, in the caller's turns: the same text, an array an item at a
 * time (20,000 input items are one 20 ms JSON.stringify) and each string of `longString` characters or more a
 * slice at a time, yielding to the event loop when `turn` says.
 *
 * @example
 * const json = await stringifyInTurns(response, turns()); // === JSON.stringify(response)
 */
export async function stringifyInTurns(value: unknown, turn: () => boolean, longString = LONG_STRING_CHARS): Promise<string> {
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      // What JSON.stringify writes for an item it cannot (undefined, a function): null.
      out += `${i > 0 ? ',' : ''}${hasLongString(item, longString) ? await stringifyInTurns(item, turn, longString) : (JSON.stringify(item) ?? 'null')}`;
      if (turn()) await yieldToEventLoop();
    }
    return `${out}]`;
  }
  if (!hasLongString(value, longString)) return JSON.stringify(value);
  const { between, taken } = stringifyAround(value, (text) => text.length >= longString);
  let out = between[0]!;
  for (let i = 0; i < taken.length; i++) out += (await quoteInTurns(taken[i]!, turn, longString)) + between[i + 1]!;
  return out;
}

/**
 * `JSON.stringify(value)` cut where a string `take` chose stood: the texts between them, and the strings taken,
 * in order. Each taken string is replaced by a mark no text can hold (a random nonce) and the JSON split there.
 */
function stringifyAround(value: unknown, take: (text: string) => boolean): { between: string[]; taken: string[] } {
  const taken: string[] = [];
  const mark = `\u0000${randomBytes(12).toString('base64url')}`;
  const json = JSON.stringify(value, (_key, v: unknown) => (typeof v === 'string' && take(v) ? (taken.push(v), mark) : v));
  return { between: json.split(JSON.stringify(mark)), taken };
}

/**
 * A long string escaped once, in turns, and spliced into each JSON text that holds it: a Responses stream
 * echoes the response's `instructions` in three events, each of which would escape megabytes anew.
 *
 * @example
 * const instructions = await EscapedString.of(request.instructions, turn);
 * instructions.stringify({ type: 'response.created', response }); // === JSON.stringify(…)
 */
export class EscapedString {
  private constructor(
    readonly text: string,
    private readonly json: string,
  ) {}

  static async of(text: string, turn: () => boolean): Promise<EscapedString> {
    return new EscapedString(text, await quoteInTurns(text, turn, LONG_STRING_CHARS));
  }

  /** `JSON.stringify(value)`, with each occurrence of this string put in escaped already. */
  stringify(value: unknown): string {
    return stringifyAround(value, (text) => text === this.text).between.join(this.json);
  }
}

/** `JSON.stringify(text)`, a slice at a time. */
async function quoteInTurns(text: string, turn: () => boolean, size: number): Promise<string> {
  let out = '"';
  for (const piece of slices(text, size)) {
    out += NEEDS_ESCAPE.test(piece) ? JSON.stringify(piece).slice(1, -1) : piece;
    if (turn()) await yieldToEventLoop();
  }
  return `${out}"`;
}

/**
 * `text` in slices of `size` characters (one more where a slice would end between the two halves of a
 * surrogate pair: escaped, encoded or stored apart, each half would become a lone surrogate, U+FFFD in UTF-8).
 *
 * @example
 * [...slices('ab😀c', 3)] // ['ab😀', 'c']
 */
export function* slices(text: string, size: number): Generator<string> {
  for (let start = 0; start < text.length; ) {
    let end = Math.min(text.length, start + size);
    if (isHighSurrogate(text.charCodeAt(end - 1)) && isLowSurrogate(text.charCodeAt(end))) end += 1;
    yield text.slice(start, end);
    start = end;
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Whether `value` holds a string of `min` characters or more (request data nests at most 256 levels). */
function hasLongString(value: unknown, min: number): boolean {
  if (typeof value === 'string') return value.length >= min;
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) {
    for (const item of value) if (hasLongString(item, min)) return true;
    return false;
  }
  for (const key in value) if (hasLongString((value as Record<string, unknown>)[key], min)) return true;
  return false;
}

const QUOTE = 0x22;

/**
 * `JSON.parse(buffer.toString('utf8', start))`, in the caller's turns: the large containers `JsonShapeScan` noted
 * are parsed a part at a time (an array's items some tens of KB at once, an object's members one by one) and put
 * together, yielding to the event loop when `turn` says; the rest with JSON.parse as it is. 250,000 messages are
 * one JSON.parse of 9 MiB and 250,000 objects, hundreds of milliseconds in which no other request is served.
 * The same value as JSON.parse (member order, a member given twice, `__proto__` as a member), and a SyntaxError
 * where it throws one: each part is valid JSON by itself exactly when the whole is, what joins them is checked.
 *
 * @example
 * const scan = new JsonShapeScan(buffer, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, 64 * 1024); scan.scan(buffer.length);
 * const value = await parseJsonInTurns(buffer, scan.roots, turns()); // deep-equals JSON.parse(buffer.toString())
 */
export async function parseJsonInTurns(buffer: Buffer, roots: readonly JsonContainer[], turn: () => boolean, start = 0, partBytes = PART_BYTES): Promise<unknown> {
  const root = roots.at(-1);
  if (!root || !isWhiteSpace(buffer, start, root.open) || !isWhiteSpace(buffer, root.close + 1, buffer.length)) {
    return JSON.parse(buffer.toString('utf8', start));
  }
  return new JsonParts(buffer, turn, partBytes).container(root);
}

/** How much text a shape check reads between two looks at the turn's clock: well under a millisecond. */
const SCAN_BYTES = 64 * 1024;

/**
 * Runs `scan` to the end of its text a slice at a time, yielding to the event loop when `turn` says; the
 * problem it found, if any.
 *
 * @example
 * const scan = new JsonShapeScan(buffer, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, PART_BYTES);
 * if (await scanInTurns(scan, turn)) throw …; else value = await parseJsonInTurns(buffer, scan.roots, turn);
 */
export async function scanInTurns(scan: JsonShapeScan, turn: () => boolean): Promise<JsonShapeProblem | undefined> {
  for (let at = SCAN_BYTES; ; at += SCAN_BYTES) {
    const problem = scan.scan(at);
    if (problem || scan.done) return problem;
    if (turn()) await yieldToEventLoop();
  }
}

/**
 * `JSON.parse(text)` for JSON svc wrote itself (a stored response's input items: 100,000 of them are 10 MB), in
 * `turn`'s turns.
 *
 * @example
 * const items = (await parseStoredJsonInTurns(row.input_items, turns())) as ResponseInputItem[];
 */
export async function parseStoredJsonInTurns(text: string, turn: () => boolean): Promise<unknown> {
  if (text.length < PART_BYTES) return JSON.parse(text);
  const buffer = Buffer.from(text);
  const scan = new JsonShapeScan(buffer, MAX_JSON_DEPTH, Infinity, PART_BYTES);
  // Deeper than a request may nest, it was not svc's: parsed whole, as before.
  if (await scanInTurns(scan, turn)) return JSON.parse(text);
  return parseJsonInTurns(buffer, scan.roots, turn);
}

/** An array's items are parsed this many bytes' worth at a time: about 1 ms of JSON.parse. */
export const PART_BYTES = 32 * 1024;

class JsonParts {
  constructor(
    private readonly buffer: Buffer,
    private readonly turn: () => boolean,
    private readonly partBytes: number,
  ) {}

  async container(c: JsonContainer): Promise<unknown> {
    const open = this.buffer[c.open];
    const close = this.buffer[c.close];
    if (open === 0x5b && close === 0x5d) return this.array(c);
    if (open === 0x7b && close === 0x7d) return this.object(c);
    throw new SyntaxError(`Unexpected '${String.fromCharCode(close ?? 0)}' in JSON at position ${c.close}`);
  }

  /** The text of item (or member) `k` of `c`: between its opening bracket or comma and the next comma or its closing bracket. */
  private item(c: JsonContainer, k: number): [number, number] {
    return [k === 0 ? c.open + 1 : c.commas.at(k - 1) + 1, k === c.commas.length ? c.close : c.commas.at(k)];
  }

  private isEmpty(c: JsonContainer): boolean {
    return c.commas.length === 0 && c.large.length === 0 && isWhiteSpace(this.buffer, c.open + 1, c.close);
  }

  /** `c`'s large container within [from, to), which must hold it alone with white space around it; or undefined. */
  private async largeWithin(c: JsonContainer, next: number, from: number, to: number): Promise<{ value: unknown } | undefined> {
    const large = c.large[next];
    if (!large || large.open >= to) return undefined;
    if (!isWhiteSpace(this.buffer, from, large.open) || !isWhiteSpace(this.buffer, large.close + 1, to)) {
      throw new SyntaxError(`Unexpected token in JSON at position ${from}`);
    }
    return { value: await this.container(large) };
  }

  private async array(c: JsonContainer): Promise<unknown[]> {
    const out: unknown[] = [];
    if (this.isEmpty(c)) return out;
    // Its length set once, as many items as it has commas and one (so far as it is JSON): pushed one by one, an
    // array of 5,000,000 items was copied whole at each growth, the last copies 0.3–0.6 s steps.
    out.length = c.commas.length + 1;
    let n = 0;
    let next = 0;
    let from = -1;
    let to = -1;
    let count = 0;
    const flush = async () => {
      if (count === 0) return;
      // One item of white space only would read as an empty array: `[1,,2]` split there.
      if (count === 1 && isWhiteSpace(this.buffer, from, to)) throw new SyntaxError(`Unexpected ',' in JSON at position ${to}`);
      for (const value of JSON.parse(`[${this.buffer.toString('utf8', from, to)}]`) as unknown[]) out[n++] = value;
      count = 0;
      if (this.turn()) await yieldToEventLoop();
    };
    for (let k = 0; k <= c.commas.length; k++) {
      const [itemFrom, itemTo] = this.item(c, k);
      if (c.large[next] !== undefined && c.large[next]!.open < itemTo) {
        await flush();
        out[n++] = (await this.largeWithin(c, next++, itemFrom, itemTo))!.value;
        if (this.turn()) await yieldToEventLoop();
        continue;
      }
      if (count === 0) from = itemFrom;
      to = itemTo;
      count += 1;
      if (to - from >= this.partBytes) await flush();
    }
    await flush();
    // Each part parsed held as many items as its commas part (else it threw), so n is the length set; kept exact all the same.
    if (n < out.length) out.length = n;
    return out;
  }

  private async object(c: JsonContainer): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    if (this.isEmpty(c)) return out;
    const { buffer } = this;
    let next = 0;
    for (let k = 0; k <= c.commas.length; k++) {
      const [memberFrom, memberTo] = this.item(c, k);
      const nameAt = skipWhiteSpace(buffer, memberFrom, memberTo);
      const nameEnd = buffer[nameAt] === QUOTE ? closingQuote(buffer, nameAt + 1, (i) => buffer[i]!) : -1;
      const colon = nameEnd === -1 || nameEnd >= memberTo ? -1 : skipWhiteSpace(buffer, nameEnd + 1, memberTo);
      if (colon === -1 || buffer[colon] !== 0x3a /* : */) throw new SyntaxError(`Expected a member's name and ':' in JSON at position ${memberFrom}`);
      const name = JSON.parse(buffer.toString('utf8', nameAt, nameEnd + 1)) as string;
      const large = await this.largeWithin(c, next, colon + 1, memberTo);
      if (large) next++;
      const value = large ? large.value : (JSON.parse(buffer.toString('utf8', colon + 1, memberTo)) as unknown);
      // As JSON.parse defines it: an own member even when named `__proto__`, the later of two of one name kept.
      Object.defineProperty(out, name, { value, writable: true, enumerable: true, configurable: true });
      if (this.turn()) await yieldToEventLoop();
    }
    return out;
  }
}

/** Whether buffer[from, to) is JSON's white space only (space, tab, line feed, carriage return). */
function isWhiteSpace(buffer: Buffer, from: number, to: number): boolean {
  return skipWhiteSpace(buffer, from, to) === to;
}

function skipWhiteSpace(buffer: Buffer, from: number, to: number): number {
  let i = from;
  while (i < to) {
    const c = buffer[i]!;
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i++;
  }
  return i;
}
