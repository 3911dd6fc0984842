import { BACK_NEGATIONS, CHATTER_WORDS, CLAUSE_FINAL_NEGATIONS, KOREAN_FUNCTION_WORDS, META_WORDS, MONTHS, NEGATIONS, NOT_NEGATED_CJK, NUMBER_WORDS, OTHER_FUNCTION_WORDS, QUANTIFIERS, SCALE_WORDS, STOPWORDS, SYNONYMS, UNITS } from './lexicon.js';
import { packedSpelling, WordTable } from './word-table.js';

/** One word or number of a text, with UTF-16 offsets into that text. */
export interface Token {
  start: number;
  end: number;
  /** First token of its sentence. */
  sentenceStart: boolean;
  /** Index of the sentence the token belongs to. */
  sentence: number;
  word: Word;
}

/**
 * What a token's spelling alone determines. Shared by all tokens of one spelling (and never changed but for its
 * scratch fields), so a repeated word costs one look-up.
 */
export interface Word {
  /** Lower-cased, accents removed, possessive dropped. */
  norm: string;
  /** Stem of `norm` after synonym mapping; the unit of lexical matching. */
  stem: string;
  /** Starts with an upper-case letter. */
  cap: boolean;
  /** Numeric value when the token is written with digits. */
  value: number | undefined;
  /** A content word: has letters, not a function word, not summary boilerplate. */
  content: boolean;
  /** In NEGATIONS. */
  negation: boolean;
  /** In QUANTIFIERS. */
  quantifier: boolean;
  /** Value of a number word ("two", "dozen"), from NUMBER_WORDS. */
  numberWord: number | undefined;
  /**
   * Scratch of the source index being built (`buildSourceIndex`): the build that numbered the word's stem and
   * spelling last, and their numbers in it. A word of a long text repeats many times; looking its keys up once
   * per build rather than once per token saves a good share of the build.
   */
  numberedIn: number;
  stemKey: number;
  normKey: number;
}

// Accents go; the kana voicing marks stay, as they make another word ("ず", the negation, is not "す").
const DIACRITICS_RE = /[^\P{M}\u3099\u309a]+/gu;
const KANA_VOICING_RE = /[\u3099\u309a]/;
const SOFT_HYPHEN_RE = /\u00ad/g;
const APOSTROPHES_RE = /[\u2019\u00b4\u2032]/g;
const UPPER_RE = /^\p{Lu}/u;

const stemCache = new Map<string, string>();
/** Longer spellings are stemmed afresh each time: the memo holds at most STEM_CACHE_MAX × this many characters. */
const STEM_CACHE_MAX_LENGTH = 40;
const STEM_CACHE_MAX = 50_000;

/** Entries and characters the stem memo holds now (for tests: both stay bounded whatever the texts). */
export function stemMemoSize(): { entries: number; chars: number } {
  let chars = 0;
  for (const [word, stemmed] of stemCache) chars += word.length + stemmed.length;
  return { entries: stemCache.size, chars };
}

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
  // A base64 blob or a long URL is one "word": 50,000 of them kept here held gigabytes.
  if (word.length > STEM_CACHE_MAX_LENGTH) return mapped;
  if (stemCache.size >= STEM_CACHE_MAX) stemCache.clear();
  stemCache.set(word, mapped);
  return mapped;
}

function undouble(w: string): string {
  const n = w.length;
  if (n >= 3 && w[n - 1] === w[n - 2] && !/[lsz]/.test(w[n - 1] ?? '')) return w.slice(0, -1);
  return w;
}

/** Where the digit zero is in each script that has digits of its own (Arabic-Indic, Devanagari, Bengali … Thai, Khmer). */
const DIGIT_ZEROS = [0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66, 0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0xff10];
const NON_ASCII_DIGIT_RE = /[^\x00-\x7f]/gu;

/**
 * A number's digits in ASCII: "２０２３" (full-width), "٢٠١٠" (Arabic-Indic) and "४५" (Devanagari) are 2023, 2010 and
 * 45, so a figure in the script's own digits is read, and checked, as the same figure in ASCII digits.
 */
function asciiDigits(raw: string): string {
  return raw.replace(NON_ASCII_DIGIT_RE, (c) => {
    const cp = c.codePointAt(0)!;
    const zero = DIGIT_ZEROS.find((z) => cp >= z && cp <= z + 9);
    if (zero !== undefined) return String(cp - zero);
    // Full-width and mathematical digits, a full-width comma or full stop, are their ASCII selves under NFKC.
    const folded = c.normalize('NFKC');
    return /^[\d.,]$/.test(folded) ? folded : c;
  });
}

function parseDigits(raw: string): number | undefined {
  if (isMinus(raw.charCodeAt(0))) {
    const v = parseDigits(raw.slice(1));
    return v === undefined ? undefined : -v;
  }
  const m = /^(\p{N}+(?:[.,\u00a0\u202f\u2009 ]\p{N}+)*)/u.exec(raw);
  if (!m?.[1]) return undefined;
  let s = m[1].replace(/[\u00a0\u202f\u2009 ]/g, '');
  // "1,234" and "1,234,567" group thousands; "5.68" is a decimal; "3,5" (decimal comma) is rare in English;
  // "1.234.567" (German, two groups or more) groups thousands too. Other dotted runs ("2.3.1") are no number.
  if (/^\d{1,3}(?:,\d{3})+(?:\.\d+)?$/.test(s)) s = s.replace(/,/g, '');
  else if (/^\d{1,3}(?:\.\d{3}){2,}(?:,\d+)?$/.test(s) || /^\d{1,3}(?:\.\d{3})+,\d{1,2}$/.test(s)) s = s.replace(/\./g, '').replace(',', '.');
  else s = s.replace(/,/g, '.');
  const v = Number(s);
  return Number.isFinite(v) ? v : undefined;
}

const HANGUL_RE = /[\uac00-\ud7a3]/;

/**
 * Korean endings of "않다", "없다", "아니다" and "못하다" ("열지 않습니다", "부작용이 없었다", "학생이 아닙니다", "참석하지
 * 못했다"), each read as that negation; any ending of "있다" (exists, has), of the copula, of "하다" and of "되다"
 * standing alone is that word, which carries no claim (`KOREAN_FUNCTION_WORDS`).
 */
const KOREAN_FORMS: readonly [RegExp, string][] = [
  [/^않/, '않다'],
  [/^없/, '없다'],
  [/^아(?:니|닌|닙|님|냐|녜)/, '아니다'],
  [/^못(?:하|했|한|합|함|해)/, '못하다'],
  [/^있(?:다|습니다|는|었다|었습니다|었던|고|어|어요|으며|으나|을|음|지만|던)$/, '있다'],
  [/^(?:이다|입니다|이며|이고|이었다|였다|이었습니다|였습니다|인데|이지만)$/, '이다'],
  [/^(?:하다|합니다|했다|했습니다|한다|하는|하고|하며|해서|하여|했던|해요|할|한)$/, '하다'],
  [/^(?:되다|됩니다|된다|되었다|됐다|되었습니다|되는|되어|돼|된|될)$/, '되다'],
];

/**
 * What Korean glues to a noun or a verb's stem: particles ("서울은", "평택에서", "2023년에"), the copula ("수도이며",
 * "명입니다") and the endings of "하다" and "되다" ("참석했다", "완료됩니다"), longest first. Cut off one after another
 * while a syllable is left (two for a suffix whose first syllable may end a noun, "지하는" is 지하), so "서울은",
 * "서울에서" and "서울" are one word; one syllable only from a word of three or
 * more ("효과" keeps its 과, "효과가" is 효과), but for the object and topic marks, which end almost no noun.
 */
const KOREAN_SUFFIXES = `에서는 에서도 에서의 에게서 에게는 으로는 으로도 으로서 으로써 이라는 이라고 에서 에게 한테 께서 으로 까지 부터
처럼 보다 에는 에도 이나 이며 이고 입니다 이다 였다 이었다 였습니다 이었습니다 했습니다 합니다 했다 한다 하다 하는 하고 하며
해서 하여 했던 됩니다 된다 되었다 됐다 되는 되어`.split(/\s+/);
const KOREAN_ONE_SYLLABLE = new Set(['은', '는', '이', '가', '을', '를', '에', '의', '와', '과', '도', '로', '만', '할', '한', '된', '될']);
const KOREAN_OBJECT_TOPIC = new Set(['은', '는', '을', '를', '에']);
/** Suffixes whose first syllable also ends nouns ("나이", "지하"): cut only from a word that keeps two syllables. */
const NOUN_END_RE = /^[이하]/;

