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
 * about 2 ms. Arrays are not limited: an array of a million numbers parses in linear time.
 */
export const MAX_JSON_MEMBERS = 10_000;

/**
 * What `jsonShapeProblem` found: nesting deeper than the limit, or an object with more members than it, and the
 * member of the top-level object it is in (its name as written), when it is in one.
 */
export interface JsonShapeProblem {
  kind: 'depth' | 'members';
  field?: string;
}

/**
 * Whether the JSON text in `json` (a Buffer of UTF-8 or a string) nests arrays and objects deeper than `depthLimit`
 * or has an object of more than `membersLimit` members. One pass over the text outside strings; a string is
 * skipped to its closing quote with `indexOf`, so a body of long texts costs little. Malformed JSON gets an answer
 * too (the parse that follows reports it).
 */
export function jsonShapeProblem(json: Buffer | string, depthLimit = MAX_JSON_DEPTH, membersLimit = MAX_JSON_MEMBERS): JsonShapeProblem | undefined {
  const text = typeof json === 'string';
  const length = json.length;
  const at = text ? (i: number) => (json as string).charCodeAt(i) : (i: number) => (json as Buffer)[i]!;
  // Per open level: its commas so far, or -1 for an array (whose commas are not counted).
  const commas = new Int32Array(depthLimit + 2);
  let depth = 0;
  // The top-level object's member being read, and whether the next string at its level is a member's name.
  let field: [number, number] | undefined;
  let nameNext = false;
  const problem = (kind: JsonShapeProblem['kind']): JsonShapeProblem =>
    field === undefined || depth < 2 ? { kind } : { kind, field: text ? (json as string).slice(...field) : (json as Buffer).toString('utf8', ...field) };
  for (let i = 0; i < length; i++) {
    const c = at(i);
    if (c === QUOTE) {
      const end = closingQuote(json, i + 1, at);
      if (end === -1) return undefined;
      if (depth === 1 && nameNext) field = [i + 1, end];
      nameNext = false;
      i = end;
    } else if (c === 44 /* , */) {
      // Malformed JSON may have commas at depth 0; the parse reports it.
      if (depth > 0 && commas[depth]! >= 0) {
        if (++commas[depth]! >= membersLimit) return problem('members');
        nameNext = true;
      }
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > depthLimit) return problem('depth');
      commas[depth] = c === 123 ? 0 : -1;
      nameNext = c === 123;
    } else if (c === 93 /* ] */ || c === 125 /* } */) {
      if (depth > 0) depth--;
    }
  }
  return undefined;
}

/** Whether the JSON text in `json` nests arrays and objects deeper than `limit` (`jsonShapeProblem`'s first test). */
export function nestsDeeperThan(json: Buffer | string, limit = MAX_JSON_DEPTH): boolean {
  return jsonShapeProblem(json, limit, Infinity)?.kind === 'depth';
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
