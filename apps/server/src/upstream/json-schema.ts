import vm from 'node:vm';
import randexp from 'randexp';
import { isRecord } from '../is-record.js';

// randexp's types declare an ES default export; at run time the CommonJS module is the class itself.
const RandExp = randexp as unknown as typeof randexp.default;

/**
 * A small JSON Schema companion pair for the offline model: `sampleFromSchema` builds a value that
 * `validateJsonSchema` accepts. Covered: type (incl. type arrays), enum, const, required, properties,
 * additionalProperties, min/maxProperties, items (incl. tuple form), min/maxItems, uniqueItems,
 * minimum/maximum/exclusive* (both drafts), multipleOf, minLength/maxLength, pattern, format (common ones),
 * anyOf/oneOf (first branch when sampling), allOf, default, examples, local `$ref`.
 */
export type JsonSchema = Record<string, unknown>;

/** Words taken from the user's question that sampling fills string and number fields from. */
export interface SampleHints {
  /** The question, verbatim. */
  question: string;
  /** Capitalised phrases ("Paris", "New York"), in order of appearance. */
  names: string[];
  /** Numbers in the question, in order of appearance. */
  numbers: number[];
  /** Content words of the question. */
  keywords: string[];
  /**
   * Per number of `numbers` (same order), the lower-cased words beside it ("completed in 1889": completed, in):
   * a field named like one of them (`completed_year`) takes that number before the others.
   */
  numberWords?: string[][];
  /** Which of `names` to use first (a second parallel tool call gets the second name). */
  nameOffset?: number;
}

const PLACE = wordTest('city cities location locations place country region destination origin town state address where area capital');
const NAME = wordTest('name names person user username author company title who brand product');
const FREE_TEXT = wordTest('q query queries search text question prompt input message content keyword keywords topic subject term description');

/** Whether a property name (`city`, `search_query`, `userName`) contains one of the words. */
function wordTest(list: string): { test(name: string): boolean } {
  const words = new Set(list.split(' '));
  return {
    test: (name) =>
      name
        .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
        .toLowerCase()
        .split(/[^a-z0-9]+/)
        .some((part) => words.has(part)),
  };
}
const MAX_DEPTH = 12;

/**
 * Bounds on filling (and checking) one schema, so that a tool's parameters cannot stall the event loop or
 * exhaust memory (issue #26: `minLength: 1e9` never returned, `minItems: 1e8` took 7 min and 2.5 GB, `$ref`
 * cycles overflowed the stack). Past one, `SchemaBoundsError` says which; the offline model answers 400.
 */
export const SCHEMA_BOUNDS = {
  /** Longest string the filler writes (`minLength` above it is refused). */
  maxStringLength: 10_000,
  /** Most array items the filler writes (`minItems` above it is refused). */
  maxItems: 1_000,
  /** Characters of all strings of one filled value together. */
  maxOutputChars: 1_000_000,
  /** Schema nodes visited (filling and checking together): catches nesting, combinators and `$ref` cycles. */
  maxSteps: 200_000,
  /** Nesting of one check (`$ref` chains and cycles included). */
  maxDepth: 64,
  /**
   * Milliseconds of one fill spent testing strings against `pattern`s (a crafted pattern backtracks for minutes;
   * an ordinary one tests a 10,000-character string in microseconds). The time is wall-clock: on a busy host a
   * quick test may be cut off by its thread being descheduled, so the limits are not cut closer.
   */
  maxPatternMs: 30,
  /** Longest one pattern test may run before its string counts as not matching. */
  patternTestMs: 10,
} as const;

/** A schema the offline model cannot fill within SCHEMA_BOUNDS; the message says which bound. */
export class SchemaBoundsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SchemaBoundsError';
  }
}

/** The work one fill or check has done so far, against SCHEMA_BOUNDS. */
interface Work {
  steps: number;
  chars: number;
  /** Milliseconds spent in pattern tests. */
  patternMs: number;
  /** Patterns a test of which was cut off: the question's other words are not tried against them. */
  slowPatterns: Set<string>;
}

const newWork = (): Work => ({ steps: 0, chars: 0, patternMs: 0, slowPatterns: new Set() });

function spend(work: Work, steps = 1): void {
  work.steps += steps;
  if (work.steps > SCHEMA_BOUNDS.maxSteps) {
    throw new SchemaBoundsError(`it takes more than ${SCHEMA_BOUNDS.maxSteps} steps to fill (deep nesting, many items, combinators or a $ref cycle)`);
  }
}