/** A Korean word without what is glued to it (`KOREAN_SUFFIXES`). */
export function koreanStem(word: string): string {
  let w = word;
  for (let cut = 0; cut < 3; cut++) {
    const suffix = KOREAN_SUFFIXES.find((x) => w.length > x.length + (NOUN_END_RE.test(x) ? 1 : 0) && w.endsWith(x));
    if (suffix) {
      w = w.slice(0, -suffix.length);
      continue;
    }
    const last = w[w.length - 1]!;
    if (w.length >= 3 ? KOREAN_ONE_SYLLABLE.has(last) : w.length === 2 && KOREAN_OBJECT_TOPIC.has(last)) w = w.slice(0, -1);
    else break;
  }
  return w;
}

/**
 * A word with Korean in it. Korean puts spaces between words but glues particles and endings to them: the stem is
 * the word without them (`koreanStem`), a negation is read in any of its endings (`KOREAN_FORMS`), and "있다",
 * pronouns and the like are no content words (`KOREAN_FUNCTION_WORDS`).
 */
function readKoreanWord(raw: string): Word {
  const spelled = raw.normalize('NFC').toLowerCase();
  const norm = KOREAN_FORMS.find(([re]) => re.test(spelled))?.[1] ?? spelled;
  const negation = NEGATIONS.has(norm);
  const stemmed = negation ? norm : koreanStem(norm);
  return {
    norm,
    stem: stemmed,
    cap: false,
    value: undefined,
    content: !negation && !KOREAN_FUNCTION_WORDS.has(norm) && !KOREAN_FUNCTION_WORDS.has(stemmed) && !STOPWORDS.has(norm),
    negation,
    quantifier: false,
    numberWord: undefined,
    numberedIn: 0,
    stemKey: 0,
    normKey: 0,
  };
}

// Spellings longer than any word are read afresh each time rather than kept.
const words = new WordTable<Word>(100_000, 40);

/**
 * A string that shares no memory with `s`: a long enough substring points into the text it was cut from
 * and would keep that whole text alive as long as the word table keeps the word.
 */
function copyOf(s: string): string {
  return (' ' + s).slice(1);
}

function readWord(raw: string): Word {
  let ascii = true;
  for (let j = 0; j < raw.length && ascii; j++) ascii = raw.charCodeAt(j) < 128;
  const c = raw.charCodeAt(0);
  if (!ascii && HANGUL_RE.test(raw)) return readKoreanWord(raw);
  const norm = normalizeWord(raw, ascii);
  const digit = (c >= 48 && c <= 57) || isMinus(c) || (c > 127 && NUMERIC_RE.test(raw));
  const value = digit ? parseDigits(ascii ? raw : asciiDigits(raw)) : undefined;
  // A version or an address in dotted digits ("2.3.1", "10.0.0.1", "8.2.4793") is checked as a word; a dotted date
  // ("10.9.2023") never gets here, it is read as its three numbers (`dottedDateEnd`).
  const dotted = value === undefined && DOTTED_RE.test(raw);
  return {
    norm,
    stem: value !== undefined ? String(value) : stem(norm),
    cap: c < 128 ? c >= 65 && c <= 90 : UPPER_RE.test(raw),
    value,
    content: dotted || (value === undefined && !digit && norm.length > 0 && !STOPWORDS.has(norm) && !(OTHER_FUNCTION_WORDS.has(norm) && !SHOUTED_RE.test(raw)) && !META_WORDS.has(norm) && !NEGATIONS.has(norm) && !SYMBOLS.has(norm)),
    negation: NEGATIONS.has(norm),
    quantifier: QUANTIFIERS.has(norm),
    numberWord: NUMBER_WORDS.get(norm),
    numberedIn: 0,
    stemKey: 0,
    normKey: 0,
  };
}

/** Signs that stand for a temperature's scale: read as its letter or name ("℃" is "°C"; the Kelvin sign is not K). */
const SCALE_SIGNS: ReadonlyMap<string, string> = new Map([
  ['\u2103', 'c'],
  ['\u2109', 'f'],
  ['\u212a', 'kelvin'],
]);

function normalizeWord(raw: string, ascii: boolean): string {
  const sign = raw.length === 1 ? SCALE_SIGNS.get(raw) : undefined;
  if (sign) return sign;
  let w = ascii ? raw.toLowerCase() : raw.normalize('NFD').replace(DIACRITICS_RE, '').replace(SOFT_HYPHEN_RE, '').toLowerCase().replace(APOSTROPHES_RE, "'");
  if (!ascii && KANA_VOICING_RE.test(w)) w = w.normalize('NFC');
  if (w.endsWith("'s")) w = w.slice(0, -2);
  else if (w.endsWith("n't")) w = "n't";
  return w;
}

const NUMERIC_RE = /^\p{N}/u;
// Two capitals or more: "DE" in "PX-88231-DE" is a country's code, not French "de".
const SHOUTED_RE = /^\p{Lu}{2,}$/u;
const DOTTED_RE = /^\d+(?:\.\d+){2,}$/;
const LETTER_OR_MARK_RE = /^[\p{L}\p{M}]$/u;
const DIGIT_RE = /^\p{N}$/u;

// Character classes of the scanner: 0 other, 1 letter or combining mark, 2 digit, 3 currency or %.
const OTHER = 0;
const LETTER = 1;
const DIGIT = 2;
const SYMBOL = 3;
const ASCII_CLASS = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122)) ASCII_CLASS[c] = LETTER;
  else if (c >= 48 && c <= 57) ASCII_CLASS[c] = DIGIT;
}
ASCII_CLASS[36] = SYMBOL; // $
ASCII_CLASS[37] = SYMBOL; // %
/** Class + 1 of each non-ASCII UTF-16 unit outside the surrogates, 0 until looked up: a run of Chinese is read unit by unit. */
const bmpClass = new Uint8Array(0x10000);
const wideClass = new Map<number, number>();

/** Class of the code point at `i` (non-ASCII classes are looked up once per code point). */
function classAt(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c < 128) return ASCII_CLASS[c]!;
  const known = bmpClass[c]!;
  if (known !== 0) return known - 1;
  const cp = text.codePointAt(i)!;
  let k = wideClass.get(cp);
  if (k === undefined) {
    const ch = String.fromCodePoint(cp);
    // A soft hyphen (a line-break hint inside a word) is part of the word.
    // The signs ℃ and ℉ are words of one character, as "C" after "°" is one.
    k = LETTER_OR_MARK_RE.test(ch) || cp === 0xad ? LETTER : DIGIT_RE.test(ch) ? DIGIT : cp === 0x20ac || cp === 0xa3 || cp === 0xa5 || cp === 0x2103 || cp === 0x2109 ? SYMBOL : OTHER;
    if (cp === c && (c < 0xd800 || c > 0xdfff)) bmpClass[c] = k + 1;
    else if (wideClass.size < 10_000) wideClass.set(cp, k);
  }
  return k;
}

const widthAt = (text: string, i: number): number => (text.charCodeAt(i) >= 0xd800 && text.charCodeAt(i) <= 0xdbff && i + 1 < text.length ? 2 : 1);

/** End of the run of characters of class `k` starting at `i`. */
function runEnd(text: string, i: number, k: number): number {
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c < 128) {
      if (ASCII_CLASS[c] !== k) break;
      i++;
    } else {
      if (classAt(text, i) !== k) break;
      i += widthAt(text, i);
    }
  }
  return i;
}

