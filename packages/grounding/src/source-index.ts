import { isWhiteSpace, readNumber, tokenize, type Token } from './tokenize.js';

/** Characters of a stem that count as a related-word match ("production" ~ "produced"). */
export const PREFIX_LEN = 6;

/** Everything the check needs to know about the sources, built once per check in linear time. */
export interface SourceIndex {
  stems: Set<string>;
  prefixes: Set<string>;
  /** Consecutive content stems (function words skipped): first stem → second stems. */
  bigrams: BigramSet;
  numbers: Set<number>;
  /** Sorted, for tolerance look-ups of rounded numbers. */
  numberList: number[];
  acronyms: Set<string>;
  /** For each source sentence, its content stems. */
  sentences: Array<Set<string>>;
  /** Content stem → sentences containing it. */
  postings: Map<string, number[]>;
  negatedSentences: Set<number>;
  /** Number of content-word tokens in all sources. */
  contentWords: number;
  empty: boolean;
}

export function isContent(t: Token): boolean {
  return t.word.content;
}

/** Pairs of stems, stored without building a key string per pair. */
export type BigramSet = Map<string, Set<string>>;

export function addBigram(set: BigramSet, first: string, second: string): void {
  let seconds = set.get(first);
  if (!seconds) set.set(first, (seconds = new Set()));
  seconds.add(second);
}

export function hasBigram(set: BigramSet, first: string, second: string): boolean {
  return set.get(first)?.has(second) ?? false;
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

export function buildSourceIndex(sources: readonly string[]): SourceIndex {
  const index: SourceIndex = {
    stems: new Set(),
    prefixes: new Set(),
    bigrams: new Map(),
    numbers: new Set(),
    numberList: [],
    acronyms: new Set(),
    sentences: [],
    postings: new Map(),
    negatedSentences: new Set(),
    contentWords: 0,
    empty: true,
  };
  for (const source of sources) {
    if (!source || !/[\p{L}\p{N}]/u.test(source)) continue;
    index.empty = false;
    const tokens = tokenize(source);
    const base = index.sentences.length;
    let run = '';
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!;
      const sid = base + t.sentence;
      while (index.sentences.length <= sid) index.sentences.push(new Set());
      if (!index.stems.has(t.word.stem)) {
        index.stems.add(t.word.stem);
        if (t.word.stem.length >= PREFIX_LEN) index.prefixes.add(t.word.stem.slice(0, PREFIX_LEN));
      }
      if (t.word.norm !== t.word.stem) index.stems.add(t.word.norm);
      if (t.word.content) {
        index.contentWords++;
        const sentence = index.sentences[sid]!;
        if (!sentence.has(t.word.stem)) {
          sentence.add(t.word.stem);
          let list = index.postings.get(t.word.stem);
          if (!list) index.postings.set(t.word.stem, (list = []));
          list.push(sid);
        }
      }
      if (t.word.negation || t.word.quantifier) {
        if (t.word.negation) index.negatedSentences.add(sid);
        index.sentences[sid]!.add(t.word.norm);
      }
      if (t.word.value !== undefined || t.word.numberWord !== undefined) {
        const num = readNumber(tokens, i);
        if (num) for (const v of num.values) index.numbers.add(v);
      }
      // Acronyms from runs of capitalised words: "United States" → "us", "Department of Parks" → "dp".
      const prev = tokens[i - 1];
      if (run && prev && !onlySpaces(source, prev.end, t.start)) {
        if (run.length >= 2) index.acronyms.add(run);
        run = '';
      }
      if (t.word.cap && t.word.value === undefined) run += t.word.norm[0];
      else if (!(run && (t.word.norm === 'of' || t.word.norm === 'and' || t.word.norm === 'the'))) {
        if (run.length >= 2) index.acronyms.add(run);
        run = '';
      }
    }
    if (run.length >= 2) index.acronyms.add(run);
    contentBigrams(tokens, (a, b) => addBigram(index.bigrams, a.word.stem, b.word.stem));
  }
  index.numberList = [...index.numbers].sort((a, b) => a - b);
  return index;
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
  const tol = Math.pow(10, Math.floor(Math.log10(Math.abs(v))) - digits + 1) / 2;
  const list = index.numberList;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
    // Written to fewer digits: rounded ("181.7 million") or truncated ("181 million") from 181,674,817.
  for (const n of [list[lo - 1], list[lo], list[lo + 1]]) {
    if (n !== undefined && Math.abs(n - v) < 2 * tol && significantDigits(n) > digits) return true;
  }
  return false;
}

function significantDigits(v: number): number {
  const s = Math.abs(v).toPrecision(15).replace(/\.?0+$/, '').replace('.', '').replace(/^0+/, '');
  return Math.max(1, s.replace(/0+$/, '').length);
}

/**
 * Recently built source indexes, keyed by the exact source texts, least recently used dropped first.
 * System prompts and retrieved documents repeat across requests; an index is read-only once built, so a
 * cached one gives exactly the result of a fresh one.
 *
 * @example
 * const cache = new SourceIndexCache(); checkGrounding(input, { sourceIndexCache: cache });
 */
export class SourceIndexCache {
  private readonly entries = new Map<string, SourceIndex>();
  private chars = 0;
  /** The entry returned last, which is the most recently used one. */
  private last: { sources: readonly string[]; index: SourceIndex } | undefined;

  /**
   * @param maxEntries indexes kept at most
   * @param maxChars source characters kept at most, all entries together (an index takes several times
   *   its source's size); sources longer than a quarter of this are indexed but not kept
   */
  constructor(
    readonly maxEntries = 256,
    readonly maxChars = 1_000_000,
  ) {}

  get(sources: readonly string[]): SourceIndex {
    // The same sources as last time (the common case: one system prompt) are found without building a key.
    if (this.last && sameStrings(this.last.sources, sources)) return this.last.index;
    // Length-prefixed: no two different source lists share a key.
    let key = '';
    for (const s of sources) key += `${s.length}:${s}`;
    let index = this.entries.get(key);
    if (index !== undefined) this.entries.delete(key);
    else {
      index = buildSourceIndex(sources);
      if (key.length * 4 > this.maxChars) {
        this.last = undefined;
        return index;
      }
      this.chars += key.length;
    }
    this.entries.set(key, index);
    for (const [oldest] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.chars <= this.maxChars) break;
      this.entries.delete(oldest);
      this.chars -= oldest.length;
    }
    this.last = this.entries.has(key) ? { sources: [...sources], index } : undefined;
    return index;
  }

  get size(): number {
    return this.entries.size;
  }
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