/**
 * A value valid against `schema`, filled from `hints` where a field's name suggests it
 * (a `city` from a capitalised word, a `query` from the question, numbers in range from the question).
 *
 * @example
 * sampleFromSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
 *   { question: 'Weather in Paris?', names: ['Paris'], numbers: [], keywords: ['weather', 'paris'] })
 * // { city: 'Paris' }
 */
export function sampleFromSchema(schema: unknown, hints: SampleHints): unknown {
  const state: SampleState = { hints, usedNumbers: new Set(), usedNames: hints.nameOffset ?? 0, work: newWork(), mentioned: new WeakMap() };
  const root = asSchema(schema);
  const value = sample(root, root, '', state, 0, 0);
  // What the filler writes is checked, not assumed: some schemas (four unique items of a two-value enum, a
  // pattern no generated string matches) have no value within reach, and a model's answer must not claim one.
  const problems = validate(root, value, root, '$', state.work, 0);
  if (problems.length > 0) {
    // A pattern test cut off by its time limit was not answered: the value may be valid, and the refusal says
    // what was found out (on a busy host even a quick test can be cut off, its thread descheduled).
    const [slow] = state.work.slowPatterns;
    if (slow !== undefined && problems.some((p) => p.endsWith(`must match ${slow}`))) {
      throw new SchemaBoundsError(`testing strings against its pattern ${JSON.stringify(slow)} takes more than ${SCHEMA_BOUNDS.patternTestMs} ms`);
    }
    throw new SchemaBoundsError(`no value it can write is valid against it (${problems.slice(0, 3).join('; ')})`);
  }
  return value;
}

interface SampleState {
  hints: SampleHints;
  /** Indexes of `hints.numbers` already written into a field. */
  usedNumbers: Set<number>;
  /** Indexes of `hints.numbers` that a field of the object being filled names (`namesNumber`). */
  reservedNumbers?: Set<number>;
  usedNames: number;
  work: Work;
  /** Per `enum` array: its first string value that the question mentions (computed once, not once per item). */
  mentioned: WeakMap<unknown[], unknown>;
  /** The question lower-cased, and its words: read once per fill, for every enum. */
  questionWords?: { text: string; words: Set<string> };
}

function sample(raw: JsonSchema, root: JsonSchema, name: string, state: SampleState, depth: number, variant: number): unknown {
  spend(state.work);
  const schema = flatten(raw, root, depth, state.work);
  if (depth > MAX_DEPTH) return null;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    const mentioned = mentionedValue(schema.enum, state);
    if (mentioned !== undefined) return mentioned;
    if (schema.default !== undefined && schema.enum.some((v) => deepEqual(v, schema.default))) return schema.default;
    return schema.enum[variant % schema.enum.length];
  }
  const type = pickType(schema);
  if (schema.default !== undefined && validate(schema, schema.default, root, '$', state.work, 0).length === 0 && type !== 'object' && type !== 'array') {
    if (!(type === 'string' && (PLACE.test(name) || FREE_TEXT.test(name)))) return schema.default;
  }
  switch (type) {
    case 'null':
      return null;
    case 'boolean':
      return typeof schema.default === 'boolean' ? schema.default : false;
    case 'integer':
    case 'number':
      return sampleNumber(schema, type === 'integer', name, state, variant);
    case 'string':
      return sampleString(schema, root, name, state, variant);
    case 'array':
      return sampleArray(schema, root, name, state, depth);
    case 'object':
      return sampleObject(schema, root, state, depth, variant);
    default:
      return null;
  }
}

/** Resolves `$ref` and merges `allOf` and the first `anyOf`/`oneOf` branch into one schema. */
function flatten(schema: JsonSchema, root: JsonSchema, depth: number, work: Work): JsonSchema {
  spend(work);
  if (depth > SCHEMA_BOUNDS.maxDepth) {
    throw new SchemaBoundsError(`it nests deeper than ${SCHEMA_BOUNDS.maxDepth} levels`);
  }
  let current = schema;
  if (typeof current.$ref === 'string' && depth <= MAX_DEPTH) {
    const { $ref, ...rest } = current;
    current = { ...flatten(resolveRef($ref as string, root), root, depth + 1, work), ...rest };
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = current[key];
    if (Array.isArray(branches) && branches.length > 0) {
      const { [key]: _dropped, ...rest } = current;
      // Prefer a non-null branch: `anyOf: [{type:'null'}, X]` means an optional X.
      const branch = branches.map(asSchema).find((b) => flatten(b, root, depth + 1, work).type !== 'null') ?? asSchema(branches[0]);
      current = mergeSchemas(rest, flatten(branch, root, depth + 1, work));
    }
  }
  if (Array.isArray(current.allOf)) {
    const { allOf, ...rest } = current;
    current = (allOf as unknown[]).reduce<JsonSchema>((acc, part) => mergeSchemas(acc, flatten(asSchema(part), root, depth + 1, work)), rest);
  }
  return current;
}

