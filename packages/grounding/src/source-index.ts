import { inCapitals, isWhiteSpace, MAX_ACRONYM, NegationScope, readNumber, tokenize, type Token } from './tokenize.js';

/** Characters of a stem that count as a related-word match ("production" ~ "produced"). */
export const PREFIX_LEN = 6;

/** What the check asks of a set of values: membership only. */
export interface Lookup<T> {
  has(value: T): boolean;
}

/**
 * Everything the check needs to know about the sources, built once per check in linear time, or put together
 * from the indexes of the single texts (`mergeSourceIndexes`). Read-only once built.
 */
export interface SourceIndex {
  stems: Lookup<string>;
  prefixes: Lookup<string>;
  /** Consecutive content stems (function words skipped): first stem → second stems. */
  bigrams: { get(first: string): Lookup<string> | undefined };
  numbers: Lookup<number>;
  /** Sorted, without repeats, for tolerance look-ups of rounded numbers. */
  numberList: readonly number[];
  acronyms: Lookup<string>;
  /** For each source sentence, its content stems (and its negation and quantifier words). */
  sentences: ReadonlyArray<Lookup<string>>;
  /** Content stem (or a number's key) → the sentences containing it; the same `Posting` each time for a key. */
  postings: { get(stem: string): Posting | undefined };
  /** The sentences with a negation, and what each negates (see `NegatedSentence`). */
  negatedSentences: { has(sid: number): boolean; get(sid: number): NegatedSentence | undefined };
  /** Where each sentence is: which source text (its position in the list given) and UTF-16 offsets into it. */
  spans: readonly SentenceSpan[];
  /** Source texts the index was built from, empty ones included. */
  texts: number;
  empty: boolean;
}

/** What a sentence with a negation negates, and what it states plainly (see `NegationScope`). */
export interface NegatedSentence {
  scope: ReadonlySet<string>;
  plain: ReadonlySet<string>;
}

/** A sentence of the sources: `sources[source].slice(start, end)`. */
export interface SentenceSpan {
  source: number;
  start: number;
  end: number;
}

/** The sentences of the sources that hold one content stem. */
export interface Posting {
  /** Sentence numbers, ascending. */
  sentences: readonly number[];
}

/** A `SourceIndex` as `buildSourceIndex` makes it: plain sets and maps. */
export interface BuiltSourceIndex extends SourceIndex {
  stems: Set<string>;
  prefixes: Set<string>;
  bigrams: BigramSet;
  numbers: Set<number>;
  numberList: number[];
  acronyms: Set<string>;
  sentences: Array<Set<string>>;
  postings: Map<string, Posting & { sentences: number[] }>;
  negatedSentences: Map<number, NegatedSentence>;
  spans: SentenceSpan[];
}

/** Pairs of stems, stored without building a key string per pair. */
export type BigramSet = Map<string, Set<string>>;

export function addBigram(set: BigramSet, first: string, second: string): void {
  let seconds = set.get(first);
  if (!seconds) set.set(first, (seconds = new Set()));
  seconds.add(second);
}

/** Consecutive content words (and numbers) of a sentence, skipping function words in between. */
export function contentBigrams(tokens: readonly Token[], emit: (first: Token, second: Token, secondIndex: number) => void): void {
  let prev: Token | undefined;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (prev && prev.sentence !== t.sentence) prev = undefined;
    if (!t.word.content && t.word.value === undefined) continue;
    if (prev) emit(prev, t, i);
    prev = t;
  }
}

