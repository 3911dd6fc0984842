import { CURRENCIES, MONTHS, NEGATIONS, ORDINAL_WORDS, QUANTIFIERS, WEEKDAYS } from './lexicon.js';
import { jsonEscapesRead } from './json-answer.js';
import { findLinks } from './links.js';
import { durationValues, hourKey, inCapitals, isNegation, isWhiteSpace, MAX_ACRONYM, NegationScope, readDuration, readNumber, readTime, stem, tokenize, type Token, type Word } from './tokenize.js';

/** Characters of a stem that count as a related-word match ("production" ~ "produced"). */
export const PREFIX_LEN = 6;

/** What the check asks of a set of values: membership only. */
export interface Lookup<T> {
  has(value: T): boolean;
}

/**
 * Everything the check needs to know about the sources, built once per check in linear time, or put together
 * from the indexes of the single texts (`mergeSourceIndexes`). Read-only once built.
 *
 * A sentence holds keys: its content stems, the names and acronyms found in it, its numbers' keys
 * (`numberKey`), and its negation and quantifier words. A key's posting lists the sentences holding it, all but
 * for the negation and quantifier words, which a sentence holds without being in their posting
 * (`heldWithoutPosting`).
 */
export interface SourceIndex {
  stems: Lookup<string>;
  prefixes: Lookup<string>;
  numbers: Lookup<number>;
  /** Sorted, without repeats, for tolerance look-ups of rounded numbers. */
  numberList: readonly number[];
  acronyms: Lookup<string>;
  /** Whether `second` follows `first` among a sentence's content stems (function words skipped). */
  hasBigram(first: string, second: string): boolean;
  /** Sentences in the posting of `key` (0 when it has none). */
  postingSize(key: string): number;
  /**
   * Copies the posting of `key` into `into`, as many sentence numbers as fit, in the order the sentences were
   * read (ascending but for an acronym read to the end of its run, which goes to the sentence before); returns
   * the posting's size, as `postingSize`.
   */
  readPosting(key: string, into: Int32Array): number;
  /** Whether sentence `sid` holds `key`. */
  holds(sid: number, key: string): boolean;
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
  /**
   * A row of a Markdown table: a record of its own, never one passage with the row after it — unless it is the
   * header (`'header'`), whose column names read with the first row.
   */
  row?: 'header' | 'body';
}

/** Whether a sentence can hold `key` without being in its posting: a negation or quantifier word. */
export function heldWithoutPosting(key: string): boolean {
  return NEGATIONS.has(key) || QUANTIFIERS.has(key);
}

/** Flags of a key. */
const STEM = 1;
const ACRONYM = 2;

/** The keys that have a flag. */
class FlaggedKeys implements Lookup<string> {
  constructor(
    private readonly ids: ReadonlyMap<string, number>,
    private readonly flags: Uint8Array,
    private readonly flag: number,
  ) {}

  has(key: string): boolean {
    const id = this.ids.get(key);
    return id !== undefined && (this.flags[id]! & this.flag) !== 0;
  }
}

/**
 * A `SourceIndex` as `buildSourceIndex` makes it. Keys are numbered in the order first read; what sentences
 * hold, the postings and the word pairs are flat lists of numbers, one run per sentence or key, rather than a
 * set per sentence and a list per key: a long source has thousands of each, and every one was an allocation
 * to make, to collect and, in a cached index, to keep.
 */
export class BuiltSourceIndex implements SourceIndex {
  readonly stems: Lookup<string>;
  readonly acronyms: Lookup<string>;

  constructor(
    /** Key → its number. */
    readonly ids: ReadonlyMap<string, number>,
    flags: Uint8Array,
    readonly prefixes: ReadonlySet<string>,
    readonly numbers: ReadonlySet<number>,
    readonly numberList: readonly number[],
    /** The keys sentence `sid` holds: `sentenceKeys[sentenceStarts[sid], sentenceStarts[sid + 1])`. */
    private readonly sentenceStarts: Int32Array,
    private readonly sentenceKeys: Int32Array,
    /** The posting of key `id`: `postingSentences[postingStarts[id], postingStarts[id + 1])`. */
    private readonly postingStarts: Int32Array,
    private readonly postingSentences: Int32Array,
    /** The stems that follow stem `id`: `bigramSeconds[bigramStarts[id], bigramStarts[id + 1])`. */
    private readonly bigramStarts: Int32Array,
    private readonly bigramSeconds: Int32Array,
    readonly negatedSentences: ReadonlyMap<number, NegatedSentence>,
    readonly spans: readonly SentenceSpan[],
    readonly texts: number,
    readonly empty: boolean,
  ) {
    this.stems = new FlaggedKeys(ids, flags, STEM);
    this.acronyms = new FlaggedKeys(ids, flags, ACRONYM);
  }