function mergeSchemas(a: JsonSchema, b: JsonSchema): JsonSchema {
  const merged: JsonSchema = { ...a, ...b };
  if (isRecord(a.properties) || isRecord(b.properties)) merged.properties = { ...asSchema(a.properties), ...asSchema(b.properties) };
  if (Array.isArray(a.required) || Array.isArray(b.required)) {
    merged.required = [...new Set([...(Array.isArray(a.required) ? a.required : []), ...(Array.isArray(b.required) ? b.required : [])])];
  }
  return merged;
}

function pickType(schema: JsonSchema): string {
  const type = schema.type;
  if (typeof type === 'string') return type;
  if (Array.isArray(type)) return (type.find((t) => t !== 'null') as string | undefined) ?? 'null';
  if (isRecord(schema.properties) || Array.isArray(schema.required)) return 'object';
  if (schema.items !== undefined) return 'array';
  if (typeof schema.minimum === 'number' || typeof schema.maximum === 'number') return 'number';
  if (typeof schema.minLength === 'number' || typeof schema.pattern === 'string' || typeof schema.format === 'string') return 'string';
  if (schema.default !== undefined) return jsonType(schema.default);
  return 'string';
}

function sampleNumber(schema: JsonSchema, integer: boolean, name: string, state: SampleState, variant: number): number {
  const ok = (v: number): boolean => validate({ ...schema, type: integer ? 'integer' : 'number' }, v, {}, '$', state.work, 0).length === 0;
  const { numbers } = state.hints;
  const named = (i: number): boolean => namesNumber(name, i, state.hints);
  const unused = numbers.map((_, i) => i).filter((i) => !state.usedNumbers.has(i));
  // A number named by this field first, then one no field of its object names, then the others' own.
  const reserved = state.reservedNumbers ?? new Set<number>();
  const order = [...unused.filter(named), ...unused.filter((i) => !named(i) && !reserved.has(i)), ...unused.filter((i) => !named(i) && reserved.has(i))];
  for (const i of order) {
    if (ok(numbers[i]!)) {
      state.usedNumbers.add(i);
      return numbers[i]!;
    }
  }
  for (const candidate of [schema.default, Array.isArray(schema.examples) ? schema.examples[0] : undefined]) {
    if (typeof candidate === 'number' && ok(candidate + variant)) return candidate + variant;
  }
  const { lo, hi } = bounds(schema);
  const step = typeof schema.multipleOf === 'number' && schema.multipleOf > 0 ? schema.multipleOf : integer ? 1 : 1;
  const base = Number.isFinite(lo) ? lo : Number.isFinite(hi) ? Math.min(0, hi) : 0;
  const aligned = typeof schema.multipleOf === 'number' ? Math.ceil(base / step) * step : integer ? Math.ceil(base) : base;
  for (const candidate of [aligned + variant * step, aligned, aligned + step, aligned + 2 * step, (lo + hi) / 2, Math.floor(hi / step) * step, hi - step]) {
    if (Number.isFinite(candidate) && ok(candidate)) return candidate;
  }
  return aligned;
}

/**
 * Whether the field `name` names the i-th number of `hints`: a word of the name ("height_m" → height;
 * "completedYear" → completed, year) is beside the number, both matched by their first four letters.
 */
function namesNumber(name: string, i: number, hints: SampleHints): boolean {
  const beside = hints.numberWords?.[i];
  if (!beside || beside.length === 0) return false;
  const nameWords = name.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase().split(/[^a-z]+/).filter((w) => w.length >= 3).map((w) => w.slice(0, 4));
  return beside.some((w) => nameWords.includes(w.slice(0, 4)));
}

function bounds(schema: JsonSchema): { lo: number; hi: number } {
  let lo = -Infinity;
  let hi = Infinity;
  if (typeof schema.minimum === 'number') lo = schema.minimum;
  if (typeof schema.exclusiveMinimum === 'number') lo = Math.max(lo, schema.exclusiveMinimum);
  if (typeof schema.maximum === 'number') hi = schema.maximum;
  if (typeof schema.exclusiveMaximum === 'number') hi = Math.min(hi, schema.exclusiveMaximum);
  return { lo, hi };
}