const NUMBER_SUFFIXES = ['st', 'nd', 'rd', 'th', 's'];
// Two groups after plain spaces ("1 234 567"), or one before a decimal comma ("1 200,50"): "room 101 202" alone
// is two numbers.
const SPACE_GROUPS_RE = /(?:[\u00a0\u202f\u2009]\d{3}(?!\d))+|(?: \d{3}(?!\d)){2,}| \d{3}(?=,\d{1,2}(?!\d)(?!,\d))/y;

/**
 * Split text into tokens with offsets, sentence indices and numeric values. Tokens are numbers
 * (keeping inner separators, "181,674,817", "5.68", and an ordinal or plural suffix, "2nd", "1990s"),
 * words (keeping inner apostrophes, "Omura's") and the symbols $ € £ ¥ %.
 */
export function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let sentence = 0;
  let sentenceStart = true;
  let prevEnd = 0;
  const n = text.length;
  const csv = new CsvLines(text);
  // The word ends within the run of Chinese or Japanese letters being read (`cjkWords`), none before one is met.
  let cjk: { to: number; cuts: number[]; next: number } | undefined;
  let cjkRuns: Map<number, { to: number; cuts: number[] }> | undefined;
  // Whether the sentence being read has Chinese or Japanese in it yet (`cjkSentenceAfter`).
  let sentenceCjk = false;
  // Inside a date written with dots ("16.08.2021", up to here): read as its day, month and year, as "16/08/2021" is.
  let dateUntil = -1;
  let i = 0;
  while (i < n) {
    const k = classAt(text, i);
    if (k === OTHER) {
      i += widthAt(text, i);
      continue;
    }
    // A minus sign after a space or a bracket is the number's ("from -5 °C"); between numbers it is a range ("6-8").
    const signed = k === DIGIT && i > 0 && isMinus(text.charCodeAt(i - 1)) && (i === 1 || isWhiteSpace(text.charCodeAt(i - 2)) || text.charCodeAt(i - 2) === 40);
    const start = signed ? i - 1 : i;
    // A word of ASCII letters only is packed as it is read (WordTable's key when it has up to 7 of them).
    let packed = -1;
    let cjkRun = false;
    if (k === LETTER && cjk !== undefined && i < cjk.to) {
      cjkRun = true;
      // Inside a run of Chinese or Japanese: its next word.
      while (cjk.cuts[cjk.next]! <= i) cjk.next++;
      i = cjk.cuts[cjk.next]!;
    } else if (k === LETTER) {
      let digits = 0;
      for (; i < n; i++) {
        const c = text.charCodeAt(i);
        if (c >= 128 || ASCII_CLASS[c] !== LETTER) break;
        digits = digits * 128 + c;
      }
      const length = i - start;
      i = runEnd(text, i, LETTER);
      // Inner apostrophes: "Omura's", "don't".
      while (i + 1 < n && isApostrophe(text.charCodeAt(i)) && classAt(text, i + 1) === LETTER) {
        i = runEnd(text, i + 1, LETTER);
      }
      if (i - start === length && length <= 7) packed = packedSpelling(length, digits);
      else if (i - start > length && i - start > 1 && CJK_RE.test(text.slice(start, i)) && !cjkChatter(text.slice(start, i))) {
        // Chinese and Japanese write no spaces: the run is cut into words (`cjkWords`), read one by one. The runs of
        // the rest of the text are cut together the first time (`cjkRunCuts`); a run read otherwise is cut alone.
        cjkRuns ??= cjkRunCuts(text, start);
        const batched = cjkRuns.get(start);
        cjk = { to: i, cuts: batched?.to === i ? batched.cuts : cjkWords(text, start, i), next: 0 };
        i = cjk.cuts[0]!;
        cjkRun = true;
      }
    } else if (k === DIGIT && (i < dateUntil || (dateUntil = dottedDateEnd(text, i)) !== -1)) {
      i = runEnd(text, i, DIGIT);
    } else if (k === DIGIT) {
      const digitsFrom = i;
      i = runEnd(text, i, DIGIT);
      const ascii = ASCII_DIGITS_RE.test(text.slice(digitsFrom, i));
      let read: NumberSoFar = { thousands: ascii && i - digitsFrom <= 3, decimalDots: ascii };
      // Thousands grouped by spaces: "1 234 567", "12\u202f345" (a no-break or thin space also groups one).
      if (i - digitsFrom <= 3) {
        SPACE_GROUPS_RE.lastIndex = i;
        if (SPACE_GROUPS_RE.test(text)) {
          i = SPACE_GROUPS_RE.lastIndex;
          // A decimal comma may follow ("1 234 567,5"); more groups may not.
          read = DECIMAL_ONLY;
        }
      }
      while (i + 1 < n && (text.charCodeAt(i) === 46 || text.charCodeAt(i) === 44) && classAt(text, i + 1) === DIGIT) {
        const end = runEnd(text, i + 1, DIGIT);
        const comma = text.charCodeAt(i) === 44;
        if (comma && (!commaInNumber(text, read, i, end) || (!quoted(text, digitsFrom) && csv.at(i)))) break;
        const group = end - i - 1 === 3 && ASCII_DIGITS_RE.test(text.slice(i + 1, end));
        read = { thousands: read.thousands && comma && group, decimalDots: read.decimalDots && !comma && group };
        i = end;
      }
      // In any case: an answer in capitals writes "1ST", "1990S".
      const after = text.slice(i, i + 2).toLowerCase();
      for (const suffix of NUMBER_SUFFIXES) {
        if (after.startsWith(suffix)) {
          i += suffix.length;
          break;
        }
      }
    } else {
      i += widthAt(text, i);
    }
    let word = packed >= 0 ? words.getPacked(packed, text, start, i) : words.get(text, start, i);
    if (word === undefined) {
      const raw = copyOf(text.slice(start, i));
      word = readWord(raw);
      words.set(raw, word);
    }
    // After an abbreviation a sentence still ends before a capitalised function word: "at 6 p.m. It opens".
    if (
      out.length > 0 &&
      ((sentenceBreak(text, prevEnd, start) && (!abbreviation(text, out[out.length - 1]!, prevEnd) || (word.cap && STOPWORDS.has(word.norm)))) ||
        (cjkRun && !sentenceCjk && cjkSentenceAfter(text, prevEnd, start)))
    ) {
      sentence++;
      sentenceStart = true;
      sentenceCjk = false;
    }
    if (cjkRun) sentenceCjk = true;
    out.push({ start, end: i, sentenceStart, sentence, word });
    sentenceStart = false;
    prevEnd = i;
  }
  return out;
}

const SYMBOLS = new Set(['$', '€', '£', '¥', '%']);

const DOTTED_DATE_AT = /(\d{1,2})\.(\d{1,2})\.([12]\d{3})(?!\d|[.,]\d)/y;

/**
 * Where a date written with dots that starts at `at` ends ("16.08.2021", "1.9.2023": a day and a month, either
 * first, and a year), or -1. Read as one dotted number it would be checked as nothing (no value) or as a version:
 * its parts are read as a date's numbers instead, so another day or year is flagged and "16 August 2021" in a
 * source supports it. Not inside a longer dotted number ("1.16.08.2021").
 */
function dottedDateEnd(text: string, at: number): number {
  // Most numbers are no such date: a dot one or two digits on is what starts one.
  if (text.charCodeAt(at + 1) !== 46 && text.charCodeAt(at + 2) !== 46) return -1;
  const before = at > 0 ? text.charCodeAt(at - 1) : 32;
  if ((before >= 48 && before <= 57) || ((before === 46 || before === 44) && at > 1 && classAt(text, at - 2) === DIGIT)) return -1;
  DOTTED_DATE_AT.lastIndex = at;
  const m = DOTTED_DATE_AT.exec(text);
  if (!m) return -1;
  const [a, b] = [Number(m[1]), Number(m[2])];
  const day = (v: number) => v >= 1 && v <= 31;
  return day(a) && day(b) && (a <= 12 || b <= 12) ? DOTTED_DATE_AT.lastIndex : -1;
}

/**
 * What the digits of a number read so far are, kept group by group: looked at anew at each comma, a number of
 * n groups would be read n times.
 */
interface NumberSoFar {
  /** One to three digits, then ",ddd" groups only: "1", "12,345". */
  thousands: boolean;
  /** Digits, then ".ddd" groups only: "1234", "1.234". */
  decimalDots: boolean;
}

