import { ESCAPE_FILLER } from './tokenize.js';

/** Answers longer than this (UTF-16 units) are checked as they are: parsing them would hold the event loop. */
export const MAX_JSON_ANSWER_CHARS = 256 * 1024;

const SPACE = 0x20;
const NEWLINE = 0x0a;

/**
 * Words of a property's name that make a number in 0..1 under it the model's own judgement of its answer
 * (`confidence`, `spam_score`, `relevanceScore`, `probability`; an array of them, `scores`): no source states it,
 * so it is not checked.
 */
const JUDGEMENT_WORDS = new Set(['confidence', 'certainty', 'probability', 'likelihood', 'score', 'confidences', 'certainties', 'probabilities', 'likelihoods', 'scores']);

/** How deep `$ref`, `allOf`, `anyOf` and `oneOf` are followed from one place of the schema. */
const MAX_SCHEMA_DEPTH = 32;
/** How many schemas are taken to apply at one place of the answer (branches past it are not looked at). */
const MAX_SCHEMAS_HERE = 256;

type Schema = Record<string, unknown>;

/** An open object or array of the answer: the schemas that apply to its members, the key it is under. */
interface Container {
  object: boolean;
  schemas: Schema[];
  /** The property name the container is the value of (an array's items are under it too). */
  key: string | undefined;
  /** The key of the member being read (objects), the index of the item (arrays). */
  member: string | undefined;
  index: number;
}

/**
 * What the grounding check reads of a JSON answer (structured outputs, `json_object`): its string values and
 * numbers, where they are. Keys, quotes, `true`/`false`/`null` become spaces and brackets, commas and colons
 * line breaks, one character for one, so every offset into the result is an offset into the answer. Keys are
 * the app's schema, not the model's claims: checked as words, a correct `{"city":"Paris"}` would be flagged for
 * "city". Undefined when the answer is not one JSON object or array.
 *
 * With the JSON Schema the answer was asked to follow (`response_format: json_schema`, the Responses API's
 * `text.format`), values it constrains to a choice are blanked too: a value listed in an `enum` or equal to a
 * `const` that applies at its place (through `properties`, `additionalProperties`, `items`, `prefixItems`,
 * local `$ref`s, `allOf`, `anyOf` and `oneOf`) is the model picking one of the app's labels, not a statement
 * of the sources. So is a number in 0..1 the schema types as a number under a property whose name has one of
 * `JUDGEMENT_WORDS` (`"confidence": 0.92`, `"spam_score": 0.1`): the model's judgement of its own answer.
 *
 * @example
 * jsonValuesText('{"city":"Paris","year":1889}'); // '        Paris  \n      1889\n' (same length)
 * jsonValuesText('{"sentiment":"neutral","confidence":0.92}', {
 *   type: 'object',
 *   properties: { sentiment: { enum: ['positive', 'neutral', 'negative'] }, confidence: { type: 'number' } },
 * }); // only spaces and line breaks: nothing to check
 */
export function jsonValuesText(answer: string, schema?: unknown): string | undefined {
  if (answer.length > MAX_JSON_ANSWER_CHARS) return undefined;
  const first = answer.trimStart()[0];
  if (first !== '{' && first !== '[') return undefined;
  try {
    JSON.parse(answer);
  } catch {
    return undefined;
  }
  const root = isSchema(schema) ? schema : undefined;
  const out = new Uint16Array(answer.length);
  const stack: Container[] = [];
  /** The schemas that apply to the value starting now (at the top level, the root's). */
  const here = (): Schema[] => {
    if (root === undefined) return [];
    const top = stack[stack.length - 1];
    if (top === undefined) return expand(root, root);
    return top.object ? memberSchemas(top.schemas, top.member, root) : itemSchemas(top.schemas, top.index, root);
  };
  const keyHere = (): string | undefined => {
    const top = stack[stack.length - 1];
    return top === undefined ? undefined : top.object ? top.member : top.key;
  };
  let i = 0;
  while (i < answer.length) {
    const c = answer.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = stringEnd(answer, i);
      const isKey = answer.slice(end + 1).trimStart()[0] === ':';
      out.fill(SPACE, i, end + 1);
      if (isKey) {
        const top = stack[stack.length - 1];
        if (top) top.member = JSON.parse(answer.slice(i, end + 1)) as string;
      } else if (!isChoice(here(), JSON.parse(answer.slice(i, end + 1)) as string)) {
        copyString(answer, i + 1, end, out);
      }
      i = end + 1;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      stack.push({ object: c === 0x7b, schemas: here(), key: keyHere(), member: undefined, index: 0 });
      out[i++] = NEWLINE;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      out[i++] = NEWLINE;
    } else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top && !top.object) top.index++;
      out[i++] = NEWLINE;
    } else if (c === 0x3a /* : */) {
      out[i++] = NEWLINE;
    } else if (c === 0x74 /* t */ || c === 0x66 /* f */ || c === 0x6e /* n */) {
      const word = c === 0x66 ? 5 : 4;
      out.fill(SPACE, i, i + word);
      i += word;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      while (end < answer.length && /[0-9eE.+-]/.test(answer[end]!)) end++;
      const value = Number(answer.slice(i, end));
      const schemas = here();
      if (isChoice(schemas, value) || isJudgement(schemas, keyHere(), value)) out.fill(SPACE, i, end);
      else for (let j = i; j < end; j++) out[j] = answer.charCodeAt(j);
      i = end;
    } else {
      out[i] = c;
      i++;
    }
  }
  let text = '';
  for (let start = 0; start < out.length; start += 8192) text += String.fromCharCode(...out.subarray(start, start + 8192));
  return text;
}