function sampleString(schema: JsonSchema, root: JsonSchema, name: string, state: SampleState, variant: number): string {
  const { hints } = state;
  const candidates: string[] = [];
  const format = typeof schema.format === 'string' ? schema.format : '';
  const FORMATS: Record<string, string> = {
    date: hints.question.match(/\b\d{4}-\d{2}-\d{2}\b/)?.[0] ?? '2025-01-01',
    'date-time': '2025-01-01T00:00:00Z',
    time: '12:00:00',
    email: hints.question.match(/[\w.+-]+@[\w-]+\.[\w.]+/)?.[0] ?? 'user@example.com',
    uri: hints.question.match(/https?:\/\/\S+/)?.[0] ?? 'https://example.com',
    url: hints.question.match(/https?:\/\/\S+/)?.[0] ?? 'https://example.com',
    uuid: '00000000-0000-4000-8000-000000000000',
    ipv4: '127.0.0.1',
    hostname: 'example.com',
  };
  if (FORMATS[format]) candidates.push(FORMATS[format]);
  const nextName = hints.names[state.usedNames % Math.max(1, hints.names.length)];
  if (hints.names.length > 0 && (PLACE.test(name) || NAME.test(name))) {
    candidates.push(nextName!);
    state.usedNames++;
  }
  const question = hints.question.trim().replace(/[?.!]+$/, '');
  if (FREE_TEXT.test(name) && question) candidates.push(question);
  if (typeof schema.default === 'string') candidates.push(schema.default);
  if (Array.isArray(schema.examples) && typeof schema.examples[0] === 'string') candidates.push(schema.examples[0]);
  if (typeof schema.pattern === 'string') {
    // Any word or name of the question that happens to match the pattern (the first hundred: a pasted
    // document is not searched word by word).
    candidates.push(...hints.names.slice(0, 100), ...hints.question.slice(0, 10_000).split(/[\s,;:!?()"]+/).filter(Boolean).slice(0, 100));
  }
  const keyword = hints.keywords.find((k) => !name.toLowerCase().includes(k)) ?? hints.keywords[0];
  if (keyword) candidates.push(keyword);
  candidates.push(name || 'value');
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  if (min > SCHEMA_BOUNDS.maxStringLength) {
    throw new SchemaBoundsError(`${name ? `property '${name}' has ` : ''}minLength ${min}, above the offline model's limit of ${SCHEMA_BOUNDS.maxStringLength}`);
  }
  const fitted = candidates.map((c) => fitLength(variant > 0 ? `${c}-${variant}` : c, schema));
  const valid = (c: string): boolean => validate({ ...schema, type: 'string' }, c, root, '$', state.work, 0).length === 0;
  const pattern = typeof schema.pattern === 'string' ? schema.pattern : undefined;
  let value = fitted.find((c) => (pattern === undefined || !state.work.slowPatterns.has(pattern)) && valid(c));
  if (value === undefined && pattern !== undefined) {
    // No word of the question fits: a string written from the pattern itself (`^[A-Z]{3}-\d{4}$` → "AAA-0000").
    value = fromPattern(pattern, schema, variant).find(valid);
  }
  value ??= fitted[0]!;
  state.work.chars += value.length;
  if (state.work.chars > SCHEMA_BOUNDS.maxOutputChars) {
    throw new SchemaBoundsError(`its strings add up to more than ${SCHEMA_BOUNDS.maxOutputChars} characters`);
  }
  return value;
}

/** `value` cut to maxLength or padded with `pad` to minLength (code points; minLength already bounded). */
function fitLength(value: string, schema: JsonSchema, pad = 'x'): string {
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const chars = [...value.slice(0, 2 * SCHEMA_BOUNDS.maxStringLength)].slice(0, Math.min(max, SCHEMA_BOUNDS.maxStringLength));
  return chars.join('') + pad.repeat(Math.max(0, min - chars.length));
}

function sampleArray(schema: JsonSchema, root: JsonSchema, name: string, state: SampleState, depth: number): unknown[] {
  const min = typeof schema.minItems === 'number' ? schema.minItems : 0;
  const max = typeof schema.maxItems === 'number' ? schema.maxItems : Infinity;
  if (min > SCHEMA_BOUNDS.maxItems) {
    throw new SchemaBoundsError(`${name ? `property '${name}' has ` : ''}minItems ${min}, above the offline model's limit of ${SCHEMA_BOUNDS.maxItems}`);
  }
  // One item shows the shape; near the depth limit only what is required, so a recursive tree ends in [].
  const count = Math.min(depth < MAX_DEPTH - 2 ? Math.max(min, 1) : min, max);
  const singular = name.replace(/s$/, '');
  if (Array.isArray(schema.items)) {
    return schema.items.slice(0, Math.max(count, schema.items.length)).map((item, i) => sample(asSchema(item), root, singular, state, depth + 1, i));
  }
  const items = asSchema(schema.items);
  return Array.from({ length: count }, (_, i) => sample(items, root, singular, state, depth + 1, schema.uniqueItems ? i : 0));
}

/** `variant` > 0 (the i-th item of a `uniqueItems` array) reaches every property, so the items differ. */
function sampleObject(schema: JsonSchema, root: JsonSchema, state: SampleState, depth: number, variant: number): Record<string, unknown> {
  const properties = asSchema(schema.properties);
  const minProperties = typeof schema.minProperties === 'number' ? schema.minProperties : 0;
  // The numbers this object's fields name are kept for them: a field before them takes another.
  const outer = state.reservedNumbers;
  state.reservedNumbers = new Set(state.hints.numbers.map((_, i) => i).filter((i) => Object.keys(properties).some((key) => namesNumber(key, i, state.hints))));
  try {
    return fillObject(schema, properties, root, state, depth, variant, minProperties);
  } finally {
    state.reservedNumbers = outer;
  }
}

function fillObject(schema: JsonSchema, properties: JsonSchema, root: JsonSchema, state: SampleState, depth: number, variant: number, minProperties: number): Record<string, unknown> {
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : []);
  const out: Record<string, unknown> = {};
  for (const [key, sub] of Object.entries(properties)) {
    const subSchema = flatten(asSchema(sub), root, depth + 1, state.work);
    // Optional fields only when they carry a default or the question clearly supplies them.
    const supplied =
      subSchema.default !== undefined ||
      (PLACE.test(key) && state.hints.names.length > state.usedNames) ||
      (Array.isArray(subSchema.enum) && mentionedValue(subSchema.enum, state) !== undefined);
    if (required.has(key) || supplied) setOwn(out, key, sample(subSchema, root, key, state, depth + 1, variant));
  }
  const additional = isRecord(schema.additionalProperties) ? schema.additionalProperties : {};
  for (const key of required) {
    if (!Object.hasOwn(out, key)) setOwn(out, key, sample(additional, root, key, state, depth + 1, variant));
  }
  let filled = Object.keys(out).length;
  for (const [key, sub] of Object.entries(properties)) {
    if (filled >= minProperties) break;
    if (!Object.hasOwn(out, key)) {
      setOwn(out, key, sample(asSchema(sub), root, key, state, depth + 1, variant));
      filled++;
    }
  }
  // minProperties above the declared ones: more properties, as additionalProperties allows (bounded by maxSteps).
  for (let n = 1; filled < minProperties && schema.additionalProperties !== false; n++) {
    spend(state.work);
    if (Object.hasOwn(out, `property${n}`)) continue;
    out[`property${n}`] = sample(additional, root, `property${n}`, state, depth + 1, variant);
    filled++;
  }
  return out;
}

/**
 * The first string of `values` that the question names as a word or phrase ("celsius" in "…in Celsius?"),
 * found with one pass over the question's words per enum rather than a RegExp per value: an enum of 100,000
 * values inside an array of 1,000 items is still one pass.
 */
function mentionedValue(values: unknown[], state: SampleState): unknown {
  if (state.mentioned.has(values)) return state.mentioned.get(values);
  spend(state.work, Math.ceil(values.length / 10));
  if (state.questionWords === undefined) {
    const text = state.hints.question.toLowerCase();
    state.questionWords = { text, words: new Set(text.split(/[^\p{L}\p{N}_]+/u)) };
  }
  const { text: question, words } = state.questionWords;
  const found = values.find((v) => {
    if (typeof v !== 'string' || v.length < 2) return false;
    const lower = v.toLowerCase();
    if (words.has(lower)) return true;
    // A phrase ("New York", "s-1"): a whole-word occurrence in the question.
    if (/^[\p{L}\p{N}_]+$/u.test(lower)) return false;
    for (let at = question.indexOf(lower); at !== -1; at = question.indexOf(lower, at + 1)) {
      if (!isWordChar(question[at - 1]) && !isWordChar(question[at + lower.length])) return true;
    }
    return false;
  });
  state.mentioned.set(values, found);
  return found;
}

function isWordChar(c: string | undefined): boolean {
  return c !== undefined && /[\p{L}\p{N}_]/u.test(c);
}

/**
 * Problems of `value` against `schema` (empty when valid), each as `path: message`.
 *
 * @example
 * validateJsonSchema({ type: 'integer', minimum: 1 }, 0) // ['$: must be >= 1']
 */
export function validateJsonSchema(schema: unknown, value: unknown, root: unknown = schema, path = '$'): string[] {
  return validate(schema, value, root, path, newWork(), 0);
}

/** `validateJsonSchema` within SCHEMA_BOUNDS: `work` is shared with the fill that called it. */
function validate(schema: unknown, value: unknown, root: unknown, path: string, work: Work, depth: number): string[] {
  spend(work);
  if (depth > SCHEMA_BOUNDS.maxDepth) {
    throw new SchemaBoundsError(`it nests deeper than ${SCHEMA_BOUNDS.maxDepth} levels (a $ref cycle?)`);
  }
  const next = depth + 1;
  const s = asSchema(schema);
  const r = asSchema(root);
  const errors: string[] = [];
  const fail = (message: string): void => {
    errors.push(`${path}: ${message}`);
  };
  if (typeof s.$ref === 'string') append(errors, validate(resolveRef(s.$ref, r), value, r, path, work, next));
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const actual = jsonType(value);
    if (!types.some((t) => t === actual || (t === 'number' && actual === 'integer'))) fail(`must be ${types.join(' or ')}, got ${actual}`);
  }
  if ('const' in s && !deepEqual(s.const, value)) fail(`must equal ${JSON.stringify(s.const)}`);
  if (Array.isArray(s.enum) && !enumKeys(s.enum, work).has(JSON.stringify(canonical(value)))) {
    fail(`must be one of ${s.enum.length > 10 ? `${s.enum.length} values` : JSON.stringify(s.enum)}`);
  }
  if (typeof value === 'number') {
    if (typeof s.minimum === 'number' && (s.exclusiveMinimum === true ? value <= s.minimum : value < s.minimum)) fail(`must be >${s.exclusiveMinimum === true ? '' : '='} ${s.minimum}`);
    if (typeof s.maximum === 'number' && (s.exclusiveMaximum === true ? value >= s.maximum : value > s.maximum)) fail(`must be <${s.exclusiveMaximum === true ? '' : '='} ${s.maximum}`);
    if (typeof s.exclusiveMinimum === 'number' && value <= s.exclusiveMinimum) fail(`must be > ${s.exclusiveMinimum}`);
    if (typeof s.exclusiveMaximum === 'number' && value >= s.exclusiveMaximum) fail(`must be < ${s.exclusiveMaximum}`);
    if (typeof s.multipleOf === 'number' && s.multipleOf > 0) {
      const ratio = value / s.multipleOf;
      if (Math.abs(ratio - Math.round(ratio)) > 1e-9) fail(`must be a multiple of ${s.multipleOf}`);
    }
  }
  if (typeof value === 'string') {
    const length = [...value].length;
    if (typeof s.minLength === 'number' && length < s.minLength) fail(`must have at least ${s.minLength} characters`);
    if (typeof s.maxLength === 'number' && length > s.maxLength) fail(`must have at most ${s.maxLength} characters`);
    if (typeof s.pattern === 'string') {
      const pattern = checkablePattern(s.pattern);
      if (pattern && !testPattern(pattern, value, work)) fail(`must match ${s.pattern}`);
    }
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === 'number' && value.length < s.minItems) fail(`must have at least ${s.minItems} items`);
    if (typeof s.maxItems === 'number' && value.length > s.maxItems) fail(`must have at most ${s.maxItems} items`);
    if (s.uniqueItems === true) {
      const seen = new Set<string>();
      spend(work, value.length);
      if (value.some((v) => seen.size === seen.add(JSON.stringify(canonical(v))).size)) fail('must have unique items');
    }
    value.forEach((item, i) => {
      const itemSchema = Array.isArray(s.items) ? s.items[i] : s.items;
      if (itemSchema !== undefined) append(errors, validate(itemSchema, item, r, `${path}[${i}]`, work, next));
    });
  }
  if (isRecord(value)) {
    const properties = asSchema(s.properties);
    if (Array.isArray(s.required)) for (const key of s.required) if (typeof key === 'string' && !Object.hasOwn(value, key)) fail(`missing required property ${key}`);
    const count = Object.keys(value).length;
    if (typeof s.minProperties === 'number' && count < s.minProperties) fail(`must have at least ${s.minProperties} properties`);
    if (typeof s.maxProperties === 'number' && count > s.maxProperties) fail(`must have at most ${s.maxProperties} properties`);
    for (const [key, item] of Object.entries(value)) {
      if (Object.hasOwn(properties, key)) append(errors, validate(properties[key], item, r, `${path}.${key}`, work, next));
      else if (s.additionalProperties === false) fail(`unexpected property ${key}`);
      else if (isRecord(s.additionalProperties)) append(errors, validate(s.additionalProperties, item, r, `${path}.${key}`, work, next));
    }
  }
  if (Array.isArray(s.allOf)) for (const part of s.allOf) append(errors, validate(part, value, r, path, work, next));
  if (Array.isArray(s.anyOf) && !s.anyOf.some((part) => validate(part, value, r, path, work, next).length === 0)) fail('must match a schema of anyOf');
  if (Array.isArray(s.oneOf) && s.oneOf.filter((part) => validate(part, value, r, path, work, next).length === 0).length !== 1) fail('must match exactly one schema of oneOf');
  return errors;
}