const DECIMAL_ONLY: NumberSoFar = { thousands: false, decimalDots: true };
const ASCII_DIGITS_RE = /^\d+$/;

/**
 * Whether the comma at `comma` (after the number read so far, `before`; up to the next group's end `end`) is
 * inside one number: it groups thousands ("1,234", "12,345,678": three digits after it, and one to three before
 * the first comma), or it is a decimal comma ("3,5", "12,99": the only comma, one or two digits after it).
 * Otherwise the comma separates values, as in a CSV row ("1430,57200").
 */
function commaInNumber(text: string, before: NumberSoFar, comma: number, end: number): boolean {
  const digitsAfter = end - comma - 1;
  const next = end + 1 < text.length && text.charCodeAt(end) === 44 && classAt(text, end + 1) === DIGIT;
  if (digitsAfter === 3 && before.thousands) return true;
  return digitsAfter <= 2 && !next && before.decimalDots;
}

/** Whether the number starting at `from` opens a quoted field (`"1,200"`), whose comma is the number's. */
function quoted(text: string, from: number): boolean {
  return from > 0 && (text.charCodeAt(from - 1) === 34 || text.charCodeAt(from - 1) === 39);
}

/**
 * The lines of a text that are CSV rows, whose commas separate values even between digits ("York,275,119" is
 * York, 275 and 119, not 275,119; "Leeds,312,41" is not 312.41): a line with a comma right after a letter or a
 * quote and right before something other than white space (`York,275`, `"York",275`, `city,units`), or a line
 * with as many commas as the CSV line above it (a header row's `year,units,returns` over `2021,275,119`). Prose
 * puts a space after its commas: "In York, 1,200 people" and "3,5 kg" keep their numbers. Looked at only for a
 * comma that would otherwise join digits, once per line.
 */
class CsvLines {
  private readonly seen = new Map<number, { csv: boolean; commas: number }>();
  constructor(private readonly text: string) {}

  // The line last asked about: a text's numbers are asked about in order, so finding their lines is linear.
  private lineStart = 0;
  private lineEnd = -1;

  at(i: number): boolean {
    if (i < this.lineStart || i > this.lineEnd) {
      this.lineStart = this.text.lastIndexOf('\n', i - 1) + 1;
      const end = this.text.indexOf('\n', i);
      this.lineEnd = end < 0 ? this.text.length : end;
    }
    return this.line(this.lineStart).csv;
  }

  private line(start: number): { csv: boolean; commas: number } {
    const known = this.seen.get(start);
    if (known) return known;
    // The lines up to the first one known, or with a comma after a letter, or with none above it: then down again.
    const chain: number[] = [];
    let at = start;
    let above: { csv: boolean; commas: number } | undefined;
    for (;;) {
      const own = this.seen.get(at);
      if (own) {
        above = own;
        break;
      }
      chain.push(at);
      const { marked, commas } = this.read(at);
      // At 1 the line above is the empty one before the text's first line break: "\n1,200 people" has no table above.
      if (marked || commas === 0 || at <= 1 || this.text.charCodeAt(at - 2) === 10) {
        this.seen.set(at, { csv: marked, commas });
        above = this.seen.get(chain.pop()!);
        break;
      }
      at = this.text.lastIndexOf('\n', at - 2) + 1;
    }
    while (chain.length > 0) {
      const lineStart = chain.pop()!;
      const { marked, commas } = this.read(lineStart);
      const entry = { csv: marked || (above!.csv && commas === above!.commas), commas };
      this.seen.set(lineStart, entry);
      above = entry;
    }
    return above!;
  }

  /** Whether the line at `start` has a comma after a letter or a quote and before no white space; its commas outside quotes. */
  private read(start: number): { marked: boolean; commas: number } {
    const text = this.text;
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    let marked = false;
    let commas = 0;
    let inQuotes = false;
    for (let j = start; j < end; j++) {
      const c = text.charCodeAt(j);
      if (c === 34) inQuotes = !inQuotes;
      else if (c === 44 && !inQuotes) {
        commas++;
        if (!marked && j > start && j + 1 < end) {
          const before = text.charCodeAt(j - 1);
          const after = text.charCodeAt(j + 1);
          marked = (before === 34 || before === 39 || classAt(text, j - 1) === LETTER) && !isWhiteSpace(after);
        }
      }
    }
    return { marked, commas };
  }
}

/** "-" and "−" (U+2212). */
function isMinus(c: number): boolean {
  return c === 45 || c === 0x2212;
}

/** ' ’ and the look-alikes keyboards and converters put between letters ("isn´t", "don′t"). */
function isApostrophe(c: number): boolean {
  return c === 39 || c === 0x2019 || c === 0xb4 || c === 0x2032;
}

/**
 * Does the gap between two tokens end a sentence? A line break does; so does [.!?] (optionally
 * followed by closing quotes, brackets, markdown emphasis or a backtick, "**Done.** Next") followed by whitespace, and
 * "。", "！" or "？" alone.
 */
export function sentenceBreak(text: string, from: number, to: number): boolean {
  let sawEnd = false;
  for (let i = from; i < to; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 10) return !wrappedLine(text, from, to);
    // Chinese and Japanese end a sentence with a full-width mark and no space after it; other scripts' own full
    // stops and question marks end one as surely (`SCRIPT_STOPS`).
    if (ch >= 0x589 && isScriptStop(ch)) return true;
    // Spanish opens a question or an exclamation with "¿" or "¡": after white space, and not after a comma, a colon or
    // a semicolon that embeds it ("Si llueve, ¿vienes?"), one begins, whether or not the sentence before it ended.
    if ((ch === 0xbf || ch === 0xa1) && i > from && isWhiteSpace(text.charCodeAt(i - 1)) && opensSentence(text, from, i)) return true;
    if (ch === 46 || ch === 33 || ch === 63) sawEnd = true;
    else if (ch === 32 || ch === 9 || ch === 13 || ch === 160) {
      if (sawEnd) return true;
    } else if (ch >= 0x2300 && pictographEndsSentence(text, i, to)) return true;
    else if (!(ch === 34 || ch === 39 || ch === 41 || ch === 93 || ch === 0x201d || ch === 0x2019 || ch === 42 || ch === 95 || ch === 96)) sawEnd = false;
  }
  return sawEnd && gluedSentence(text, from, to);
}

/**
 * Whether a run of Chinese or Japanese at `to`, after white space from `from` that follows a sentence with none in
 * it, is a sentence of its own: one that ends with its script's full stop (`SCRIPT_STOPS`) before any other
 * sentence end. A line with no end mark ("Our office is open from Monday to Friday") then a Japanese sentence are
 * two claims, not one read as half supported; "The word 象 means elephant." and "我们使用 Python 编写。" stay one.
 * The scan stops at the first end mark, so each sentence is scanned once.
 */
function cjkSentenceAfter(text: string, from: number, to: number): boolean {
  if (from === to) return false;
  for (let i = from; i < to; i++) if (!isWhiteSpace(text.charCodeAt(i))) return false;
  for (let i = to; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    // A decimal point ("1.5倍") ends nothing.
    if ((ch === 46 && !(text.charCodeAt(i + 1) >= 48 && text.charCodeAt(i + 1) <= 57)) || ch === 33 || ch === 63 || ch === 10) return false;
    if (ch >= 0x589 && isScriptStop(ch)) return true;
  }
  return false;
}

/**
 * Marks that end a sentence in the scripts that have their own, none of which an abbreviation uses: the CJK full
 * stop, exclamation and question marks (。！？, also half-width ｡ and full-width ．), the Devanagari danda and double
 * danda (। ॥, Hindi, Marathi, Nepali, Sanskrit), the Arabic question mark and the Urdu full stop (؟ ۔), the
 * Armenian full stop (։), the Ethiopic full stop (።), the Myanmar section mark (။), the Khmer khan (។) and the
 * Tibetan shad (།). Without them a Hindi sentence ran on into the next one.
 */
