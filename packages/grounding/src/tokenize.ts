import { META_WORDS, MONTHS, NEGATIONS, NUMBER_WORDS, SCALE_WORDS, STOPWORDS, SYNONYMS } from './lexicon.js';

/** One word or number of a text, with UTF-16 offsets into that text. */
export interface Token {
  start: number;
  end: number;
  /** Lower-cased, accents removed, possessive dropped. */
  norm: string;
  /** Stem of `norm` after synonym mapping; the unit of lexical matching. */
  stem: string;
  /** Starts with an upper-case letter. */
  cap: boolean;
  /** First token of its sentence. */
  sentenceStart: boolean;
  /** Index of the sentence the token belongs to. */
  sentence: number;
  /** Numeric value when the token is written with digits. */
  value: number | undefined;
  /** A content word: has letters, not a function word, not summary boilerplate. */
  content: boolean;
}

// Numbers keep their inner separators ("181,674,817", "5.68"); words keep inner apostrophes ("Omura's").
const TOKEN_RE = /\p{N}+(?:[.,]\p{N}+)*(?:st|nd|rd|th|s)?|[\p{L}\p{M}]+(?:['’][\p{L}\p{M}]+)*|[$€£¥%]/gu;
const DIACRITICS_RE = /\p{M}+/gu;
const UPPER_RE = /^\p{Lu}/u;

const stemCache = new Map<string, string>();

/** Light suffix-stripping stemmer: conflates inflections ("grossed"/"grosses"/"grossing"). */
export function stem(word: string): string {
  const cached = stemCache.get(word);
  if (cached !== undefined) return cached;
  let w = word;
  if (w.length > 3 && !/\d/.test(w)) {
    if (w.endsWith('ies') && w.length > 4) w = w.slice(0, -3) + 'y';
    else if (w.endsWith('sses')) w = w.slice(0, -2);
    else if (/(?:x|ch|sh)es$/.test(w)) w = w.slice(0, -2);
    else if (w.endsWith('s') && !/(?:ss|us|is)$/.test(w)) w = w.slice(0, -1);
    if (w.endsWith('ing') && w.length >= 6) w = undouble(w.slice(0, -3));
    else if (w.endsWith('ied') && w.length >= 5) w = w.slice(0, -3) + 'y';
    else if (w.endsWith('ed') && w.length >= 5) w = undouble(w.slice(0, -2));
    if (w.endsWith('ly') && w.length >= 6) w = w.slice(0, -2);
    if (w.endsWith('ation') && w.length >= 8) w = w.slice(0, -5);
    else if (w.endsWith('ment') && w.length >= 8) w = w.slice(0, -4);
    else if (w.endsWith('ness') && w.length >= 7) w = w.slice(0, -4);
    if (w.endsWith('e') && w.length >= 4) w = w.slice(0, -1);
    if (w.endsWith('y') && w.length >= 4) w = w.slice(0, -1) + 'i';
  }
  const mapped = SYNONYMS.get(w) ?? w;
  if (stemCache.size > 50_000) stemCache.clear();
  stemCache.set(word, mapped);
  return mapped;
}

function undouble(w: string): string {
  const n = w.length;
  if (n >= 3 && w[n - 1] === w[n - 2] && !/[lsz]/.test(w[n - 1] ?? '')) return w.slice(0, -1);
  return w;
}

/** Lower-case, strip accents and a trailing possessive. */
export function normalize(raw: string): string {
  // eslint-disable-next-line no-control-regex
  let w = /^[\x00-\x7f]*$/.test(raw) ? raw.toLowerCase() : raw.normalize('NFD').replace(DIACRITICS_RE, '').toLowerCase().replace(/’/g, "'");
  if (w.endsWith("'s")) w = w.slice(0, -2);
  else if (w.endsWith("n't")) w = "n't";
  return w;
}

function parseDigits(raw: string): number | undefined {
  const m = /^(\p{N}+(?:[.,]\p{N}+)*)/u.exec(raw);
  if (!m?.[1]) return undefined;
  let s = m[1];
  // "1,234" and "1,234,567" group thousands; "5.68" is a decimal; "3,5" (decimal comma) is rare in English.
  if (/^\d{1,3}(?:,\d{3})+(?:\.\d+)?$/.test(s)) s = s.replace(/,/g, '');
  else s = s.replace(/,/g, '.');
  const v = Number(s);
  return Number.isFinite(v) ? v : undefined;
}

/** Split text into tokens with offsets, sentence indices and numeric values. */
export function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let sentence = 0;
  let sentenceStart = true;
  let prevEnd = 0;
  TOKEN_RE.lastIndex = 0;
  for (let m = TOKEN_RE.exec(text); m !== null; m = TOKEN_RE.exec(text)) {
    const raw = m[0];
    const start = m.index;
    if (out.length > 0 && sentenceBreak(text, prevEnd, start)) {
      sentence++;
      sentenceStart = true;
    }
    const norm = normalize(raw);
    const c = raw.charCodeAt(0);
    const digit = (c >= 48 && c <= 57) || (c > 127 && /^\p{N}/u.test(raw));
    const value = digit ? parseDigits(raw) : undefined;
    const cap = c < 128 ? c >= 65 && c <= 90 : UPPER_RE.test(raw);
    out.push({
      start,
      end: start + raw.length,
      norm,
      stem: value !== undefined ? String(value) : stem(norm),
      cap,
      sentenceStart,
      sentence,
      value,
      content: value === undefined && !digit && norm.length > 0 && !STOPWORDS.has(norm) && !META_WORDS.has(norm) && !NEGATIONS.has(norm) && !SYMBOLS.has(norm),
    });
    sentenceStart = false;
    prevEnd = start + raw.length;
  }
  return out;
}

const SYMBOLS = new Set(['$', '€', '£', '¥', '%']);

/**
 * Does the gap between two tokens end a sentence? A line break does; so does [.!?] (optionally
 * followed by closing quotes or brackets) followed by whitespace.
 */
function sentenceBreak(text: string, from: number, to: number): boolean {
  let sawEnd = false;
  for (let i = from; i < to; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 10) return true;
    if (ch === 46 || ch === 33 || ch === 63) sawEnd = true;
    else if (ch === 32 || ch === 9 || ch === 13 || ch === 160) {
      if (sawEnd) return true;
    } else if (!(ch === 34 || ch === 39 || ch === 41 || ch === 93 || ch === 0x201d || ch === 0x2019)) sawEnd = false;
  }
  return false;
}