/** `errors.push(...more)` without spreading: a long list as call arguments overflows the stack. */
function append(errors: string[], more: string[]): void {
  for (const error of more) errors.push(error);
}

/**
 * The schema a local `$ref` points at, or `{}` when it points at nothing: a member the schema does not have itself
 * (`#/constructor` is not Object.prototype's), or a part with malformed percent-encoding (`#/%E0`), which threw a
 * URIError that the request was answered with as a malformed URL.
 */
function resolveRef(ref: string, root: JsonSchema): JsonSchema {
  if (!ref.startsWith('#')) return {};
  let current: unknown = root;
  for (const part of ref.slice(1).split('/').filter(Boolean)) {
    let key: string;
    try {
      key = decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return {};
    }
    current = isRecord(current) && Object.hasOwn(current, key) ? current[key] : undefined;
  }
  return asSchema(current);
}

/**
 * `out[key] = value` as an own property whatever the name: assigning `__proto__` would set the object's prototype
 * instead (the property missing from the JSON written), and a required `toString` or `constructor`, found by `in`
 * on Object.prototype, was never written.
 */
function setOwn(out: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true });
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (isRecord(value)) return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  return value;
}

function asSchema(value: unknown): JsonSchema {
  return isRecord(value) ? value : {};
}

/** An `enum`'s values as canonical JSON, built once per array (and charged once), so each check is one lookup. */
const enumSets = new WeakMap<unknown[], Set<string>>();
function enumKeys(values: unknown[], work: Work): Set<string> {
  let keys = enumSets.get(values);
  if (keys === undefined) {
    spend(work, Math.ceil(values.length / 10));
    keys = new Set(values.map((v) => JSON.stringify(canonical(v))));
    enumSets.set(values, keys);
  }
  return keys;
}