const SCRIPT_STOPS = new Set([0x3002, 0xff01, 0xff1f, 0xff61, 0xff0e, 0x964, 0x965, 0x61f, 0x6d4, 0x589, 0x1362, 0x104b, 0x17d4, 0xf0d]);

function isScriptStop(ch: number): boolean {
  return SCRIPT_STOPS.has(ch);
}

/**
 * Whether a sentence's end with no space after it still ends it: paragraphs joined without a space, as scraped
 * or concatenated text has them ("… in the 19th century.First for Women is …", "… on 17 March 2017.It was …").
 * A lower-case letter or a digit before the mark and a capital followed by a lower-case letter after it; not
 * "U.S.A", "e.g.", "Node.js" or "v1.2.Beta".
 */
function gluedSentence(text: string, from: number, to: number): boolean {
  const before = text.charCodeAt(from - 1);
  const first = text.charCodeAt(to);
  const second = text.charCodeAt(to + 1);
  if (!(((before >= 97 && before <= 122) || (before >= 48 && before <= 57)) && first >= 65 && first <= 90 && second >= 97 && second <= 122)) return false;
  // A name in code is no sentence's end: a chain of members ("java.util.List", "System.Text.Json") or a member in
  // camel case ("Console.WriteLine").
  let start = from - 1;
  while (start > 0 && isWordCode(text.charCodeAt(start - 1))) start--;
  const mark = text.charCodeAt(start - 1);
  if (start > 0 && (mark === 46 || mark === 47 || mark === 58)) return false;
  let end = to + 1;
  while (end < text.length && text.charCodeAt(end) >= 97 && text.charCodeAt(end) <= 122) end++;
  const after = text.charCodeAt(end);
  return !((after >= 65 && after <= 90) || after === 40 || (after === 46 && isWordCode(text.charCodeAt(end + 1))));
}

/** An ASCII letter, digit or underscore. */
function isWordCode(ch: number): boolean {
  return (ch >= 97 && ch <= 122) || (ch >= 65 && ch <= 90) || (ch >= 48 && ch <= 57) || ch === 95;
}

const PICTOGRAPH_RE = /^\p{Extended_Pictographic}/u;
const UPPER_START_RE = /^\p{Lu}/u;

/**
 * Whether an emoji at `i` ends a sentence, as chat writes it for a full stop ("Hi there 👋 Hey!"): white space
 * after it and a capital letter at `to`. Before a word in lower case it is part of the sentence ("The café 🍰
 * serves").
 */
function pictographEndsSentence(text: string, i: number, to: number): boolean {
  if (!PICTOGRAPH_RE.test(text.slice(i, i + 2)) || !UPPER_START_RE.test(text.slice(to, to + 2))) return false;
  for (let j = i + 1; j < to; j++) if (isWhiteSpace(text.charCodeAt(j))) return true;
  return false;
}

/**
 * Whether the line break between two tokens only wraps a line (a hard-wrapped paragraph, a PDF's text): one
 * break and white space between a word, number or comma and a word in lower case. A blank line, a list's bullet,
 * a sentence's or a heading's end, or a capital after it still end the sentence.
 */
function wrappedLine(text: string, from: number, to: number): boolean {
  const next = text.charCodeAt(to);
  if (!(next >= 97 && next <= 122)) return false;
  const before = text.charCodeAt(from - 1);
  if (!(before === 44 || (before >= 97 && before <= 122) || (before >= 48 && before <= 57) || (before >= 65 && before <= 90))) return false;
  let breaks = 0;
  for (let i = from; i < to; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 10) breaks++;
    else if (!(ch === 32 || ch === 9 || ch === 13 || ch === 44)) return false;
  }
  if (breaks !== 1) return false;
  // A heading's line ends with it ("## Hekla" then a list).
  const lineStart = text.lastIndexOf('\n', from - 1) + 1;
  return !/^[ \t]{0,3}#/.test(text.slice(lineStart, lineStart + 4));
}

// Words after which a full stop rarely ends a sentence ("Dr. Smith", "the U.S. market", "1 tsp. salt").
const ABBREVIATIONS = new Set(
  `mr mrs ms dr prof sr jr st mt ft vs etc inc ltd co corp dept est approx fig no vol pp ed eds gen gov sen rep
rev col lt sgt capt cmdr jan feb mar apr jun jul aug sep sept oct nov dec tsp tbsp oz lb lbs min max cf al
e.g i.e a.m p.m u.s u.k u.n d.c`.split(/\s+/),
);

/** A month's name in German (or English: "1. January"), after the white space that follows an ordinal's full stop. */
const ORDINAL_MONTH_RE = /^[ \t\u00a0]+(?:Januar|Jänner|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember|January|February|March|May|June|July|October|December)\b/;

/** Is the full stop after `prev` part of an abbreviation or an initial ("J. K. Rowling") rather than a sentence end? */
function abbreviation(text: string, prev: Token, gapStart: number): boolean {
  if (text.charCodeAt(gapStart) !== 46 || prev.end - prev.start > 6) return false;
  // A German or Danish ordinal day before its month: "zum 1. Januar", "am 3. Oktober".
  if (prev.word.value !== undefined && prev.end - prev.start <= 2 && ORDINAL_MONTH_RE.test(text.slice(gapStart + 1, gapStart + 16))) return true;
  // A single capital letter: an initial; not a unit's after a degree sign or a number ("20 °C.", "20C.", "5 K.").
  if (prev.end - prev.start === 1 && unitLetter(text, prev.start)) return false;
  if (prev.end - prev.start === 1 && text.charCodeAt(prev.start) >= 65 && text.charCodeAt(prev.start) <= 90) return true;
  // "U.S." is read as "U", ".", "S", ".": look back over single letters joined by full stops.
  let from = prev.start;
  while (from >= 2 && text.charCodeAt(from - 1) === 46 && /\p{L}/u.test(text[from - 2]!) && (from < 3 || !/\p{L}/u.test(text[from - 3]!))) from -= 2;
  const word = text.slice(from, prev.end).toLowerCase();
  return ABBREVIATIONS.has(word) || (prev.end - prev.start === 1 && /\p{Lu}/u.test(text[prev.start]!));
}

/** Whether the white space before `at` in the gap from `from` follows no comma, colon or semicolon. */
function opensSentence(text: string, from: number, at: number): boolean {
  let j = at - 1;
  while (j >= from && isWhiteSpace(text.charCodeAt(j))) j--;
  const c = j >= from ? text.charCodeAt(j) : -1;
  return !(c === 44 || c === 58 || c === 59 || c === 0xff0c || c === 0xff1a || c === 0xff1b || c === 0x3001);
}

/** Whether the letter at `at` follows a degree sign or a number, with a space between at most: a unit's symbol. */
function unitLetter(text: string, at: number): boolean {
  let i = at - 1;
  if (i >= 0 && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 160)) i--;
  const c = text.charCodeAt(i);
  return c === 0xb0 || (c >= 48 && c <= 57);
}

/** `/\s/` for one UTF-16 code unit. */
export function isWhiteSpace(c: number): boolean {
  if (c < 128) return c === 32 || (c >= 9 && c <= 13);
  return c === 0xa0 || (c >= 0x1680 && WIDE_SPACE_RE.test(String.fromCharCode(c)));
}

const WIDE_SPACE_RE = /\s/;

/**
 * The numeric values a number mention can stand for: "160 million" → 160 and 160,000,000;
 * "two dozen" → 24; "1,200" → 1200. `i` is the index of the number's first token; returns
 * the values and the index after the mention.
 */
/** Digits, a full stop and three digits: "1.200", "3.500". */
const ONE_DOT_GROUP_RE = /^-?\d{1,3}\.\d{3}$/;

/** Scale words that are nothing else: a number before them is never the count alone. */
const WORD_SCALES = new Set(['thousand', 'million', 'billion', 'trillion', 'mn', 'bn']);
const DEGREES = new Set(['degree', 'degrees', 'deg']);
const TEMPERATURE_SCALES = new Set(['c', 'f', 'kelvin']);