export function buildSourceIndex(sources: readonly string[]): BuiltSourceIndex {
  const index: BuiltSourceIndex = {
    stems: new Set(),
    prefixes: new Set(),
    bigrams: new Map(),
    numbers: new Set(),
    numberList: [],
    acronyms: new Set(),
    sentences: [],
    postings: new Map(),
    negatedSentences: new Map(),
    spans: [],
    texts: sources.length,
    empty: true,
  };
  for (let k = 0; k < sources.length; k++) {
    const source = sources[k]!;
    if (!source || !/[\p{L}\p{N}]/u.test(source)) continue;
    index.empty = false;
    const tokens = tokenize(source);
    const base = index.sentences.length;
    let run = '';
    const negation = new NegationReader(index.negatedSentences);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!;
      const sid = base + t.sentence;
      negation.read(sid, t);
      while (index.sentences.length <= sid) {
        index.sentences.push(new Set());
        index.spans.push({ source: k, start: t.start, end: t.end });
      }
      index.spans[sid]!.end = t.end;
      if (!index.stems.has(t.word.stem)) {
        index.stems.add(t.word.stem);
        if (t.word.stem.length >= PREFIX_LEN) index.prefixes.add(t.word.stem.slice(0, PREFIX_LEN));
      }
      if (t.word.norm !== t.word.stem) index.stems.add(t.word.norm);
      if (t.word.content) addToSentence(index, sid, t.word.stem);
      // An acronym spelled like a function word ("US", "WHO"), or the month May, is found in its sentence, as the
      // claims read it.
      else if (t.word.cap && ((!t.sentenceStart && t.word.norm === 'may') || inCapitals(source, t, MAX_ACRONYM))) {
        addToSentence(index, sid, t.word.norm);
      }
      if (t.word.negation || t.word.quantifier) index.sentences[sid]!.add(t.word.norm);
      if (t.word.value !== undefined || t.word.numberWord !== undefined) {
        const num = readNumber(tokens, i);
        if (num) {
          for (const v of num.values) {
            index.numbers.add(v);
            addToSentence(index, sid, numberKey(v));
          }
        }
      }
      // Acronyms from runs of capitalised words: "United States" → "us", "Department of Parks" → "dp".
      const prev = tokens[i - 1];
      if (run && prev && !onlySpaces(source, prev.end, t.start)) {
        if (run.length >= 2) addAcronym(index, base + prev.sentence, run);
        run = '';
      }
      if (t.word.cap && t.word.value === undefined) run += t.word.norm[0];
      else if (!(run && (t.word.norm === 'of' || t.word.norm === 'and' || t.word.norm === 'the'))) {
        if (run.length >= 2) addAcronym(index, base + (prev?.sentence ?? t.sentence), run);
        run = '';
      }
    }
    if (run.length >= 2) addAcronym(index, index.sentences.length - 1, run);
    negation.end();
    contentBigrams(tokens, (a, b) => addBigram(index.bigrams, a.word.stem, b.word.stem));
  }
  index.numberList = [...index.numbers].sort((a, b) => a - b);
  return index;
}

/** Reads a text's tokens in order and keeps, for each sentence with a negation, what it negates. */
class NegationReader {
  private sid = -1;
  private readonly sentence = new NegationScope();

  constructor(private readonly into: Map<number, NegatedSentence>) {}

  read(sid: number, t: Token): void {
    if (sid !== this.sid) {
      this.end();
      this.sid = sid;
    }
    this.sentence.read(t);
  }

  end(): void {
    if (this.sentence.negated) this.into.set(this.sid, { scope: this.sentence.scope(), plain: this.sentence.plain() });
    this.sentence.reset();
  }
}

/** An acronym of a run of capitalised words ("United States" → "us"), found in the sentence of the run. */
function addAcronym(index: BuiltSourceIndex, sid: number, run: string): void {
  index.acronyms.add(run);
  addToSentence(index, sid, run);
}

/** How a number is kept among a sentence's stems (never a word's spelling). */
export function numberKey(v: number): string {
  return `#${v}`;
}

/** Adds a stem to a sentence's set and the sentence to the stem's posting. */
function addToSentence(index: BuiltSourceIndex, sid: number, key: string): void {
  const sentence = index.sentences[sid]!;
  if (sentence.has(key)) return;
  sentence.add(key);
  let posting = index.postings.get(key);
  if (!posting) index.postings.set(key, (posting = { sentences: [] }));
  posting.sentences.push(sid);
}

/** Is `text[from, to)` empty or white space only? */
function onlySpaces(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (!isWhiteSpace(c)) return false;
  }
  return true;
}