/** A compiled `pattern` and what bounds the cost of running it. */
interface Pattern {
  regexp: RegExp;
  source: string;
  /** Quantifiers and alternations: a test backtracks through at most about (length + 1)^(choices + 1) states. */
  choices: number;
  /** Star height above one, a look-around or a back-reference: no such bound, so always run time-boxed. */
  unbounded: boolean;
}

const checkable = new Map<string, Pattern | null>();

/** The schema's `pattern` compiled (`u`, as JSON Schema means it), or null when invalid or over 1,000 characters. */
export function checkablePattern(source: string): Pattern | null {
  let known = checkable.get(source);
  if (known !== undefined) return known;
  known = null;
  if (source.length <= 1000) {
    try {
      known = { regexp: new RegExp(source, 'u'), source, ...patternShape(source) };
    } catch {
      // An invalid pattern constrains nothing we can check.
    }
  }
  if (checkable.size > 1000) checkable.clear();
  checkable.set(source, known);
  return known;
}

const sandbox = vm.createContext({ regexp: /$^/, text: '' });
const runTest = new vm.Script('regexp.test(text)');

/**
 * Whether `text` matches, within the fill's time for patterns. The pattern and the strings it is tried on both
 * come from the request, and `x*x*x*x*y` on 400 characters backtracks for minutes; a RegExp can only be stopped
 * from outside, by `vm`'s watchdog. Starting that watchdog costs about 0.1 ms, so a test whose worst case is
 * small (few quantifiers, a short string) runs directly. A test cut off after `patternTestMs` counts as not
 * matching (and the filler turns to strings written from the pattern); once `maxPatternMs` is spent, the fill
 * is refused.
 */