export function readNumber(tokens: readonly Token[], i: number, claim = false): { values: number[]; next: number } | undefined {
  const t = tokens[i];
  if (!t) return undefined;
  let base: number | undefined = t.word.value;
  let next = i + 1;
  if (base === undefined) {
    const w = t.word.numberWord;
    if (w === undefined || t.word.norm === 'one' || t.word.norm === 'single' || t.word.norm === 'half') return undefined;
    base = w;
    // "twenty five", "two dozen", "three hundred"
    const n1 = tokens[next];
    if (n1 && n1.start - t.end <= 1 && n1.sentence === t.sentence) {
      const w1 = n1.word.numberWord;
      if (w1 !== undefined && w1 < 10 && base >= 20 && base < 100) { base += w1; next++; }
    }
  }
  if (MONTHS.has(t.word.norm)) return undefined;
  const values = [base];
  // "1.200" is 1.2 in English and 1200 in German (thousands grouped by a dot): either may be meant. Not before a
  // unit converted by its decimals ("10.000 KB" is converted as written).
  if (t.word.value !== undefined && ONE_DOT_GROUP_RE.test(t.word.norm) && !UNITS.has(tokens[next]?.word.norm ?? '')) values.push(Number((base * 1000).toPrecision(12)));
  const s = tokens[next];
  // A number and its scale are one sentence's words: "0\nb" is a number, then a sentence of its own.
  if (s && s.start - (tokens[next - 1]?.end ?? 0) <= 1 && s.sentence === t.sentence) {
    const scale = SCALE_WORDS.get(s.word.norm);
    if (scale !== undefined) {
      // A claim's "2.1 billion" is 2.1e9 alone: were it also 2.1, a source's "2.1 million" (also 2.1) would back it.
      // "k", "m" and "b" may be units ("850 m" of height), and "three hundred" and "two dozen" keep their count.
      if (claim && WORD_SCALES.has(s.word.norm)) values.length = 0;
      values.push(base * scale);
      next++;
    }
  }
  // A claim's share in percent may restate a fraction of one: "72%" is the 0.72 a tool's JSON holds (and a source's
  // "72%" is also 0.72 in the source index, as a JSON answer's "rate": 0.72 writes it).
  const percent = tokens[next];
  if (claim && percent && percent.sentence === t.sentence && percent.start - (tokens[next - 1]?.end ?? 0) <= 1 && (percent.word.norm === '%' || percent.word.norm === 'percent')) {
    values.push(base / 100);
  }
  // "21 degrees Celsius" is "21 °C": the scale's name is checked (`SYNONYMS`: Celsius is C), "degrees" spells the sign.
  const unit = tokens[next];
  if (unit && DEGREES.has(unit.word.norm) && unit.sentence === t.sentence && TEMPERATURE_SCALES.has(tokens[next + 1]?.word.stem ?? '')) next++;
  return { values, next };
}

/**
 * A duration written in two units or more, each smaller than the one before: "2 hours 45 minutes", "2 h 45" (minutes
 * after hours may go unnamed), "1 hour and 30 minutes", "3 min 20 s", "2h45m". Its length in seconds and the token
 * after it; undefined for one unit alone ("165 minutes": a number with its unit, `numberUnit`).
 */
export function readDuration(tokens: readonly Token[], i: number): { seconds: number; next: number } | undefined {
  const sentence = tokens[i]!.sentence;
  let seconds = 0;
  let parts = 0;
  let last = Infinity;
  let next = i;
  for (let j = i; ; ) {
    const n = tokens[j];
    const value = n?.word.value;
    if (!n || n.sentence !== sentence || value === undefined || value < 0) break;
    const u = tokens[j + 1];
    const unit = u && u.sentence === sentence && u.start - n.end <= 1 ? UNITS.get(u.word.norm) : undefined;
    if (unit?.kind !== 'time' || unit.size >= last) {
      // "2 h 45": the minutes after hours, unnamed.
      if (!unit && parts > 0 && last === 3600 && Number.isInteger(value) && value < 60) {
        seconds += value * 60;
        parts++;
        next = j + 1;
      }
      break;
    }
    seconds += value * unit.size;
    last = unit.size;
    parts++;
    next = j + 2;
    j = tokens[next]?.word.norm === 'and' ? next + 1 : next;
  }
  return parts >= 2 ? { seconds, next } : undefined;
}

/**
 * The numbers a duration of `seconds` is written as: in seconds, in minutes when whole, in hours from one hour, in
 * days from one day.
 */
export function durationValues(seconds: number): { value: number; unit: string }[] {
  const out = [{ value: seconds, unit: 'second' }];
  if (seconds % 60 === 0) out.push({ value: seconds / 60, unit: 'minute' });
  if (seconds >= 3_600) out.push({ value: Number((seconds / 3_600).toPrecision(12)), unit: 'hour' });
  if (seconds >= 86_400) out.push({ value: Number((seconds / 86_400).toPrecision(12)), unit: 'day' });
  return out;
}

/**
 * Whether token `i` has a number beside it in its sentence, one word between allowed: "$12", "12 dollars", "USD 12",
 * "12 US dollars", "twelve million euros".
 */
export function besideNumber(tokens: readonly Token[], i: number): boolean {
  const t = tokens[i]!;
  for (const j of [i - 2, i - 1, i + 1, i + 2]) {
    const n = tokens[j];
    if (n && n.sentence === t.sentence && (n.word.value !== undefined || n.word.numberWord !== undefined || SCALE_WORDS.has(n.word.norm))) return true;
  }
  return false;
}

/**
 * Content words a negation that follows what it negates reaches back to: a Japanese ending's verb and its object or
 * topic ("営業 しま せん"), a clause-final "nicht"'s verb and object ("kennt den Mann nicht").
 */
const BACK_REACH = 2;

/** Function words a negation reaches across to the word it negates ("is not the closest": one). */
export const NEGATION_REACH = 3;

/**
 * Scripts written without spaces between words: Chinese and Japanese, and Thai, Lao, Khmer and Burmese, whose runs
 * are whole phrases ("กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย" is one run of six words). ICU cuts each by its own
 * dictionary, whatever the segmenter's locale, so they are read as Chinese is; the names below say CJK for short.
 */
const CJK_RE = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;

/**
 * Whether `text` has Chinese, Japanese, Thai, Lao, Khmer or Burmese in it: such text is read with ICU's word
 * segmentation (`cjkRunCuts`, `cjkWords`), ~0.6 µs a character.
 */
export function hasCjk(text: string): boolean {
  return CJK_RE.test(text);
}
const NEGATION_PREFIX_RE = /^[不没沒未][\p{Script=Han}]/u;

/**
 * What fills the room a decoded escape of a JSON answer does not need (`jsonValuesText`): U+034F (combining grapheme
 * joiner), a mark that the reading of words drops (`Word.norm` strips marks; Chinese and Japanese runs are cut as if
 * it were not there), so `Z\u00fcrich` reads as the one word "Zürich" and keeps its six characters.
 */
export const ESCAPE_FILLER = '\u034f';
const FILLER = ESCAPE_FILLER;
const KANA_RE = /[\p{Script=Hiragana}\p{Script=Katakana}]/u;
let zhWords: Intl.Segmenter | undefined;
let jaWords: Intl.Segmenter | undefined;

/**
 * Runs up to this long go to ICU whole. ICU's dictionary segmentation takes time that grows with the square of a
 * run's length: a run of Chinese, Japanese or Thai with no punctuation (a hostile prompt, a transcript, a scraped
 * page) of 40,000 characters took 0.5–1.9 s, one of 160,000 took 11–65 s of a grounding worker. A longer run is cut
 * window by window.
 */
const SEGMENT_WHOLE_CHARS = 1024;
/** A long run's window, and the part of its end whose words the next window reads again (ICU looks ahead). */
const SEGMENT_WINDOW_CHARS = 512;
const SEGMENT_WINDOW_OVERLAP = 64;

/**
 * `segmenter.segment(text)`'s segments (index and text), in time linear in the text's length: a text longer than
 * SEGMENT_WHOLE_CHARS is segmented a window at a time, each window's words that start in its last
 * SEGMENT_WINDOW_OVERLAP characters left to the next window, which starts at the first of them. A window that ICU
 * leaves whole is cut at its end (never inside a surrogate pair).
 */
