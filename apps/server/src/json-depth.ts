/**
 * How deep arrays and objects may nest in JSON svc reads (request bodies, upstream answers and frames). A
 * request is a few levels deep and a tool's schema a few dozen; ten thousand levels is 20 KB of brackets that
 * would overflow the stack of the first recursive step that meets them (serialising it for the upstream).
 */
export const MAX_JSON_DEPTH = 256;

const QUOTE = 34;
const BACKSLASH = 92;

/**
 * Whether the JSON text in `json` (a Buffer of UTF-8 or a string) nests arrays and objects deeper than `limit`.
 * One pass over the text outside strings; a string is skipped to its closing quote with `indexOf`, so a body of
 * long texts costs little. Malformed JSON gets an answer too (the parse that follows reports it).
 */
export function nestsDeeperThan(json: Buffer | string, limit = MAX_JSON_DEPTH): boolean {
  const text = typeof json === 'string';
  const length = json.length;
  const at = text ? (i: number) => (json as string).charCodeAt(i) : (i: number) => (json as Buffer)[i]!;
  let depth = 0;
  for (let i = 0; i < length; i++) {
    const c = at(i);
    if (c === QUOTE) {
      i = closingQuote(json, i + 1, at);
      if (i === -1) return false;
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > limit) return true;
    } else if (c === 93 /* ] */ || c === 125 /* } */) depth--;
  }
  return false;
}

/** The index of the quote that closes a string whose text starts at `from`, or -1. */
function closingQuote(json: Buffer | string, from: number, at: (i: number) => number): number {
  for (let j = from; ; j++) {
    j = typeof json === 'string' ? json.indexOf('"', j) : json.indexOf(QUOTE, j);
    if (j === -1) return -1;
    let backslashes = 0;
    while (at(j - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return j;
  }
}