  hasBigram(first: string, second: string): boolean {
    const a = this.ids.get(first);
    const b = this.ids.get(second);
    if (a === undefined || b === undefined) return false;
    for (let i = this.bigramStarts[a]!, end = this.bigramStarts[a + 1]!; i < end; i++) if (this.bigramSeconds[i] === b) return true;
    return false;
  }

  postingSize(key: string): number {
    const id = this.ids.get(key);
    return id === undefined ? 0 : this.postingStarts[id + 1]! - this.postingStarts[id]!;
  }

  /** `SourceIndex.readPosting`, into `into` from index `at` on. */
  readPosting(key: string, into: Int32Array, at = 0): number {
    const id = this.ids.get(key);
    if (id === undefined) return 0;
    const from = this.postingStarts[id]!;
    const size = this.postingStarts[id + 1]! - from;
    const n = Math.min(size, into.length - at);
    for (let i = 0; i < n; i++) into[at + i] = this.postingSentences[from + i]!;
    return size;
  }

  holds(sid: number, key: string): boolean {
    const id = this.ids.get(key);
    if (id === undefined) return false;
    for (let i = this.sentenceStarts[sid]!, end = this.sentenceStarts[sid + 1]!; i < end; i++) if (this.sentenceKeys[i] === id) return true;
    return false;
  }
}

export function buildSourceIndex(sources: readonly string[]): BuiltSourceIndex {
  const builder = new IndexBuilder();
  for (let k = 0; k < sources.length; k++) {
    const source = sources[k]!;
    if (source && /[\p{L}\p{N}]/u.test(source)) builder.read(source, k);
  }
  return builder.finish(sources.length);
}

/** Builds so far: a word numbered in another build is numbered again (`Word.numberedIn`). */
let builds = 0;

/** Reads the texts of a source list one by one into a `BuiltSourceIndex`. */
class IndexBuilder {
  private readonly ids = new Map<string, number>();
  // Lists of numbers are typed arrays, which young-generation collections during a long build do not copy.
  private readonly flags = new IntList();
  // The two latest sentences each key was added to. A key is added only to the sentence being read or to the one
  // before it (an acronym whose run ended there), so these two say whether a sentence holds the key already.
  private readonly latest = new IntList();
  private readonly previous = new IntList();
  /** What sentences hold, as read: sentence and key; `~key` for a key held without a posting. */
  private readonly heldSentences = new IntList();
  private readonly heldKeys = new IntList();
  /** Consecutive content stems, repeats included. */
  private readonly firsts = new IntList();
  private readonly seconds = new IntList();
  private readonly prefixes = new Set<string>();
  private readonly numbers = new Set<number>();
  private readonly negatedSentences = new Map<number, NegatedSentence>();
  private readonly spans: SentenceSpan[] = [];
  private empty = true;
  private readonly build = ++builds;