export function segmentLinear(segmenter: Intl.Segmenter, text: string): Iterable<{ index: number; segment: string }> {
  // A short run, which is nearly every one, is ICU's own iterator: no generator step per word on this hot path.
  return text.length <= SEGMENT_WHOLE_CHARS ? segmenter.segment(text) : segmentWindows(segmenter, text);
}

function* segmentWindows(segmenter: Intl.Segmenter, text: string): Generator<{ index: number; segment: string }> {
  for (let from = 0; from < text.length; ) {
    let to = Math.min(text.length, from + SEGMENT_WINDOW_CHARS);
    if (to < text.length && isHighSurrogate(text.charCodeAt(to - 1))) to--;
    const last = to === text.length;
    let next = to;
    for (const s of segmenter.segment(text.slice(from, to))) {
      if (!last && s.index > 0 && s.index >= to - from - SEGMENT_WINDOW_OVERLAP) {
        next = from + s.index;
        break;
      }
      yield { index: from + s.index, segment: s.segment };
    }
    from = next;
  }
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

/**
 * The ends of the words of `text[from, to)`, a run of letters with Chinese or Japanese in it, in order (the last
 * is `to`): ICU's word segmentation (`Intl.Segmenter`, Japanese when the run has kana, else Chinese), made the
 * first time a text has such a run. "上海是中国最大的城市" is 上海 是 中国 最大 的 城市, so a changed place name is one
 * changed word, not a changed run.
 */
export function cjkWords(text: string, from: number, to: number): number[] {
  let run = text.slice(from, to);
  // A JSON answer's decoded escapes are padded with a mark (`ESCAPE_FILLER`) that would cut every character
  // apart: the run is segmented without it, each cut moved to the character it stands before.
  let at: number[] | undefined;
  if (run.includes(FILLER)) {
    at = [];
    for (let i = 0; i < run.length; i++) if (run[i] !== FILLER) at.push(i);
    run = run.replaceAll(FILLER, '');
  }
  const segmenter = KANA_RE.test(run)
    ? (jaWords ??= new Intl.Segmenter('ja', { granularity: 'word' }))
    : (zhWords ??= new Intl.Segmenter('zh', { granularity: 'word' }));
  const cuts: number[] = [];
  for (const s of segmentLinear(segmenter, run)) {
    if (s.index > 0) cuts.push(from + (at ? at[s.index]! : s.index));
    // A negation glued to its verb ("没读", "不是") is read as the negation and the verb.
    if (s.segment.length >= 2 && NEGATION_PREFIX_RE.test(s.segment) && !NOT_NEGATED_CJK.has(s.segment) && !NEGATIONS.has(s.segment)) {
      cuts.push(from + (at ? at[s.index + 1]! : s.index + 1));
    }
  }
  cuts.push(to);
  return cuts;
}

/**
 * Characters of Chinese or Japanese runs cut by one call of ICU's segmentation in `cjkRunCuts`. Each call costs ~7 µs
 * before its first word (more than a run of 5–10 characters costs to cut), and a call on a long text costs more a
 * character the longer it is: 100 KB of Chinese, 11,000 runs, took 87 ms cut run by run and ~45 ms in calls of
 * 128–256 characters.
 */
const CJK_BATCH_CHARS = 200;

/**
 * The words of the runs of Chinese or Japanese letters in `text` from `from` on, by the run's start: its end and its
 * word ends as `cjkWords` gives them. Runs are cut several at a time, joined by line breaks (ICU always breaks
 * before and after one, and reads a run of Han or kana to its ends alone), Japanese and Chinese apart. A run with
 * `ESCAPE_FILLER` in it is left to `cjkWords`, as is any run `tokenize` reads otherwise than this scan does (one
 * glued to a number's suffix, "5s上海"). A run written again is cut once, its words copied to the other places: a fifth
 * of the characters of 100 KB of Chinese prose are in runs written before ("的", "类型", "文件"), more in Japanese.
 */
function cjkRunCuts(text: string, from: number): Map<number, { to: number; cuts: number[] }> {
  const ja: [number, number][] = [];
  const zh: [number, number][] = [];
  /** Each run's first start; and the starts of runs written before, each with the start of its first time. */
  const firsts = new Map<string, number>();
  const repeats: number[] = [];
  const n = text.length;
  for (let i = from; i < n; ) {
    if (classAt(text, i) !== LETTER) {
      i += widthAt(text, i);
      continue;
    }
    const start = i;
    i = runEnd(text, i, LETTER);
    while (i + 1 < n && isApostrophe(text.charCodeAt(i)) && classAt(text, i + 1) === LETTER) i = runEnd(text, i + 1, LETTER);
    if (i - start < 2) continue;
    const run = text.slice(start, i);
    if (!CJK_RE.test(run) || run.includes(FILLER) || cjkChatter(run)) continue;
    // A run written before is cut as it was (a run is cut as alone): only its first time goes to ICU.
    const first = firsts.get(run);
    if (first !== undefined) {
      repeats.push(start, first);
      continue;
    }
    firsts.set(run, start);
    (KANA_RE.test(run) ? ja : zh).push([start, i]);
  }
  const out = new Map<number, { to: number; cuts: number[] }>();
  for (const [runs, segmenter] of [
    [ja, ja.length > 0 ? (jaWords ??= new Intl.Segmenter('ja', { granularity: 'word' })) : undefined],
    [zh, zh.length > 0 ? (zhWords ??= new Intl.Segmenter('zh', { granularity: 'word' })) : undefined],
  ] as const) {
    for (let r = 0; r < runs.length; ) {
      // Runs r..last, joined by line breaks, each at its offset in the chunk.
      let last = r;
      let chunk = text.slice(runs[r]![0], runs[r]![1]);
      while (last + 1 < runs.length && chunk.length + runs[last + 1]![1] - runs[last + 1]![0] < CJK_BATCH_CHARS) {
        last++;
        chunk += '\n' + text.slice(runs[last]![0], runs[last]![1]);
      }
      let j = r;
      let offset = 0;
      let cuts: number[] = [];
      for (const s of segmentLinear(segmenter!, chunk)) {
        if (chunk.charCodeAt(s.index) === 10) continue;
        while (s.index >= offset + runs[j]![1] - runs[j]![0]) {
          cuts.push(runs[j]![1]);
          out.set(runs[j]![0], { to: runs[j]![1], cuts });
          offset += runs[j]![1] - runs[j]![0] + 1;
          j++;
          cuts = [];
        }
        const at = runs[j]![0] + s.index - offset;
        if (s.index > offset) cuts.push(at);
        if (s.segment.length >= 2 && NEGATION_PREFIX_RE.test(s.segment) && !NOT_NEGATED_CJK.has(s.segment) && !NEGATIONS.has(s.segment)) cuts.push(at + 1);
      }
      cuts.push(runs[j]![1]);
      out.set(runs[j]![0], { to: runs[j]![1], cuts });
      r = last + 1;
    }
  }
  for (let k = 0; k < repeats.length; k += 2) {
    const start = repeats[k]!;
    const first = out.get(repeats[k + 1]!)!;
    const shift = start - repeats[k + 1]!;
    out.set(start, { to: first.to + shift, cuts: first.cuts.map((c) => c + shift) });
  }
  return out;
}

/** A greeting or acknowledgement written as one run ("かしこまりました"): read whole, as `CHATTER_WORDS` spells it. */
function cjkChatter(run: string): boolean {
  if (run.length > 12) return false;
  // Han and kana are their own spelling (`normalizeWord` decomposes a voiced kana and composes it again): most runs are
  // looked up as they are, not normalised first.
  return CHATTER_WORDS.has(HAN_KANA_RE.test(run) ? run : normalizeWord(run, false));
}

const HAN_KANA_RE = /^[\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff]+$/;

const CJK_NAME_RE = /^[\p{Script=Han}\p{Script=Katakana}ー]{2,}$/u;

/**
 * Whether a word is Chinese or Japanese of two characters or more in Han or katakana alone ("上海", "北京",
 * "トヨタ"): checked as a name is, as the script has no capitals to tell one; particles and one-character words
 * ("是", "的", "は") are not.
 */
export function cjkName(norm: string): boolean {
  return norm.length >= 2 && norm.charCodeAt(0) >= 0x2e80 && CJK_NAME_RE.test(norm);
}

/**
 * Whether token `i` negates: a negation word, but not the abbreviation "No." before a number ("World No. 1",
 * "No. 5 Squadron"), nor a "no" that ends its sentence after other words ("… a former World No." where a
 * sentence split cut the number off).
 */
export function isNegation(tokens: readonly Token[], i: number): boolean {
  const t = tokens[i]!;
  // Japanese "なかった" as ICU cuts it: なか, っ, た.
  if (!t.word.negation) return t.word.norm === 'なか' && tokens[i + 1]?.word.norm === 'っ';
  if (t.word.norm !== 'no') return true;
  const next = tokens[i + 1];
  if (next === undefined || next.sentence !== t.sentence) return t.sentenceStart;
  return next.word.value === undefined;
}

/**
 * What the negations of one sentence (of a source, or of a claim) reach: the first content word within
 * NEGATION_REACH other words after each ("not approved", "No injuries"), and the content words stated plainly
 * elsewhere in it ("No injuries were reported, and the fire was contained": contained). The source index and
 * the claims read negation the same way, so a copied sentence agrees with itself.
 */
export class NegationScope {
  negated = false;
  // Words are listed as read and made sets only for a sentence with a negation: most have none, and an index
  // of a long source reads thousands of sentences.
  private readonly scopeWords: string[] = [];
  private readonly plainWords: string[] = [];
  /** Words the last negation may still reach across; -1 when none is pending. */
  private reach = -1;
  /**
   * A clause-final negation's place among the plain words (`CLAUSE_FINAL_NEGATIONS`) while it has reached no word
   * after it; -1 when none is pending.
   */
  private dangling = -1;

  /** Reads token `i` of `tokens`. */
  read(tokens: readonly Token[], i: number): void {
    const w = tokens[i]!.word;
    if (isNegation(tokens, i)) {
      this.negated = true;
      if (BACK_NEGATIONS.has(w.norm) || w.norm === 'なか') {
        this.reachBack(this.plainWords.length);
        this.reach = -1;
        return;
      }
      this.reach = NEGATION_REACH;
      if (CLAUSE_FINAL_NEGATIONS.has(w.norm)) this.dangling = this.plainWords.length;
    } else if (w.content && !OTHER_FUNCTION_WORDS.has(w.norm)) {
      // A German, French or Spanish function word in capitals ("FÜR") is a term but reaches no further.
      if (this.reach >= 0) {
        this.scopeWords.push(w.stem);
        this.dangling = -1;
      } else this.plainWords.push(w.stem);
      this.reach = -1;
    } else if (this.reach >= 0) this.reach--;
  }

  /** Moves the BACK_REACH content words before plain word `upTo` into the negation's reach. */
  private reachBack(upTo: number): void {
    const from = Math.max(0, upTo - BACK_REACH);
    this.scopeWords.push(...this.plainWords.splice(from, upTo - from));
  }

  /** A clause-final negation that reached nothing after it negates the words before it. */
  private settle(): void {
    if (this.dangling < 0) return;
    this.reachBack(this.dangling);
    this.dangling = -1;
  }

  /** The stems the negations reach (empty without a negation). */
  scope(): Set<string> {
    this.settle();
    return this.negated ? new Set(this.scopeWords) : NO_WORDS;
  }

  /** The stems stated outside any negation's reach. */
  plain(): Set<string> {
    this.settle();
    return new Set(this.plainWords);
  }

  /** Ready for the next sentence. */
  reset(): void {
    this.negated = false;
    this.scopeWords.length = 0;
    this.plainWords.length = 0;
    this.reach = -1;
    this.dangling = -1;
  }
}

const NO_WORDS: Set<string> = new Set();

const CAPITALS = /^\p{Lu}{2,}$/u;

/** Whether token `t` of `text` is written in capitals, two letters or more and at most `maxLength` ("US", "WHO"). */
export function inCapitals(text: string, t: Token, maxLength = Infinity): boolean {
  if (t.end - t.start > maxLength) return false;
  // Most words asked about are capitalised function words ("The", "In"): ASCII is told apart without a regex.
  for (let i = t.start; i < t.end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128) return CAPITALS.test(text.slice(t.start, t.end));
    if (c < 65 || c > 90) return false;
  }
  return t.end - t.start >= 2;
}

