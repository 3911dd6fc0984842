import { randomBytes } from 'node:crypto';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';

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