  read(text: string, k: number): void {
    this.empty = false;
    // A tool's JSON is read with its escapes as what they stand for, offsets kept (`jsonEscapesRead`).
    const source = jsonEscapesRead(text);
    const tokens = tokenize(source);
    const base = this.spans.length;
    const { spans } = this;
    let run = '';
    const negation = new NegationReader(tokens, this.negatedSentences);
    // Web addresses, e-mail addresses and phone numbers, each found in the sentence of its first token.
    const links = findLinks(source);
    const tables = new TableScales(source);
    let link = 0;
    // The stem before, for word pairs: its key and its sentence.
    let before = -1;
    let beforeSentence = -1;
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!;
      const w = t.word;
      const sid = base + t.sentence;
      negation.read(sid, i);
      while (spans.length <= sid) spans.push({ source: k, start: t.start, end: t.end });
      spans[sid]!.end = t.end;
      if (w.numberedIn !== this.build) this.number(w);
      for (; link < links.length && links[link]!.start < t.end; link++) this.addLink(sid, links[link]!.keys);
      const stem = w.stemKey;
      const norm = w.normKey;
      if (w.content) this.add(sid, stem, true);
      // An acronym spelled like a function word ("US", "WHO"), or the month May, is found in its sentence, as the
      // claims read it.
      else if (w.cap && ((!t.sentenceStart && w.norm === 'may') || inCapitals(source, t, MAX_ACRONYM))) this.add(sid, norm, true);
      if (w.negation || w.quantifier) this.add(sid, norm, false);
      if (w.value !== undefined || w.numberWord !== undefined) {
        const num = readNumber(tokens, i);
        if (num) {
          for (const v of num.values) {
            this.numbers.add(v);
            this.add(sid, this.id(numberKey(v)), true);
          }
          // A share in percent is also that fraction of one, as a JSON answer writes it: "VAT (19%)" is "vat_rate": 0.19.
          const percent = tokens[num.next];
          if (percent && percent.sentence === t.sentence && percent.start - tokens[num.next - 1]!.end <= 1 && (percent.word.norm === '%' || percent.word.norm === 'percent')) {
            this.addValue(sid, Number((num.values[0]! / 100).toPrecision(12)));
          }
        }
      }
      if (w.value !== undefined || w.norm === 'z' || w.norm === 'pt' || w.norm === 'p') this.addReadings(source, tokens, i, sid);
      // A table cell under a header that gives its scale, "Revenue ($M)": 12.5 is also 12,500,000.
      if (w.value !== undefined) {
        const scale = tables.at(t.start);
        if (scale !== 1) this.addValue(sid, Number((w.value * scale).toPrecision(12)));
      }
      // A currency's symbol, code and words are its names: "$1,200" is "USD 1,200" and "1,200 US dollars", "12
      // euros" is "€12". Wherever it is written, as a table's "Revenue ($M)" or a column "revenue_usd" names the
      // currency of figures far from it (and a pound of weight is read as sterling: this only ever backs more).
      const currency = CURRENCIES.get(w.norm);
      if (currency) for (const name of currency) this.addWord(sid, name);
      // A month named is a month a date in digits may restate ("15 March 2021" → "2021-03-15" or "15/03/2021", "in
      // March of 2024" → "2024-03"; May only in a date): kept as a date's month (`monthKey`), never as the bare
      // number, or "June 1900" would back "on 6 August" and "6 bakeries".
      const month = w.cap ? MONTHS.get(w.norm) : undefined;
      if (month !== undefined) {
        const inDate = dateNumber(tokens, i - 1, t) || dateNumber(tokens, i + 1, t);
        // Any of its names, so "Nov. 15" finds "November 15" and the other way round.
        if (inDate || w.norm !== 'may') this.addMonthNames(sid, month);
      }
      // A day of the week is all its names: "Monday to Friday" is "Mon–Fri".
      const weekday = w.cap ? WEEKDAYS.get(w.norm) : undefined;
      if (weekday !== undefined) this.addStems(sid, WEEKDAY_STEMS[weekday]!);
      // An ordinal in digits is also its word: "2nd" is "second" ("third" and on are numbers already).
      if (w.value !== undefined && ORDINAL_SUFFIX_RE.test(w.norm)) {
        const ordinal = ORDINAL_WORDS.get(w.value);
        if (ordinal) this.addWord(sid, ordinal);
      }
      // And a date in digits names its month, as the answer may write it: "2021-03-15" → "15 March 2021".
      if (w.value !== undefined) for (const m of numericDateMonths(source, tokens, i)) this.addMonthNames(sid, m);
      if (w.content || w.value !== undefined) {
        if (before >= 0 && beforeSentence === t.sentence) {
          this.firsts.push(before);
          this.seconds.push(stem);
        }
        before = stem;
        beforeSentence = t.sentence;
      }
      // Acronyms from runs of capitalised words: "United States" → "us", "Department of Parks" → "dp".
      const prev = tokens[i - 1];
      if (run && prev && !onlySpaces(source, prev.end, t.start)) {
        if (run.length >= 2) this.addAcronym(base + prev.sentence, run);
        run = '';
      }
      if (w.cap && w.value === undefined) run += w.norm[0];
      else if (!(run && (w.norm === 'of' || w.norm === 'and' || w.norm === 'the'))) {
        if (run.length >= 2) this.addAcronym(base + (prev?.sentence ?? t.sentence), run);
        run = '';
      }
    }
    if (run.length >= 2) this.addAcronym(spans.length - 1, run);
    negation.end(tokens.length);
    markTableRows(source, spans, base);
  }

  finish(texts: number): BuiltSourceIndex {
    const keyCount = this.flags.length;
    const sentenceCount = this.spans.length;
    const heldSentences = this.heldSentences.items;
    const heldKeys = this.heldKeys.items;
    const heldCount = this.heldKeys.length;
    // Runs in the order read, sentence by sentence and key by key.
    const sentenceStarts = new Int32Array(sentenceCount + 1);
    const postingStarts = new Int32Array(keyCount + 1);
    for (let i = 0; i < heldCount; i++) {
      sentenceStarts[heldSentences[i]! + 1]!++;
      const key = heldKeys[i]!;
      if (key >= 0) postingStarts[key + 1]!++;
    }
    for (let s = 0; s < sentenceCount; s++) sentenceStarts[s + 1]! += sentenceStarts[s]!;
    for (let id = 0; id < keyCount; id++) postingStarts[id + 1]! += postingStarts[id]!;
    const sentenceKeys = new Int32Array(heldCount);
    const postingSentences = new Int32Array(postingStarts[keyCount]!);
    const sentenceFill = sentenceStarts.slice(0, sentenceCount);
    const postingFill = postingStarts.slice(0, keyCount);
    for (let i = 0; i < heldCount; i++) {
      const sid = heldSentences[i]!;
      const key = heldKeys[i]!;
      sentenceKeys[sentenceFill[sid]!++] = key >= 0 ? key : ~key;
      if (key >= 0) postingSentences[postingFill[key]!++] = sid;
    }
    const { starts: bigramStarts, values: bigramSeconds } = distinctRuns(this.firsts, this.seconds, keyCount);
    return new BuiltSourceIndex(
      this.ids,
      new Uint8Array(this.flags.items.subarray(0, keyCount)),
      this.prefixes,
      this.numbers,
      [...this.numbers].sort((a, b) => a - b),
      sentenceStarts,
      sentenceKeys,
      postingStarts,
      postingSentences,
      bigramStarts,
      bigramSeconds,
      this.negatedSentences,
      this.spans,
      texts,
      this.empty,
    );
  }

  /** Numbers a word's stem and spelling, which are stems of the sources (see `Word.numberedIn`). */
  private number(w: Word): void {
    const stem = this.id(w.stem);
    const flags = this.flags.items;
    if ((flags[stem]! & STEM) === 0) {
      flags[stem]! |= STEM;
      if (w.stem.length >= PREFIX_LEN) this.prefixes.add(w.stem.slice(0, PREFIX_LEN));
    }
    let norm = stem;
    if (w.norm !== w.stem) {
      norm = this.id(w.norm);
      this.flags.items[norm]! |= STEM;
    }
    w.numberedIn = this.build;
    w.stemKey = stem;
    w.normKey = norm;
  }

  /** The number of `key`, numbered now if it is new. */
  private id(key: string): number {
    let id = this.ids.get(key);
    if (id === undefined) {
      id = this.flags.length;
      this.ids.set(key, id);
      this.flags.push(0);
      this.latest.push(-1);
      this.previous.push(-1);
    }
    return id;
  }

  /** Adds key `id` to sentence `sid`, and with `posted` the sentence to the key's posting, unless it holds the key already. */
  private add(sid: number, id: number, posted: boolean): void {
    const latest = this.latest.items[id]!;
    if (latest === sid || this.previous.items[id] === sid) return;
    if (sid > latest) {
      this.previous.items[id] = latest;
      this.latest.items[id] = sid;
    } else this.previous.items[id] = sid;
    this.heldSentences.push(sid);
    this.heldKeys.push(posted ? id : ~id);
  }

  /**
   * How an answer may restate a tool's figure at token `i`, found in sentence `sid`: an accounting negative
   * "(1,200)" is also -1200; a time "14:30" is also 2 and "pm" ("09:00" is "am"), "2:30 pm" is also 14; the "Z" of
   * "2024-03-15T14:30:00Z" is "UTC"; an ISO duration "PT1H30M" is also 90 minutes, 5400 seconds and 1.5 hours.
   */
  private addReadings(source: string, tokens: readonly Token[], i: number, sid: number): void {
    const t = tokens[i]!;
    const v = t.word.value;
    if (v !== undefined) {
      if (v > 0 && source.charCodeAt(t.start - 1) === 40 && source.charCodeAt(t.end) === 41) this.addValue(sid, -v);
      // A time of day is its hour on a 24-hour clock, as a claim's time is looked for: "6 p.m." and "18:00" are 18.
      const time = readTime(source, tokens, i);
      if (time) for (const hour of time.hours) this.addHourKey(sid, hour);
      // "2 hours 45 minutes" is also 165 minutes, 2.75 hours and 9900 seconds, as a claim may convert it.
      const duration = readDuration(tokens, i);
      if (duration) this.addDuration(sid, duration.seconds);
      const minutes = tokens[i + 1];
      if (
        Number.isInteger(v) && v >= 0 && v <= 23 && t.end - t.start <= 2 && source.charCodeAt(t.end) === 58 &&
        minutes && minutes.start === t.end + 1 && minutes.end - minutes.start === 2 && minutes.word.value !== undefined && minutes.word.value < 60
      ) {
        let j = i + 2;
        if (tokens[j] && tokens[j]!.start === minutes.end + 1 && source.charCodeAt(minutes.end) === 58) j++;
        const after = tokens[j]?.word.norm;
        const meridiem = after === 'pm' || (after === 'p' && /^\.?m\b/i.test(source.slice(tokens[j]!.end, tokens[j]!.end + 3))) ? 'pm' : after === 'am' || (after === 'a' && /^\.?m\b/i.test(source.slice(tokens[j]!.end, tokens[j]!.end + 3))) ? 'am' : undefined;
        if (meridiem === 'pm' && v >= 1 && v <= 11) this.addValue(sid, v + 12);
        else if (meridiem === 'am' && v === 12) this.addValue(sid, 0);
        else if (meridiem === undefined) {
          if (v >= 13) this.addValue(sid, v - 12);
          else if (v === 0) this.addValue(sid, 12);
          this.addWord(sid, v >= 12 ? 'pm' : 'am');
        }
      }
      return;
    }
    const before = tokens[i - 1];
    if (t.word.norm === 'z') {
      if (before && before.end === t.start && before.word.value !== undefined) this.addWord(sid, 'utc');
      return;
    }
    if (before && before.end === t.start && /[\p{L}\p{N}]/u.test(source[t.start - 1]!)) return;
    ISO_DURATION_RE.lastIndex = t.start;
    const m = ISO_DURATION_RE.exec(source);
    if (!m || m[0].length < 3) return;
    const [days, hours, minutes, seconds] = [m[1], m[2], m[3], m[4]].map((x) => (x === undefined ? 0 : Number(x)));
    const total = days! * 86_400 + hours! * 3_600 + minutes! * 60 + seconds!;
    if (total > 0) this.addDuration(sid, total);
  }

  /** A duration of `seconds`, found as each number it is written as (`durationValues`) and its unit's word. */
  private addDuration(sid: number, seconds: number): void {
    for (const { value, unit } of durationValues(seconds)) {
      this.addValue(sid, value);
      this.addWord(sid, unit);
    }
  }

  /** Number `v`, found in sentence `sid` as the source's own numbers are. */
  private addValue(sid: number, v: number): void {
    this.numbers.add(v);
    this.add(sid, this.id(numberKey(v)), true);
  }

  /** Word `word`, found in sentence `sid` as the stems of its words are. */
  private addWord(sid: number, word: string): void {
    const id = this.id(stem(word));
    this.flags.items[id]! |= STEM;
    this.add(sid, id, true);
  }

  /** Month `month` as a date names it (`monthKey`), found in sentence `sid` as the stems of its words are. */
  private addMonthKey(sid: number, month: number): void {
    const id = this.id(monthKey(month));
    this.flags.items[id]! |= STEM;
    this.add(sid, id, true);
  }

  /** Hour `hour` of the day as a time names it (`hourKey`), found in sentence `sid` as the stems of its words are. */
  private addHourKey(sid: number, hour: number): void {
    const id = this.id(hourKey(hour));
    this.flags.items[id]! |= STEM;
    this.add(sid, id, true);
  }

  /** The names of month `month` ("march", "mar") and its key, found in sentence `sid` as the stems of its words are. */
  private addMonthNames(sid: number, month: number): void {
    this.addMonthKey(sid, month);
    this.addStems(sid, MONTH_STEMS[month]!);
  }

  /** Stems `stems`, found in sentence `sid` as the stems of its words are. */
  private addStems(sid: number, stems: readonly string[]): void {
    for (const name of stems) {
      const id = this.id(name);
      this.flags.items[id]! |= STEM;
      this.add(sid, id, true);
    }
  }

  /** A link's keys (`Link.keys`), found in sentence `sid` as its stems are. */
  private addLink(sid: number, keys: readonly string[]): void {
    for (const key of keys) {
      const id = this.id(key);
      this.flags.items[id]! |= STEM;
      this.add(sid, id, true);
    }
  }

  /** An acronym of a run of capitalised words ("United States" → "us"), found in the sentence of the run. */
  private addAcronym(sid: number, run: string): void {
    const id = this.id(run);
    this.flags.items[id]! |= ACRONYM;
    this.add(sid, id, true);
  }
}