/** Is `v` in the sources, exactly or as a rounding of a source number ("$181.7 million" for 181,674,817)? */
export function hasNumber(index: SourceIndex, v: number): boolean {
  if (index.numbers.has(v)) return true;
  // Small integers and years must match exactly: 2000 is not a rounding of 2003.
  if (v === 0 || (Number.isInteger(v) && Math.abs(v) < 10_000)) return false;
  // Accept roundings to the precision the answer is written in.
  const digits = significantDigits(v);
  const scale = Math.pow(10, Math.floor(Math.log10(Math.abs(v))) - digits + 1);
  const units = v / scale;
  const list = index.numberList;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  // Written to fewer digits: rounded ("181.7 million", "182 million") or truncated ("181 million") from
  // 181,674,817, and nothing else ("190 million" is neither).
  for (const n of [list[lo - 1], list[lo], list[lo + 1]]) {
    if (n === undefined || significantDigits(n) <= digits) continue;
    const r = n / scale;
    // Cut off rather than rounded only when two digits or more are written: "1 million" is no cut of 1,999,999.
    if (Math.abs(Math.round(r) - units) < 1e-6 || (digits >= 2 && Math.abs(Math.trunc(r) - units) < 1e-6)) return true;
  }
  return false;
}

function significantDigits(v: number): number {
  const s = Math.abs(v).toPrecision(15).replace(/\.?0+$/, '').replace('.', '').replace(/^0+/, '');
  return Math.max(1, s.replace(/0+$/, '').length);
}

/** Parts at most in a merged index (its look-ups ask each part); a list with more is indexed as a whole. */
const MAX_PARTS = 8;

/**
 * The indexes of consecutive runs of the sources as one index, without copying them: look-ups ask each part,
 * and sentences are numbered on from part to part. Gives exactly what `buildSourceIndex` gives for all the
 * texts of the parts in order. The parts are not changed (a cached part can be in any number of merges).
 *
 * @example
 * mergeSourceIndexes([buildSourceIndex([systemPrompt]), buildSourceIndex([question])]);
 */
export function mergeSourceIndexes(parts: readonly BuiltSourceIndex[]): SourceIndex {
  const texts = parts.reduce((n, p) => n + p.texts, 0);
  // The parts with sentences, each with the source number of its first text (empty parts counted).
  const filled: BuiltSourceIndex[] = [];
  const shifts: number[] = [];
  for (let k = 0, n = 0; k < parts.length; n += parts[k]!.texts, k++) {
    if (parts[k]!.empty) continue;
    filled.push(parts[k]!);
    shifts.push(n);
  }
  if (filled.length === 0) return { ...buildSourceIndex([]), texts };
  if (filled.length === 1 && shifts[0] === 0 && texts === filled[0]!.texts) return filled[0]!;
  const bases: number[] = [];
  const spans: SentenceSpan[] = [];
  const sentences: Array<Set<string>> = [];
  const negatedSentences = new Map<number, NegatedSentence>();
  const numbers = new Set<number>();
  for (let k = 0; k < filled.length; k++) {
    const part = filled[k]!;
    const base = sentences.length;
    bases.push(base);
    for (const sentence of part.sentences) sentences.push(sentence);
    const shift = shifts[k]!;
    for (const sp of part.spans) spans.push(shift === 0 ? sp : { source: sp.source + shift, start: sp.start, end: sp.end });
    for (const [sid, negated] of part.negatedSentences) negatedSentences.set(base + sid, negated);
    for (const v of part.numbers) numbers.add(v);
  }
  const postings = new Map<string, Posting>();
  return {
    stems: new AnyOf(filled.map((p) => p.stems)),
    prefixes: new AnyOf(filled.map((p) => p.prefixes)),
    acronyms: new AnyOf(filled.map((p) => p.acronyms)),
    numbers,
    numberList: [...numbers].sort((a, b) => a - b),
    sentences,
    negatedSentences,
    spans,
    texts,
    empty: false,
    bigrams: {
      get(first) {
        let found: Set<string> | undefined;
        let several: Array<Set<string>> | undefined;
        for (const part of filled) {
          const seconds = part.bigrams.get(first);
          if (seconds === undefined) continue;
          if (found === undefined) found = seconds;
          else (several ??= [found]).push(seconds);
        }
        return several ? new AnyOf(several) : found;
      },
    },
    postings: {
      get(stem) {
        let first: Posting | undefined;
        let sentences: number[] | undefined;
        for (let k = 0; k < filled.length; k++) {
          const own = filled[k]!.postings.get(stem);
          if (own === undefined) continue;
          if (k === 0) first = own;
          else {
            // Sentences of several parts: a posting of this merge, made once per stem.
            if (sentences === undefined) {
              const made = postings.get(stem);
              if (made !== undefined) return made;
              sentences = first ? first.sentences.slice() : [];
            }
            for (const sid of own.sentences) sentences.push(sid + bases[k]!);
          }
        }
        if (sentences === undefined) return first;
        const posting = { sentences };
        postings.set(stem, posting);
        return posting;
      },
    },
  };
}