function isSchema(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Is `value` one of the choices an `enum` or a `const` of the schemas gives? */
function isChoice(schemas: readonly Schema[], value: string | number): boolean {
  for (const s of schemas) {
    if ('const' in s && s.const === value) return true;
    if (Array.isArray(s.enum) && s.enum.includes(value)) return true;
  }
  return false;
}

/** A number in 0..1 the schema types as a number, under a property named for a judgement (`confidence`). */
function isJudgement(schemas: readonly Schema[], key: string | undefined, value: number): boolean {
  if (key === undefined || !(value >= 0 && value <= 1)) return false;
  if (!schemas.some((s) => [s.type].flat().some((t) => t === 'number' || t === 'integer'))) return false;
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/);
  return words.some((w) => JUDGEMENT_WORDS.has(w));
}

/** The schemas of an object's member `key`: its `properties` entry, else `additionalProperties`. */
function memberSchemas(schemas: readonly Schema[], key: string | undefined, root: Schema): Schema[] {
  const out: Schema[] = [];
  if (key === undefined) return out;
  for (const s of schemas) {
    const properties = s.properties;
    const own = isSchema(properties) && Object.hasOwn(properties, key) ? properties[key] : undefined;
    const member = own ?? s.additionalProperties;
    if (isSchema(member) && out.length < MAX_SCHEMAS_HERE) out.push(...expand(member, root));
  }
  return out;
}

/** The schemas of an array's item `index`: its `prefixItems` entry (or a tuple's `items`), else `items`. */
function itemSchemas(schemas: readonly Schema[], index: number, root: Schema): Schema[] {
  const out: Schema[] = [];
  for (const s of schemas) {
    const tuple = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : undefined;
    const item = tuple && index < tuple.length ? tuple[index] : Array.isArray(s.items) ? s.additionalItems : s.items;
    if (isSchema(item) && out.length < MAX_SCHEMAS_HERE) out.push(...expand(item, root));
  }
  return out;
}

/**
 * A schema with the ones it refers to (`$ref` into the root) and its `allOf`, `anyOf` and `oneOf` branches, each
 * once, at most `MAX_SCHEMAS_HERE` of them: a schema whose branches refer back to it (`anyOf: [{ $ref: '#' },
 * { $ref: '#' }]`) costs no more than its size.
 */
function expand(schema: Schema, root: Schema): Schema[] {
  const out: Schema[] = [];
  const seen = new Set<Schema>();
  const visit = (s: Schema, depth: number): void => {
    if (depth > MAX_SCHEMA_DEPTH || seen.has(s) || out.length >= MAX_SCHEMAS_HERE) return;
    seen.add(s);
    out.push(s);
    if (typeof s.$ref === 'string') {
      const target = resolveRef(s.$ref, root);
      if (target) visit(target, depth + 1);
    }
    for (const keyword of ['allOf', 'anyOf', 'oneOf']) {
      const branches = s[keyword];
      if (Array.isArray(branches)) for (const b of branches) if (isSchema(b)) visit(b, depth + 1);
    }
  };
  visit(schema, 0);
  return out;
}

/**
 * A local `$ref` ("#", "#/$defs/Label", "#/definitions/x"), or undefined: also for a part with malformed
 * percent-encoding ("#/%E0", whose URIError escaped the check) and for a name the schema has only by inheritance
 * ("#/constructor", "#/__proto__").
 */
