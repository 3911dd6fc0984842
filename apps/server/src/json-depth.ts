/**
 * How deep arrays and objects may nest in JSON svc reads (request bodies, upstream answers and frames). A
 * request is a few levels deep and a tool's schema a few dozen; ten thousand levels is 20 KB of brackets that
 * would overflow the stack of the first recursive step that meets them (serialising it for the upstream).
 */
export const MAX_JSON_DEPTH = 256;

const QUOTE = 34;
const BACKSLASH = 92;

/**
 * How many members one object may have in JSON svc reads. V8 parses an object of many distinct keys in time that
 * grows faster than its size (dictionary mode): 200,000 keys, a 2 MB body, held the event loop 0.4–0.7 s, and a
 * 10 MiB body fits five times as many. The largest objects a request has are a tool's or a response format's
 * properties (OpenAI allows 5,000 in a whole schema), `logit_bias` (300) and `metadata` (16); 10,000 parse in
 * about 2 ms. Arrays are limited apart (`MAX_JSON_ITEMS`).
 */
export const MAX_JSON_MEMBERS = 10_000;

/**
 * How many items one array may have in a request body. An array is one block of memory, 8 bytes an item, that V8
 * allocates and fills in one step however the parse is split: a 10 MB body of one array of 5,000,000 zeros is a
 * 40 MB block, a step of 0.3–0.7 s on a loaded host (fresh memory costs 10–15 ms a MB there), in which no other
 * request is served. 500,000 items (4 MB) is about what a body parsed whole (under 1 MiB: `0,` 524,288 times)
 * holds anyway, so no body takes a longer step than a small one does. The longest arrays a request has are far
 * shorter: messages, input items and content parts (tens of thousands at most: each message costs a model a few
 * tokens of its template, so 500,000 overflow a context of a million tokens), a schema's `enum` (OpenAI allows
 * 1,000 values in a schema), `tools` (128), `stop` (4).
 */
export const MAX_JSON_ITEMS = 500_000;

/**
 * What `jsonShapeProblem` found: nesting deeper than the limit, an object with more members than it, or an array
 * with more items than it, and the member of the top-level object it is in (its name as written), when it is in one.
 */
export interface JsonShapeProblem {
  kind: 'depth' | 'members' | 'items';
  field?: string;
}

/**
 * Whether the JSON text in `json` (a Buffer of UTF-8 or a string) nests arrays and objects deeper than `depthLimit`
 * or has an object of more than `membersLimit` members. One pass over the text outside strings; a string is
 * skipped to its closing quote with `indexOf`, so a body of long texts costs little. Malformed JSON gets an answer
 * too (the parse that follows reports it).
 */
export function jsonShapeProblem(json: Buffer | string, depthLimit = MAX_JSON_DEPTH, membersLimit = MAX_JSON_MEMBERS, itemsLimit = Infinity): JsonShapeProblem | undefined {
  return new JsonShapeScan(json, depthLimit, membersLimit, Infinity, itemsLimit).scan(json.length);
}

/**
 * An array or object of the scanned text whose text is `JsonShapeScan`'s `largeBytes` or more: where its
 * brackets stand, the commas at its own level (those that part its items or members), and the large
 * containers within it, in order.
 */
export interface JsonContainer {
  open: number;
  close: number;
  commas: Positions;
  large: JsonContainer[];
}

/** How many positions one chunk of `Positions` holds (256 KB). */
const CHUNK_BITS = 16;
const CHUNK = 1 << CHUNK_BITS;

/**
 * Positions in a text (a container's commas), appended in order and kept in fixed-size typed arrays: a JS array
 * grown to millions of items (a 10 MB body of one array of 5,000,000 zeros) is copied whole at each growth and
 * held the event loop 0.3–0.6 s in one step; here each push costs the same, a new chunk at most. Positions are
 * below 2^32 (a string holds at most 2^29 UTF-16 units, 1.6 GB of UTF-8).
 *
 * @example
 * const commas = new Positions(); commas.push(7); commas.at(0); // 7
 */
export class Positions {
  private chunks: Uint32Array[] = [];
  private size = 0;

  get length(): number {
    return this.size;
  }

  push(position: number): void {
    const k = this.size & (CHUNK - 1);
    if (k === 0 && this.size >>> CHUNK_BITS === this.chunks.length) this.chunks.push(new Uint32Array(CHUNK));
    this.chunks[this.size >>> CHUNK_BITS]![k] = position;
    this.size++;
  }

  /** Position `i` (0 ≤ i < length). */
  at(i: number): number {
    return this.chunks[i >>> CHUNK_BITS]![i & (CHUNK - 1)]!;
  }

  /** Empty again, keeping its first chunk for reuse. */
  clear(): void {
    this.chunks.length = Math.min(this.chunks.length, 1);
    this.size = 0;
  }

  /** Its last chunk cut to what it holds (a copy of one chunk at most): what a container keeps is no larger than its commas. */
  seal(): this {
    const last = this.chunks.length - 1;
    const used = this.size - last * CHUNK;
    if (last >= 0 && used < CHUNK) this.chunks[last] = this.chunks[last]!.slice(0, used);
    return this;
  }
}