export function isStopword(t: Token): boolean {
  return STOPWORDS.has(t.norm);
}

/**
 * The numeric values a number mention can stand for: "160 million" → 160 and 160,000,000;
 * "two dozen" → 24; "1,200" → 1200. `i` is the index of the number's first token; returns
 * the values and the index after the mention.
 */
export function readNumber(tokens: readonly Token[], i: number): { values: number[]; next: number } | undefined {
  const t = tokens[i];
  if (!t) return undefined;
  let base: number | undefined = t.value;
  let next = i + 1;
  if (base === undefined) {
    const w = NUMBER_WORDS.get(t.norm);
    if (w === undefined || t.norm === 'one' || t.norm === 'single' || t.norm === 'half') return undefined;
    base = w;
    // "twenty five", "two dozen", "three hundred"
    const n1 = tokens[next];
    if (n1 && n1.start - t.end <= 1) {
      const w1 = NUMBER_WORDS.get(n1.norm);
      if (w1 !== undefined && w1 < 10 && base >= 20 && base < 100) { base += w1; next++; }
    }
  }
  if (MONTHS.has(t.norm)) return undefined;
  const values = [base];
  const s = tokens[next];
  if (s && s.start - (tokens[next - 1]?.end ?? 0) <= 1) {
    const scale = SCALE_WORDS.get(s.norm);
    if (scale !== undefined) {
      values.push(base * scale);
      next++;
    }
  }
  return { values, next };
}