function resolveRef(ref: string, root: Schema): Schema | undefined {
  if (!ref.startsWith('#')) return undefined;
  let node: unknown = root;
  for (const part of ref.slice(1).split('/').slice(1)) {
    let name: string;
    try {
      name = decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if ((!isSchema(node) && !Array.isArray(node)) || !Object.hasOwn(node, name)) return undefined;
    node = (node as Record<string, unknown>)[name];
  }
  return isSchema(node) ? node : undefined;
}

const LETTER_RE = /[\p{L}\p{M}]/u;
const APOSTROPHE_RE = /['\u2019\u00b4\u2032]/;

/**
 * Copies a JSON string's text between `start` and `end` to `out`, its escapes as what they stand for, one character
 * for one: `\n` is a line break (a space and a line break), `\"` a quote, `\t` a space, so "lake.\nZürich" reads
 * as two sentences and not as the word "nZürich"; `\uXXXX` (a surrogate pair `\uD83D\uDE00` too) is its character
 * followed by ESCAPE_FILLER, so the `ensure_ascii` JSON of Python's `json.dumps` (`Z\u00fcrich`, `\u4e0a\u6d77`)
 * reads as its text.
 */
function copyString(text: string, start: number, end: number, out: Uint16Array): void {
  for (let j = start; j < end; j++) {
    const c = text.charCodeAt(j);
    if (c !== 0x5c /* \ */ || j + 1 >= end) {
      out[j] = c;
      continue;
    }
    const next = text[j + 1]!;
    if (next === 'u') {
      // Valid JSON: four hex digits follow. A high surrogate's pair is read with it.
      let code = parseInt(text.slice(j + 2, j + 6), 16);
      let width = 6;
      const low = code >= 0xd800 && code <= 0xdbff && text.startsWith('\\u', j + 6) ? parseInt(text.slice(j + 8, j + 12), 16) : -1;
      let decoded = String.fromCharCode(code);
      if (low >= 0xdc00 && low <= 0xdfff) {
        decoded += String.fromCharCode(low);
        code = decoded.codePointAt(0)!;
        width = 12;
      }
      const read = escapeRead(decoded, text[j + width], width);
      for (let k = 0; k < width; k++) out[j + k] = read.charCodeAt(k);
      j += width - 1;
      continue;
    }
    out[j] = SPACE;
    out[j + 1] = next === 'n' || next === 'r' ? NEWLINE : next === 't' || next === 'b' || next === 'f' ? SPACE : text.charCodeAt(j + 1);
    j++;
  }
}

const ESCAPE_RE = /\\(?:u[0-9a-fA-F]{4}|["\\bfnrt])/;
const ESCAPES_RE = /\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})|\\(["\\bfnrt])/g;

/**
 * A JSON source's escapes as what they stand for, one character for one (as `jsonValuesText` reads an answer's): a
 * tool's result written by Python's `json.dumps` says "Z\u00fcrich" for "Zürich" and "staff.\nIt" for two sentences.
 * `\uXXXX` is its character (`escapeRead`), `\n` a space and a line break, `\"` a space and a quote; `\/` stays, as
 * an address written "https:\/\/…" would otherwise break. A text that is not JSON (its first character is no "{" or
 * "[") is kept as it is: in prose a "\u00e9" is more likely quoted than meant.
 *
 * @example
 * jsonEscapesRead('{"city": "Z\\u00fcrich"}').replace(/\u034f/g, ''); // '{"city": "Zürich"}'
 */
export function jsonEscapesRead(text: string): string {
  const first = text.trimStart()[0];
  if ((first !== '{' && first !== '[') || !ESCAPE_RE.test(text)) return text;
  return text.replace(ESCAPES_RE, (m: string, high: string | undefined, low: string | undefined, one: string | undefined, char: string | undefined, at: number) => {
    if (char !== undefined) return ` ${char === 'n' || char === 'r' ? '\n' : char === 't' || char === 'b' || char === 'f' ? ' ' : char}`;
    const decoded = one !== undefined ? String.fromCharCode(parseInt(one, 16)) : String.fromCharCode(parseInt(high!, 16), parseInt(low!, 16));
    return escapeRead(decoded, text[at + m.length], m.length);
  });
}

/**
 * An escape's character in the escape's `width`: then ESCAPE_FILLER after a letter (or an apostrophe before one,
 * "don\u2019t"), so the word goes on; spaces after anything else.
 */
function escapeRead(decoded: string, after: string | undefined, width: number): string {
  const joins = LETTER_RE.test(decoded) || (APOSTROPHE_RE.test(decoded) && after !== undefined && LETTER_RE.test(after));
  return decoded + (joins ? ESCAPE_FILLER : ' ').repeat(width - decoded.length);
}

/** Index of the quote that closes the JSON string opening at `start` (the text is valid JSON). */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c /* \ */ ? 2 : 1;
  return i;
}