/**
 * `jsonShapeProblem`'s pass, resumable: `scan(until)` reads on to `until`, so a caller can read a body of
 * megabytes in slices, yielding to the event loop between them. With `largeBytes`, it also notes the large
 * containers (`roots`: those at the top level), which `parseJsonInTurns` parses a part at a time.
 *
 * @example
 * const scan = new JsonShapeScan(buffer); let problem; for (let at = 0; at < buffer.length && !problem; at += 65536) problem = scan.scan(at + 65536);
 */
export class JsonShapeScan {
  /** Large containers closed at the top level, in order. */
  readonly roots: JsonContainer[] = [];
  private readonly at: (i: number) => number;
  // Per open level: an object's commas so far (0 up), or minus an array's items so far (-1 down).
  private readonly commas: Int32Array;
  private depth = 0;
  private next = 0;
  private stopped = false;
  // The top-level object's member being read, and whether the next string at its level is a member's name.
  private field: [number, number] | undefined;
  private nameNext = false;
  // Per open level, when large containers are noted: where it opened, its commas' positions, its large containers.
  private readonly opens: number[] = [];
  private readonly commaAt: Positions[] = [];
  private readonly largeIn: JsonContainer[][] = [];

  constructor(
    private readonly json: Buffer | string,
    private readonly depthLimit = MAX_JSON_DEPTH,
    private readonly membersLimit = MAX_JSON_MEMBERS,
    private readonly largeBytes = Infinity,
    private readonly itemsLimit = Infinity,
  ) {
    this.at = typeof json === 'string' ? (i: number) => json.charCodeAt(i) : (i: number) => json[i]!;
    this.commas = new Int32Array(depthLimit + 2);
  }

  /** Whether the text is read to its end (or to a string that never closes, where reading stops). */
  get done(): boolean {
    return this.stopped || this.next >= this.json.length;
  }

  /** Reads on to `until` (or a little past it, to the end of a string); the problem found, if any. */
  scan(until: number): JsonShapeProblem | undefined {
    const { json, at, commas } = this;
    const noting = this.largeBytes !== Infinity;
    const length = Math.min(until, json.length);
    let { depth, nameNext, next: i } = this;
    for (; i < length && !this.stopped; i++) {
      const c = at(i);
      if (c === QUOTE) {
        const end = closingQuote(json, i + 1, at);
        if (end === -1) {
          this.stopped = true;
          break;
        }
        if (depth === 1 && nameNext) this.field = [i + 1, end];
        nameNext = false;
        i = end;
      } else if (c === 44 /* , */) {
        // Malformed JSON may have commas at depth 0; the parse reports it.
        if (depth > 0) {
          if (noting) this.commaAt[depth]!.push(i);
          if (commas[depth]! >= 0) {
            if (++commas[depth]! >= this.membersLimit) return this.problem('members', depth);
            nameNext = true;
          } else if (--commas[depth]! < -this.itemsLimit) return this.problem('items', depth);
        }
      } else if (c === 91 /* [ */ || c === 123 /* { */) {
        if (++depth > this.depthLimit) return this.problem('depth', depth);
        commas[depth] = c === 123 ? 0 : -1;
        nameNext = c === 123;
        if (noting) {
          this.opens[depth] = i;
          (this.commaAt[depth] ??= new Positions()).clear();
          (this.largeIn[depth] ??= []).length = 0;
        }
      } else if (c === 93 /* ] */ || c === 125 /* } */) {
        if (depth > 0) {
          if (noting && i - this.opens[depth]! + 1 >= this.largeBytes) {
            // Its commas handed over, not copied (millions of them are tens of MB); the level takes a new list.
            const container = { open: this.opens[depth]!, close: i, commas: this.commaAt[depth]!.seal(), large: [...this.largeIn[depth]!] };
            this.commaAt[depth] = new Positions();
            (depth === 1 ? this.roots : this.largeIn[depth - 1]!).push(container);
          }
          depth--;
        }
      }
    }
    this.depth = depth;
    this.nameNext = nameNext;
    this.next = i;
    return undefined;
  }

  private problem(kind: JsonShapeProblem['kind'], depth: number): JsonShapeProblem {
    const { json, field } = this;
    this.stopped = true;
    return field === undefined || depth < 2 ? { kind } : { kind, field: typeof json === 'string' ? json.slice(...field) : json.toString('utf8', ...field) };
  }
}

/** Whether the JSON text in `json` nests arrays and objects deeper than `limit` (`jsonShapeProblem`'s first test). */
export function nestsDeeperThan(json: Buffer | string, limit = MAX_JSON_DEPTH): boolean {
  return jsonShapeProblem(json, limit, Infinity)?.kind === 'depth';
}

/** The index of the quote that closes a string whose text starts at `from`, or -1. */
export function closingQuote(json: Buffer | string, from: number, at: (i: number) => number): number {
  for (let j = from; ; j++) {
    j = typeof json === 'string' ? json.indexOf('"', j) : json.indexOf(QUOTE, j);
    if (j === -1) return -1;
    let backslashes = 0;
    while (at(j - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return j;
  }
}