/** A list of 32-bit integers, grown by doubling as it is pushed to. */
class IntList {
  length = 0;
  /** The list: `items[0, length)`. */
  items = new Int32Array(16);

  push(v: number): void {
    if (this.length === this.items.length) {
      const grown = new Int32Array(this.length * 2);
      grown.set(this.items);
      this.items = grown;
    }
    this.items[this.length++] = v;
  }
}

/**
 * The pairs `(pairKeys[i], pairValues[i])` grouped by key, each value once per key: key `k`'s values are
 * `values[starts[k], starts[k + 1])`.
 */
function distinctRuns(pairKeys: IntList, pairValues: IntList, keyCount: number): { starts: Int32Array; values: Int32Array } {
  const keys = pairKeys.items;
  const values = pairValues.items;
  const pairs = pairKeys.length;
  const counts = new Int32Array(keyCount + 1);
  for (let i = 0; i < pairs; i++) counts[keys[i]! + 1]!++;
  for (let k = 0; k < keyCount; k++) counts[k + 1]! += counts[k]!;
  const grouped = new Int32Array(pairs);
  const fill = counts.slice(0, keyCount);
  for (let i = 0; i < pairs; i++) grouped[fill[keys[i]!]!++] = values[i]!;
  // Drops repeats within each run: `seenIn[v]` is the run (plus one) that last kept value `v`.
  const seenIn = new Int32Array(keyCount);
  const starts = new Int32Array(keyCount + 1);
  let n = 0;
  for (let k = 0; k < keyCount; k++) {
    for (let i = counts[k]!; i < counts[k + 1]!; i++) {
      const v = grouped[i]!;
      if (seenIn[v] === k + 1) continue;
      seenIn[v] = k + 1;
      grouped[n++] = v;
    }
    starts[k + 1] = n;
  }
  return { starts, values: grouped.slice(0, n) };
}