/** Membership in any of several sets. */
class AnyOf<T> implements Lookup<T> {
  constructor(private readonly sets: ReadonlyArray<Lookup<T>>) {}

  has(value: T): boolean {
    for (const set of this.sets) if (set.has(value)) return true;
    return false;
  }
}

/**
 * Indexes of recently seen source texts, each long text on its own, least recently used dropped first; the
 * index of a list of sources merges its texts' indexes (`mergeSourceIndexes`). A system prompt or a retrieved
 * document repeats across requests while the user's message changes every time: the long repeated text is
 * indexed once, and per request only the new short texts are. An index is read-only once built, so a cached
 * one gives exactly the result of a fresh one. The list asked for last is kept whole (one conversation
 * repeated: no merge, and the evidence memo of its index is reused).
 *
 * @example
 * const cache = new SourceIndexCache(); checkGrounding(input, { sourceIndexCache: cache });
 */
export class SourceIndexCache {
  private readonly entries = new Map<string, BuiltSourceIndex>();
  private chars = 0;
  /** The list asked for last and its index. */
  private last: { sources: readonly string[]; index: SourceIndex } | undefined;

  /**
   * @param maxEntries texts kept at most
   * @param maxChars characters kept at most, all texts together (an index takes several times its text's
   *   size); texts longer than a quarter of this are indexed but not kept
   * @param minChars shorter texts are indexed afresh each time, with their shorter neighbours, and not kept:
   *   they cost little to index, and keeping every new user message would only churn the cache (and the old
   *   generation of the heap)
   */
  constructor(
    readonly maxEntries = 256,
    readonly maxChars = 1_000_000,
    readonly minChars = 256,
  ) {}

  get(sources: readonly string[]): SourceIndex {
    // The same sources as last time are found without a look-up per text.
    if (this.last && sameStrings(this.last.sources, sources)) return this.last.index;
    const kept = (text: string) => text.length >= this.minChars && text.length * 4 <= this.maxChars;
    // The parts: each kept text, and each run of other texts between them. Too many: indexed as a whole.
    let count = 0;
    for (let i = 0; i < sources.length; i++) if (kept(sources[i]!) || i === 0 || kept(sources[i - 1]!)) count++;
    let index: SourceIndex;
    if (count > MAX_PARTS) index = buildSourceIndex(sources);
    else {
      const parts: BuiltSourceIndex[] = [];
      let run: string[] = [];
      for (const text of sources) {
        if (!kept(text)) {
          run.push(text);
          continue;
        }
        if (run.length > 0) parts.push(buildSourceIndex(run));
        run = [];
        parts.push(this.part(text));
      }
      if (run.length > 0) parts.push(buildSourceIndex(run));
      index = mergeSourceIndexes(parts);
    }
    this.last = { sources: [...sources], index };
    return index;
  }

  /** Texts kept. */
  get size(): number {
    return this.entries.size;
  }

  /** The index of one text, from the cache when it is there. */
  private part(text: string): BuiltSourceIndex {
    let index = this.entries.get(text);
    if (index !== undefined) {
      this.entries.delete(text);
    } else {
      index = buildSourceIndex([text]);
      this.chars += text.length;
    }
    this.entries.set(text, index);
    for (const [oldest] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.chars <= this.maxChars) break;
      this.entries.delete(oldest);
      this.chars -= oldest.length;
    }
    return index;
  }
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
