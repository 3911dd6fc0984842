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
  return new JsonDepthScanner(limit).feed(json);
}

/**
 * `nestsDeeperThan` over a text that arrives in pieces (a request body, chunk by chunk): each piece is scanned
 * as it comes, so none of the scan is left for the step that parses the whole. A piece may end anywhere: inside
 * a string, after some of the backslashes before a quote, inside a character's UTF-8 bytes (which are never
 * quotes, brackets or backslashes).
 *
 * @example
 * const depth = new JsonDepthScanner(); for (const chunk of chunks) depth.feed(chunk); depth.exceeded
 */
export class JsonDepthScanner {
  private depth = 0;
  private inString = false;
  /** Backslashes that ended the last piece, inside a string. */
  private backslashes = 0;
  exceeded = false;

  constructor(private readonly limit = MAX_JSON_DEPTH) {}

  /** Scans the next piece; whether the text so far nests deeper than the limit. */
  feed(json: Buffer | string): boolean {
    const length = json.length;
    const at = typeof json === 'string' ? (i: number) => json.charCodeAt(i) : (i: number) => json[i]!;
    let i = 0;
    while (i < length && !this.exceeded) {
      if (this.inString) {
        const quote = typeof json === 'string' ? json.indexOf('"', i) : json.indexOf(QUOTE, i);
        const end = quote === -1 ? length : quote;
        // The backslashes just before `end`, with the last piece's when they run back to its start.
        let run = 0;
        while (end - 1 - run >= i && at(end - 1 - run) === BACKSLASH) run++;
        if (end - run === i) run += this.backslashes;
        if (quote === -1) {
          this.backslashes = run;
          return false;
        }
        this.backslashes = 0;
        if (run % 2 === 0) this.inString = false;
        i = quote + 1;
        continue;
      }
      const c = at(i++);
      if (c === QUOTE) this.inString = true;
      else if (c === 91 /* [ */ || c === 123 /* { */) {
        if (++this.depth > this.limit) this.exceeded = true;
      } else if (c === 93 /* ] */ || c === 125 /* } */) this.depth--;
    }
    return this.exceeded;
  }
}
