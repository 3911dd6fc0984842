import { NEGATIONS, QUANTIFIERS } from './lexicon.js';
import { readNumber, tokenize, type Token } from './tokenize.js';

/** Characters of a stem that count as a related-word match ("production" ~ "produced"). */
export const PREFIX_LEN = 6;

/** Everything the check needs to know about the sources, built once per check in linear time. */
export interface SourceIndex {
  stems: Set<string>;
  prefixes: Set<string>;
  bigrams: Set<string>;
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
  return t.content;
}

/** Bigram keys of consecutive content words, skipping function words in between. */
export function contentBigrams(tokens: readonly Token[], emit: (key: string, second: number) => void): void {
  let prev: Token | undefined;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (prev && prev.sentence !== t.sentence) prev = undefined;
    if (!isContent(t) && t.value === undefined) continue;
    if (prev) emit(prev.stem + ' ' + t.stem, i);
    prev = t;
  }
}

export function buildSourceIndex(sources: readonly string[]): SourceIndex {
  const index: SourceIndex = {
    stems: new Set(),
    prefixes: new Set(),
    bigrams: new Set(),
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
      index.stems.add(t.stem);
      index.stems.add(t.norm);
      if (t.stem.length >= PREFIX_LEN) index.prefixes.add(t.stem.slice(0, PREFIX_LEN));
      if (NEGATIONS.has(t.norm) || QUANTIFIERS.has(t.norm)) {
        if (NEGATIONS.has(t.norm)) index.negatedSentences.add(sid);
        index.sentences[sid]!.add(t.norm);
      }
      if (isContent(t)) {
        index.contentWords++;
        const sentence = index.sentences[sid]!;
        if (!sentence.has(t.stem)) {
          sentence.add(t.stem);
          let list = index.postings.get(t.stem);
          if (!list) index.postings.set(t.stem, (list = []));
          list.push(sid);
        }
      }
      const num = readNumber(tokens, i);
      if (num) for (const v of num.values) index.numbers.add(v);
      // Acronyms from runs of capitalised words: "United States" → "us", "Department of Parks" → "dp".
      const prev = tokens[i - 1];
      if (run && prev && /[^\s]/.test(source.slice(prev.end, t.start))) {
        if (run.length >= 2) index.acronyms.add(run);
        run = '';
      }
      if (t.cap && t.value === undefined) run += t.norm[0];
      else if (!(run && (t.norm === 'of' || t.norm === 'and' || t.norm === 'the'))) {
        if (run.length >= 2) index.acronyms.add(run);
        run = '';
      }
    }
    if (run.length >= 2) index.acronyms.add(run);
    contentBigrams(tokens, (key) => index.bigrams.add(key));
  }
  index.numberList = [...index.numbers].sort((a, b) => a - b);
  return index;
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