function testPattern(pattern: Pattern, text: string, work: Work): boolean {
  const left = SCHEMA_BOUNDS.maxPatternMs - work.patternMs;
  if (left <= 0) {
    throw new SchemaBoundsError(`testing strings against its pattern ${JSON.stringify(pattern.source)} takes more than ${SCHEMA_BOUNDS.maxPatternMs} ms`);
  }
  const start = performance.now();
  try {
    // log10 of (length + 1)^(choices + 1) × the pattern's length: at most a million steps run directly.
    if (!pattern.unbounded && (pattern.choices + 1) * Math.log10(text.length + 1) + Math.log10(pattern.source.length + 1) <= 6) {
      return pattern.regexp.test(text);
    }
    sandbox.regexp = pattern.regexp;
    sandbox.text = text;
    try {
      return runTest.runInContext(sandbox, { timeout: Math.max(1, Math.ceil(Math.min(left, SCHEMA_BOUNDS.patternTestMs))) }) === true;
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
        work.slowPatterns.add(pattern.source);
        return false;
      }
      throw err;
    } finally {
      sandbox.text = '';
    }
  } finally {
    work.patternMs += performance.now() - start;
  }
}

/** Strings written from `source` (RandExp), for a pattern none of the question's words match. */
function fromPattern(source: string, schema: JsonSchema, variant: number): string[] {
  // `{n}` repeats are written out: past the longest string the filler writes, nothing fits.
  for (const [, n] of source.matchAll(/\{(\d+)/g)) if (Number(n) > SCHEMA_BOUNDS.maxStringLength) return [];
  const out: string[] = [];
  try {
    const writer = new RandExp(source, 'u');
    const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
    const max = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
    writer.max = Math.max(1, Math.min(Math.max(min, 8), max));
    // The first string takes every repeat's least count and every class's first character; the others vary,
    // from a seed (deterministic: the same request gets the same answer).
    let seed = 1 + variant * 7919;
    const next = (): number => {
      seed = (seed * 48271) % 2147483647;
      return seed;
    };
    for (let attempt = 0; attempt < 4; attempt++) {
      writer.randInt = attempt === 0 && variant === 0 ? (a: number) => a : (a: number, b: number) => a + (next() % (b - a + 1));
      const text = writer.gen();
      // Padded with its own last character, a string of `[a-f0-9]+` stays one.
      if (text.length <= 2 * SCHEMA_BOUNDS.maxStringLength) out.push(text, fitLength(text, schema, [...text].at(-1) ?? 'x'));
    }
  } catch {
    // A pattern RandExp cannot read: the question's words were all there was.
  }
  return out;
}

/**
 * What bounds a pattern's backtracking: its quantifiers and alternations (`choices`), and whether any is
 * nested in a quantified group (`(a+)+`, `(a|a)*`: exponential) or it has look-arounds or back-references.
 */
function patternShape(source: string): { choices: number; unbounded: boolean } {
  // For each open group: whether it holds a quantifier or a `|` so far.
  const open: boolean[] = [];
  let choices = 0;
  let unbounded = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') {
      if (/[1-9k]/.test(source[i + 1] ?? '')) unbounded = true;
      i++;
      continue;
    }
    if (c === '[') {
      // A character class: skip to its closing bracket.
      for (i++; i < source.length && source[i] !== ']'; i++) if (source[i] === '\\') i++;
      continue;
    }
    if (c === '(') {
      if (/^\(\?<?[=!]/.test(source.slice(i, i + 4))) unbounded = true;
      open.push(false);
    } else if (c === ')') {
      const risky = open.pop() ?? false;
      const next = source[i + 1];
      const repeated = next === '*' || next === '+' || (next === '{' && /^\{\d*,\d*\}|^\{\d{2,}\}/.test(source.slice(i + 1)));
      if (risky && repeated) unbounded = true;
      // What the group held, the group around it holds too; a repeated group is a quantifier in it.
      if (open.length > 0) open[open.length - 1] ||= risky || repeated;
    } else if (c === '*' || c === '+' || c === '|' || (c === '?' && source[i - 1] !== '(') || (c === '{' && /^\{\d*,/.test(source.slice(i)))) {
      // A choice the matcher may backtrack into (`{3}` is none).
      choices++;
      if (open.length > 0) open[open.length - 1] = true;
    }
  }
  return { choices, unbounded };
}