/**
 * Reads a text's tokens in order and keeps, for each sentence with a negation, what it negates. Only those
 * sentences are read word by word (few have a negation).
 */
class NegationReader {
  private sid = -1;
  private from = 0;
  private negated = false;
  private readonly sentence = new NegationScope();

  constructor(
    private readonly tokens: readonly Token[],
    private readonly into: Map<number, NegatedSentence>,
  ) {}

  /** Reads token `i`, of sentence `sid`. */
  read(sid: number, i: number): void {
    if (sid !== this.sid) {
      this.end(i);
      this.sid = sid;
      this.from = i;
    }
    if (isNegation(this.tokens, i)) this.negated = true;
  }

  /** Ends the sentence being read, before token `to`. */
  end(to: number): void {
    if (!this.negated) return;
    for (let i = this.from; i < to; i++) this.sentence.read(this.tokens, i);
    this.into.set(this.sid, { scope: this.sentence.scope(), plain: this.sentence.plain() });
    this.sentence.reset();
    this.negated = false;
  }
}

/** Digits with an ordinal's ending: "1st", "2nd", "23rd", "4th". */
export const ORDINAL_SUFFIX_RE = /^\d+(?:st|nd|rd|th)$/;

/** The stems of each month's names ("march", "mar"), by its number. */
const MONTH_STEMS: readonly string[][] = namesByNumber(MONTHS, 12);
/** The names of each day of the week ("monday", "mon"), by its number (Monday 1). */
const WEEKDAY_STEMS: readonly string[][] = namesByNumber(WEEKDAYS, 7);