/** The longest acronym read as a name when its letters spell a function word ("US", "WHO", "IN"). */
export const MAX_ACRONYM = 5;

/** A time of day in a text (`readTime`). */
export interface TimeOfDay {
  /** The hours on a 24-hour clock it can be: "6 p.m." 18; "9:15" 9 (a 24-hour clock's); in a claim also 21. */
  hours: number[];
  /** The token after the time (its minutes, seconds and "am"/"pm" included). */
  next: number;
  /** The minutes when they are not ":00" ("2:30 pm": 30), still a number to check. */
  minutes?: Token;
  /** The seconds when they are not ":00" ("17:25:35": 35), as much a number to check as the minutes. */
  seconds?: Token;
  /** The meridiem written ("am", "a.m.", "PM"), or undefined. */
  meridiem?: 'am' | 'pm';
}

/**
 * The time of day whose hour is token `i`: an hour of one or two digits before "am"/"pm" ("9am", "6 p.m.", "9 AM")
 * or before ":" and two digits of minutes ("09:00", "18:00", "2:30 pm"). The morning is not the evening, so a
 * claim's "9 p.m." is 21 and not 9. A claim's "9:15" with no meridiem may be either (`claim`); a source's is 9.
 */
export function readTime(text: string, tokens: readonly Token[], i: number, claim = false): TimeOfDay | undefined {
  const t = tokens[i]!;
  const h = t.word.value;
  if (h === undefined || !Number.isInteger(h) || h < 0 || h > 23 || t.end - t.start > 2 || !ASCII_DIGITS_RE.test(text.slice(t.start, t.end))) return undefined;
  // Minutes are no hour: "10:05 am" is 10.
  if (text.charCodeAt(t.start - 1) === 58) return undefined;
  let j = i + 1;
  let minutes: Token | undefined;
  let seconds: Token | undefined;
  const m = tokens[j];
  if (text.charCodeAt(t.end) === 58 && m && m.start === t.end + 1 && m.end - m.start === 2 && m.word.value !== undefined && m.word.value < 60) {
    if (m.word.value !== 0) minutes = m;
    j++;
    const s = tokens[j];
    if (s && s.start === m.end + 1 && text.charCodeAt(m.end) === 58 && s.end - s.start === 2 && s.word.value !== undefined && s.word.value < 60) {
      if (s.word.value !== 0) seconds = s;
      j++;
    }
  }
  const clock = j > i + 1;
  const mark = tokens[j];
  let meridiem: 'am' | 'pm' | undefined;
  if (mark && mark.sentence === t.sentence && mark.start - tokens[j - 1]!.end <= 1) {
    const norm = mark.word.norm;
    if (norm === 'am' || norm === 'pm') {
      meridiem = norm;
      j++;
    } else if ((norm === 'a' || norm === 'p') && text.charCodeAt(mark.end) === 46 && tokens[j + 1]?.start === mark.end + 1 && tokens[j + 1]!.word.norm === 'm') {
      meridiem = norm === 'a' ? 'am' : 'pm';
      j += 2;
    }
  }
  if (meridiem) {
    if (h < 1 || h > 12) return undefined;
    return { hours: [(h % 12) + (meridiem === 'pm' ? 12 : 0)], next: j, minutes, seconds, meridiem };
  }
  if (!clock) return undefined;
  // "9:15" may be the evening's when the answer writes the hours of a day in 12; "09:15" and "21:15" are not.
  const either = claim && h >= 1 && h < 12 && text.charCodeAt(t.start) !== 48;
  return { hours: either ? [h, h + 12] : [h], next: j, minutes, seconds };
}

/** How an hour of the day (0–23) a time names is kept among a sentence's keys: apart from the bare number. */
export function hourKey(hour: number): string {
  return `#hour${hour}`;
}