function namesByNumber(names: ReadonlyMap<string, number>, count: number): string[][] {
  const out: string[][] = Array.from({ length: count + 1 }, () => []);
  for (const [name, n] of names) if (!out[n]!.includes(stem(name))) out[n]!.push(stem(name));
  return out;
}

/** Whether token `i` is a day or a year written in digits, in the sentence of `month`. */
function dateNumber(tokens: readonly Token[], i: number, month: Token): boolean {
  const t = tokens[i];
  return t !== undefined && t.sentence === month.sentence && t.word.value !== undefined && Number.isInteger(t.word.value) && t.word.value >= 1 && t.word.value <= 9999;
}

/**
 * The month of a date in digits that starts at token `i`: "2021-03-15" and "2021-03" → 3; "03/04/2022" → 3 and 4,
 * as it is read either way. None when the tokens are no such date.
 */
export function numericDateMonths(text: string, tokens: readonly Token[], i: number): number[] {
  const [a, b, c] = [tokens[i]!, tokens[i + 1], tokens[i + 2]];
  if (b && b.sentence === a.sentence && isoMonth(text, a, b) !== undefined && !(c && c.sentence === a.sentence && text.slice(b.end, c.start) === '-')) return [b.word.value!];
  if (!b || !c || b.sentence !== a.sentence || c.sentence !== a.sentence) return [];
  const sep = text.slice(a.end, b.start);
  if (sep !== text.slice(b.end, c.start) || (sep !== '-' && sep !== '/' && sep !== '.')) return [];
  const [x, y, z] = [a.word.value, b.word.value, c.word.value];
  const day = (v: number | undefined) => v !== undefined && Number.isInteger(v) && v >= 1 && v <= 31;
  const month = (v: number | undefined): v is number => day(v) && v! <= 12;
  const year = (t: Token) => t.end - t.start === 4 && t.word.value! >= 1000;
  if (sep === '-') return year(a) && month(y) && day(z) ? [y] : [];
  if (!year(c) || !day(x) || !day(y)) return [];
  return [x, y].filter(month);
}

/**
 * Whether `month` is the month of an ISO date beginning with year token `year` ("2024-03", "2024-03-15"): the
 * month's value, or undefined. The month is one or two digits right after the year and a hyphen.
 */
export function isoMonth(text: string, year: Token, month: Token): number | undefined {
  const v = month.word.value;
  if (year.end - year.start !== 4 || !(year.word.value! >= 1000) || text.slice(year.end, month.start) !== '-') return undefined;
  if (v === undefined || !Number.isInteger(v) || v < 1 || v > 12 || month.end - month.start > 2) return undefined;
  return v;
}

/** How a month a date names is kept among a sentence's keys: apart from the bare number, "3 apples" is no March. */
export function monthKey(month: number): string {
  return `#month${month}`;
}

/** How a number is kept among a sentence's keys (never a word's spelling). */
export function numberKey(v: number): string {
  return `#${v}`;
}

/**
 * The scale a Markdown table's header gives its column, "Revenue ($M)", "Sales (thousands)", "Cost (€bn)": a
 * cell's number times it is the figure an answer may write out. Each table's header is read once.
 */
class TableScales {
  private readonly headers = new Map<number, readonly number[]>();
  constructor(private readonly text: string) {}

  // The line last asked about: numbers are asked about in order, so finding their lines is linear.
  private lineStart = 0;
  private lineEnd = -1;
  private lineScales: readonly number[] = [];

  at(i: number): number {
    const text = this.text;
    if (i < this.lineStart || i > this.lineEnd) {
      const lineStart = text.lastIndexOf('\n', i - 1) + 1;
      const end = text.indexOf('\n', i);
      this.lineStart = lineStart;
      this.lineEnd = end < 0 ? text.length : end;
      const row = text.charCodeAt(lineStart) === 124 || /^[ \t]{1,3}\|/.test(text.slice(lineStart, lineStart + 4));
      this.lineScales = row ? this.scalesAbove(lineStart) : [];
    }
    const { lineStart, lineScales: scales } = this;
    if (scales.length === 0) return 1;
    let column = -1;
    for (let j = lineStart; j < i; j++) if (text.charCodeAt(j) === 124 && text.charCodeAt(j - 1) !== 92) column++;
    return scales[column] ?? 1;
  }

  /** The column scales of the table the line at `lineStart` is a row of (none above its separator row). */
  private scalesAbove(lineStart: number): readonly number[] {
    const known = this.headers.get(lineStart);
    if (known) return known;
    const text = this.text;
    const visited: number[] = [];
    let scales: readonly number[] = [];
    for (let at = lineStart; ; ) {
      const seen = this.headers.get(at);
      if (seen) {
        scales = seen;
        break;
      }
      visited.push(at);
      const end = text.indexOf('\n', at);
      const line = text.slice(at, end < 0 ? text.length : end);
      if (!line.trimStart().startsWith('|') || at === 0) break;
      if (TABLE_SEPARATOR_RE.test(line)) {
        const headerStart = text.lastIndexOf('\n', at - 2) + 1;
        scales = text.slice(headerStart, at - 1).split('|').slice(1).map(headerScale);
        break;
      }
      at = text.lastIndexOf('\n', at - 2) + 1;
    }
    for (const at of visited) this.headers.set(at, scales);
    return scales;
  }
}

const TABLE_SEPARATOR_RE = /^\s*\|?\s*:?-{3,}:?\s*\|/;
const SCALE_RE = /\(\s*(?:[$€£¥]|usd|eur|gbp)?\s*(k|thousands?|m|mm|mn|millions?|b|bn|billions?)\s*\)/i;

/**
 * Marks the sentences from `from` on that are rows of a Markdown table: the line they start on begins with `|`
 * and has another; a header when the next line is the table's rule (`|---|`). One pass over the text, whatever
 * the number of sentences on a line.
 */
const TABLE_RULE = /^[ \t]*\|?[ \t]*:?-{3,}/;

function markTableRows(text: string, spans: SentenceSpan[], from: number): void {
  let lineStart = 0;
  let lineEnd = -1;
  let row = false;
  let header = false;
  for (let sid = from; sid < spans.length; sid++) {
    const span = spans[sid]!;
    while (span.start > lineEnd) {
      lineStart = lineEnd + 1;
      lineEnd = text.indexOf('\n', lineStart);
      if (lineEnd < 0) lineEnd = text.length;
      let i = lineStart;
      while (i < lineEnd && (text[i] === ' ' || text[i] === '\t')) i++;
      const bar = text[i] === '|' ? text.indexOf('|', i + 1) : -1;
      row = bar !== -1 && bar < lineEnd;
      header = row && TABLE_RULE.test(text.slice(lineEnd + 1, lineEnd + 17));
    }
    if (row) span.row = header ? 'header' : 'body';
  }
}

/** The scale a header cell names in brackets: "($M)" 1e6, "(thousands)" 1e3; 1 for none. */
function headerScale(cell: string): number {
  const m = SCALE_RE.exec(cell);
  if (!m) return 1;
  const unit = m[1]!.toLowerCase();
  return unit.startsWith('k') || unit.startsWith('t') ? 1e3 : unit.startsWith('b') ? 1e9 : 1e6;
}


// An ISO 8601 duration: "PT1H30M", "P1DT2H", "PT45.5S".
const ISO_DURATION_RE = /P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?(?![\p{L}\p{N}])/uy;

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
  // No text with letters or digits: the index of as many empty texts.
  if (filled.length === 0) return buildSourceIndex(new Array<string>(texts).fill(''));
  if (filled.length === 1 && shifts[0] === 0 && texts === filled[0]!.texts) return filled[0]!;
  return new MergedSourceIndex(filled, shifts, texts);
}

class MergedSourceIndex implements SourceIndex {
  readonly stems: Lookup<string>;
  readonly prefixes: Lookup<string>;
  readonly acronyms: Lookup<string>;
  readonly numbers = new Set<number>();
  readonly numberList: number[];
  readonly negatedSentences = new Map<number, NegatedSentence>();
  readonly spans: SentenceSpan[] = [];
  readonly empty = false;
  /** The number of each part's first sentence. */
  private readonly bases: number[] = [];

  constructor(
    private readonly parts: readonly BuiltSourceIndex[],
    shifts: readonly number[],
    readonly texts: number,
  ) {
    for (let k = 0; k < parts.length; k++) {
      const part = parts[k]!;
      const base = this.spans.length;
      this.bases.push(base);
      const shift = shifts[k]!;
      for (const sp of part.spans) this.spans.push(shift === 0 ? sp : { ...sp, source: sp.source + shift });
      for (const [sid, negated] of part.negatedSentences) this.negatedSentences.set(base + sid, negated);
      for (const v of part.numbers) this.numbers.add(v);
    }
    this.numberList = [...this.numbers].sort((a, b) => a - b);
    this.stems = new AnyOf(parts.map((p) => p.stems));
    this.prefixes = new AnyOf(parts.map((p) => p.prefixes));
    this.acronyms = new AnyOf(parts.map((p) => p.acronyms));
  }

  hasBigram(first: string, second: string): boolean {
    for (const part of this.parts) if (part.hasBigram(first, second)) return true;
    return false;
  }

  postingSize(key: string): number {
    let size = 0;
    for (const part of this.parts) size += part.postingSize(key);
    return size;
  }

  readPosting(key: string, into: Int32Array): number {
    let size = 0;
    for (let k = 0; k < this.parts.length; k++) {
      const part = this.parts[k]!;
      if (size >= into.length) {
        size += part.postingSize(key);
        continue;
      }
      // The part's sentences after those of the parts before, numbered on from them.
      const own = part.readPosting(key, into, size);
      const base = this.bases[k]!;
      if (base !== 0) for (let i = size, end = Math.min(size + own, into.length); i < end; i++) into[i]! += base;
      size += own;
    }
    return size;
  }

  holds(sid: number, key: string): boolean {
    let k = this.parts.length - 1;
    while (this.bases[k]! > sid) k--;
    return this.parts[k]!.holds(sid - this.bases[k]!, key);
  }
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
