import type { Claim, NumberUnit, Term } from './claims.js';
import { MONTHS, UNITS, type Unit } from './lexicon.js';
import { hasNumber, heldWithoutPosting, isoMonth, monthKey, numberKey, PREFIX_LEN, type NegatedSentence, type SourceIndex } from './source-index.js';
import { findLinks, holdsCodeName } from './links.js';
import { hourKey, readNumber, readTime, stem, tokenize } from './tokenize.js';

/** Support of a word related to a source word ("Australian" in "Australian-British"). */
export const RELATED_SUPPORT = 0.6;

/** Penalty on a passage's coverage when the claim and the passage disagree on negation. */
export const NEGATION_MISMATCH = 1;

/** What the sources say of one term of a claim. */
export interface TermSupport {
  term: Term;
  /** 1 in the sources (or the question), RELATED_SUPPORT for a related form, 0 when absent. */
  support: number;
}

/** The passage of the sources that best supports a claim: one sentence or two adjacent ones. */
export interface Passage {
  /** Index into the sources. */
  source: number;
  /** UTF-16 offsets into that source. */
  start: number;
  end: number;
  /** Share of the claim's terms the passage holds, less NEGATION_MISMATCH when it disagrees on negation. */
  score: number;
  /** The claim has a negation the passage lacks, or the passage one the claim lacks. */
  negationMismatch: boolean;
  /** Sentences in the window, less one. */
  sentences: number;
}

/** Everything the calibration reads of one claim. Every field moves one way as sources are added. */
export interface ClaimSupport {
  claim: Claim;
  terms: TermSupport[];
  /** Weighted share of the claim's terms found anywhere in the sources or the question. */
  coverage: number;
  passage: Passage | undefined;
  unsupportedNumbers: number;
  unsupportedNames: number;
  unsupportedWords: number;
  /** Share of the claim's consecutive term pairs that are also consecutive content words in some source. */
  pairCoverage: number;
}

/** The question's words and numbers: what the user said is neither evidence of error nor a claim to prove. */
export interface QuestionTerms {
  stems: ReadonlySet<string>;
  numbers: ReadonlySet<number>;
  /** Months the question names in words or as an ISO date's month. */
  months: ReadonlySet<number>;
  /** Hours of the day the question names as times ("at 6 pm?": 18). */
  hours: ReadonlySet<number>;
  /** The question as written, where a name of code may be (`holdsCodeName`). */
  text: string;
}

export function questionTerms(question: string | undefined): QuestionTerms {
  const stems = new Set<string>();
  const numbers = new Set<number>();
  const months = new Set<number>();
  const hours = new Set<number>();
  if (question) {
    const tokens = tokenize(question);
    for (let i = 0; i < tokens.length; i++) {
      const w = tokens[i]!.word;
      stems.add(w.stem);
      stems.add(w.norm);
      if (w.value !== undefined || w.numberWord !== undefined) for (const v of readNumber(tokens, i)?.values ?? []) numbers.add(v);
      const month = w.cap ? MONTHS.get(w.norm) : i > 0 ? isoMonth(question, tokens[i - 1]!, tokens[i]!) : undefined;
      if (month !== undefined) months.add(month);
      if (w.value !== undefined) for (const h of readTime(question, tokens, i)?.hours ?? []) hours.add(h);
    }
    for (const link of findLinks(question)) for (const key of link.keys) stems.add(key);
  }
  return { stems, numbers, months, hours, text: question ?? '' };
}

/**
 * Sentences read per term when looking for a claim's passage. A term in more sentences than this (a word that
 * fills a log) finds its passage through the claim's rarer terms; it bounds the work of one claim whatever the
 * sources hold.
 */
export const MAX_POSTING = 1_000;

/**
 * Measures how well the sources support one claim. Every measure is monotone in the sources: adding a
 * source can only find more terms and better passages, never fewer.
 */
export function supportClaim(
  index: SourceIndex,
  question: QuestionTerms,
  claim: Claim,
  search: PassageSearch = new PassageSearch(),
  /** The sources' text, where a name of code is looked for (`Term.link` of kind 'code'). */
  texts: readonly string[] = [],
): ClaimSupport {
  const terms: TermSupport[] = [];
  let covered = 0;
  let unsupportedNumbers = 0;
  let unsupportedNames = 0;
  let unsupportedWords = 0;
  // The unit word after a number that is a source's number in another unit ("2.4 MB" for "2516582 bytes"); the
  // passage is looked for with the source's number and unit word in their place.
  let converted: { at: number; found: Conversion } | undefined;
  let searched: Term[] | undefined;
  let held = codeNamesHeld.get(search);
  if (!held) codeNamesHeld.set(search, (held = new Map()));
  for (let i = 0; i < claim.terms.length; i++) {
    const term = claim.terms[i]!;
    let support = termSupport(index, question, term, texts, held);
    const found = support === 0 && term.unit ? convertedNumber(index, term.unit) : undefined;
    if (found) {
      support = 1;
      converted = { at: term.unit!.start, found };
      (searched ??= [...claim.terms])[i] = { ...term, values: [...(term.values ?? []), found.value] };
    } else if (converted && term.start === converted.at) {
      support = 1;
      const word = { ...term.token.word, stem: converted.found.unitStem, norm: converted.found.unitStem };
      (searched ??= [...claim.terms])[i] = { ...term, token: { ...term.token, word } };
    }
    terms.push({ term, support });
    covered += support;
    if (support === 0) {
      if (term.kind === 'number') unsupportedNumbers++;
      // A link no source has is as telling as a name no source has.
      else if (term.kind === 'name' || term.kind === 'link') unsupportedNames++;
      else unsupportedWords++;
    }
  }
  let pairs = 0;
  let pairsFound = 0;
  for (let i = 1; i < claim.terms.length; i++) {
    const a = claim.terms[i - 1]!;
    const b = claim.terms[i]!;
    if (a.kind === 'number' || b.kind === 'number' || a.kind === 'link' || b.kind === 'link' || a.acronym || b.acronym || a.currency || b.currency) continue;
    pairs++;
    if (index.hasBigram(a.token.word.stem, b.token.word.stem)) pairsFound++;
  }
  return {
    claim,
    terms,
    // A claim without word pairs (one word, or words around numbers) is judged by its words alone.
    pairCoverage: pairs === 0 ? 1 : pairsFound / pairs,
    coverage: covered / claim.terms.length,
    passage: search.find(index, searched ? { ...claim, terms: searched } : claim),
    unsupportedNumbers,
    unsupportedNames,
    unsupportedWords,
  };
}

/** Stems of the words that name each unit in a source ("bytes", "ms", "seconds"), by unit. */
const UNIT_STEMS = new Map<Unit, string[]>();
for (const [spelling, unit] of UNITS) {
  const stems = UNIT_STEMS.get(unit) ?? [];
  stems.push(stem(spelling));
  UNIT_STEMS.set(unit, stems);
}
// A source's "373.15 K" may be kelvin as well as thousands (`numberUnit` reads a claim's so too).
UNIT_STEMS.get(UNITS.get('kelvin')!)!.push('k');

/** Source numbers looked at per conversion at most (a log's numbers can crowd one range). */
const MAX_CONVERSION_CANDIDATES = 32;

/**
 * Is a claim's figure with a unit ("2.4 MB", "1.5 seconds", "57 minutes", "70 °F") a source's number in another unit
 * of its kind, rounded to the decimals written: 2516582 bytes (2.4 MiB), 1530 ms, 21 °C (69.8 °F)? The source's number must stand in
 * a sentence that names its unit ("bytes", a JSON key "latency_ms"). Data sizes are converted in 1000s and in
 * 1024s, never mixed.
 */
export function convertedNumber(index: SourceIndex, u: NumberUnit): Conversion | undefined {
  const tolerance = 0.5 * 10 ** -u.decimals + 1e-9;
  const list = index.numberList;
  const posting = new Int32Array(MAX_CONVERSION_CANDIDATES);
  for (const [to, stems] of UNIT_STEMS) {
    if (to === u.unit || to.kind !== u.unit.kind) continue;
    const factors = new Set([u.unit.size / to.size, u.unit.binary / to.binary]);
    // A temperature's scales differ by an offset as well (data and time have none): x in the claim's unit is
    // factor · x + shift in the other's.
    const shift = (u.unit.offset - to.offset) / to.size;
    for (const factor of factors) {
      let lo = 0;
      let hi = list.length;
      const from = (u.written - tolerance) * factor + shift;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (list[mid]! < from) lo = mid + 1;
        else hi = mid;
      }
      for (let i = lo; i < list.length && i < lo + MAX_CONVERSION_CANDIDATES && list[i]! <= (u.written + tolerance) * factor + shift; i++) {
        const n = list[i]!;
        if (Math.abs((n - shift) / factor - u.written) > tolerance) continue;
        const size = index.readPosting(numberKey(n), posting);
        for (let j = 0; j < Math.min(size, posting.length); j++) {
          const unitStem = stems.find((s) => index.holds(posting[j]!, s));
          if (unitStem !== undefined) return { value: n, unitStem };
        }
      }
    }
  }
  return undefined;
}

/** A source's number that a claim's figure converts (`convertedNumber`), and the stem of its unit word there. */
export interface Conversion {
  value: number;
  unitStem: string;
}

/**
 * Per check (its PassageSearch), whether the sources or the question hold each name of code looked for
 * (`holdsCodeName`): a snippet names the same few things many times, and each is looked for in their text once.
 */
const codeNamesHeld = new WeakMap<PassageSearch, Map<string, boolean>>();

function termSupport(index: SourceIndex, question: QuestionTerms, term: Term, texts: readonly string[], held: Map<string, boolean>): number {
  if (term.kind === 'number') {
    for (const v of term.values ?? []) if (hasNumber(index, v) || question.numbers.has(v)) return 1;
    if (term.month !== undefined && (index.stems.has(monthKey(term.month)) || question.months.has(term.month))) return 1;
    if (term.dateMonth && term.values?.some((v) => index.stems.has(monthKey(v)) || question.months.has(v))) return 1;
    if (term.ordinal && (index.stems.has(term.ordinal) || question.stems.has(term.ordinal))) return 1;
    if (term.hours?.some((h) => index.stems.has(hourKey(h)) || question.hours.has(h))) return 1;
    return 0;
  }
  if (term.link?.name !== undefined) {
    const codeOnly = term.link.codeOnly === true;
    for (const name of term.link.names ?? [term.link.name]) {
      const key = codeOnly ? `(${name}` : name;
      // The question too, once per name: it is up to 16 KB that may hold the name thousands of times, and a
      // snippet may name it thousands of times (each a scan of all its places, quadratic).
      let found = held.get(key);
      if (found === undefined) held.set(key, (found = holdsCodeName(texts, name, codeOnly) || holdsCodeName([question.text], name, codeOnly)));
      if (found) return 1;
    }
    return 0;
  }
  if (term.link) {
    for (const key of term.link.lookups) if (index.stems.has(key) || question.stems.has(key)) return 1;
    return 0;
  }
  const w = term.token.word;
  // An acronym spelled like a function word is found only as one: "IN" is not the preposition "in".
  if (term.acronym) return index.postingSize(w.norm) > 0 || index.acronyms.has(w.norm) || question.stems.has(w.norm) ? 1 : 0;
  if (index.stems.has(w.stem) || index.stems.has(w.norm) || question.stems.has(w.stem) || question.stems.has(w.norm)) return 1;
  if (w.norm.length >= 2 && w.norm.length <= 6 && (index.acronyms.has(w.norm) || index.acronyms.has(w.stem))) return 1;
  // A word glued from or derived from a source word ("Australian-British", "producer" for "production").
  // Not a version in dotted digits: "18.17.1" is no form of "18.17.0".
  if (w.stem.length >= PREFIX_LEN && w.value === undefined && !/^\d/.test(w.stem) && index.prefixes.has(w.stem.slice(0, PREFIX_LEN))) return RELATED_SUPPORT;
  return 0;
}

/** The keys a term has among a sentence's stems. */
function termKeys(term: Term): string[] {
  if (term.kind === 'number') {
    const keys = (term.values ?? []).map(numberKey);
    if (term.hours) keys.push(...term.hours.map(hourKey));
    if (term.ordinal) keys.push(term.ordinal);
    if (term.dateMonth) for (const v of term.values ?? []) keys.push(monthKey(v));
    return term.month === undefined ? keys : [...keys, monthKey(term.month)];
  }
  if (term.link) return term.link.lookups;
  const w = term.token.word;
  return w.stem === w.norm ? [w.stem] : [w.stem, w.norm];
}

/**
 * Postings longer than this are not read once the budget is spent: a claim's passage is then looked for among
 * the sentences holding its rarer terms, and asked of the others.
 */
export const RARE_POSTING = 32;

/**
 * Finds claims' passages within one check: a claim repeated in the answer is looked up once, and the postings
 * read over all claims are bounded (`budget`), so no answer and sources, however repetitive, cost more than a
 * few tens of milliseconds. Past the budget a claim's passage is looked for among the sentences holding its
 * rare terms only (postings up to RARE_POSTING), within a second budget as large; past that too a claim gets no
 * passage (it is then judged by its words alone).
 */
export class PassageSearch {
  private readonly seen = new Map<string, Passage | undefined>();
  private readonly hits = sharedHits;
  private rareBudget: number;

  /** @param budget sentence postings read at most over all claims of a check */
  constructor(private budget = 150_000) {
    this.rareBudget = budget;
  }

  find(index: SourceIndex, claim: Claim): Passage | undefined {
    const keys = claim.terms.map(termKeys);
    const negated = claim.negated;
    const key = `${claim.negations.length > 0 ? `!${[...negated].join(',')}!` : ''}${keys.map((k) => k.join('|')).join(' ')}`;
    if (this.seen.has(key)) return this.seen.get(key);
    let passage: Passage | undefined;
    if (this.budget > 0) {
      const found = bestPassage(index, claim, keys, negated, this.hits);
      this.budget -= found.read;
      passage = found.passage;
    } else if (this.rareBudget > 0) {
      const found = bestPassage(index, claim, keys, negated, this.hits, RARE_POSTING);
      this.rareBudget -= found.read;
      passage = found.passage;
    }
    this.seen.set(key, passage);
    return passage;
  }
}

/**
 * Whether a passage sentence and a claim disagree on negation, word by word: the claim negates a word the
 * sentence states plainly ("the fire was not contained" against "No injuries were reported, and the fire was
 * contained"), or states plainly a word the sentence only negates ("the museum is open" against "the museum
 * is not open"). A negated claim against a sentence with no negation disagrees as a whole. A negation in
 * another clause of the sentence ("Venus is not the closest planet, yet it is the hottest") is no reason.
 */
function negationDisagrees(sentence: NegatedSentence | undefined, claim: Claim, negated: ReadonlySet<string>): boolean {
  if (!sentence) return claim.negations.length > 0;
  for (const w of negated) if (!sentence.scope.has(w) && sentence.plain.has(w)) return true;
  for (const t of claim.terms) {
    if (t.kind === 'number') continue;
    const w = t.token.word.stem;
    if (!negated.has(w) && sentence.scope.has(w) && !sentence.plain.has(w)) return true;
  }
  return false;
}

/** Sentences of sources whose buffers the shared `Hits` keeps between checks (32 KB); larger ones are let go. */
const KEPT_SENTENCES = 4096;
/** Numbers of term bits the shared `Hits` keeps between checks (64 KB): a claim of thousands of terms lets them go. */
const KEPT_MASK_WORDS = 16_384;
/** The last claim number an Int32Array holds; the counter starts over (buffers zeroed) before it would pass it. */
const LAST_CLAIM = 0x7fffffff;

/**
 * The sentences where one claim's terms were found, in the order first found: how many terms each holds, and
 * which, as bits (`words` numbers of 32 bits per sentence). One instance (`sharedHits`) serves every claim of
 * every check: a check is synchronous, and a fresh one per check (seven typed arrays, each an ArrayBuffer the
 * collector tracks) was 18 % of a chat-sized check's samples in a profile at model pace.
 */
class Hits {
  /** Sentences found. */
  size = 0;
  /** Per sentence found: its number, and how many terms it holds. */
  sids = new Int32Array(64);
  counts = new Int32Array(64);
  masks = new Int32Array(64);
  words = 1;
  /** The posting read last (`read`), up to MAX_POSTING sentences of it. */
  posting = new Int32Array(64);
  /** Per sentence of the sources: the claim it was last found for, and where it is among `sids`. */
  private foundFor = new Int32Array(0);
  private slots = new Int32Array(0);
  private claim = 0;
  /** `bestPassage`'s bits of the terms whose postings were read whole (`words` of them in use). */
  private knownBits = new Int32Array(1);

  /** Ready for a claim of `terms` terms, against sources of `sentences` sentences. */
  reset(sentences: number, terms: number): void {
    this.words = (terms + 31) >>> 5;
    const kept = this.foundFor.length;
    if (kept < sentences || (kept > KEPT_SENTENCES && sentences <= KEPT_SENTENCES) || this.claim === LAST_CLAIM) {
      this.foundFor = new Int32Array(sentences);
      this.slots = new Int32Array(sentences);
      this.claim = 0;
    }
    const large = this.sids.length > KEPT_SENTENCES || this.masks.length > KEPT_MASK_WORDS;
    if (large && sentences <= KEPT_SENTENCES && sentences * this.words <= KEPT_MASK_WORDS) {
      this.sids = new Int32Array(64);
      this.counts = new Int32Array(64);
      this.masks = new Int32Array(64);
    }
    this.claim++;
    this.size = 0;
  }

  /** Zeroed bits for the terms of the claim `reset` was given (`words` numbers). */
  known(): Int32Array<ArrayBuffer> {
    if (this.knownBits.length < this.words) this.knownBits = new Int32Array(this.words);
    else this.knownBits.fill(0, 0, this.words);
    return this.knownBits;
  }

  /** Reads the posting of `key` into `posting`, up to MAX_POSTING sentences of it; returns its size. */
  read(index: SourceIndex, key: string): number {
    const size = index.readPosting(key, this.posting);
    if (size <= this.posting.length || this.posting.length === MAX_POSTING) return size;
    this.posting = new Int32Array(Math.min(MAX_POSTING, Math.max(size, this.posting.length * 2)));
    return index.readPosting(key, this.posting);
  }

  /** Where sentence `sid` is among those found, or -1. */
  slot(sid: number): number {
    return this.foundFor[sid] === this.claim ? this.slots[sid]! : -1;
  }

  /** Where sentence `sid` is among those found, found now (holding no term yet) if it was not. */
  find(sid: number): number {
    if (this.foundFor[sid] === this.claim) return this.slots[sid]!;
    const slot = this.size++;
    if (slot === this.sids.length) {
      this.sids = grown(this.sids);
      this.counts = grown(this.counts);
    }
    if ((slot + 1) * this.words > this.masks.length) this.masks = grown(this.masks, (slot + 1) * this.words);
    this.foundFor[sid] = this.claim;
    this.slots[sid] = slot;
    this.sids[slot] = sid;
    this.counts[slot] = 0;
    for (let w = slot * this.words; w < (slot + 1) * this.words; w++) this.masks[w] = 0;
    return slot;
  }
}

/** The `Hits` every `PassageSearch` uses (see `Hits`). */
const sharedHits = new Hits();

/** A copy of `a` twice as long (or `least` long), zeros after its end. */
function grown(a: Int32Array<ArrayBuffer>, least = 0): Int32Array<ArrayBuffer> {
  const b = new Int32Array(Math.max(least, a.length * 2));
  b.set(a);
  return b;
}

/** Bits set in a 32-bit number. */
function bitCount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

/** Whether sentence `sid` holds one of a term's keys `k` (those before index `end` only, when given). */
function holds(index: SourceIndex, sid: number, k: readonly string[], end = k.length): boolean {
  for (let i = 0; i < end; i++) if (index.holds(sid, k[i]!)) return true;
  return false;
}

/**
 * The best window of one sentence or two adjacent sentences of one source that holds the claim's terms, over
 * every sentence that holds any of them: adding a source adds windows and never removes one, so the best can
 * only get better. A window's negation is that of its sentence holding most of the claim's terms, so a negated
 * neighbour does not excuse a claim's added or dropped "not".
 */
function bestPassage(
  index: SourceIndex,
  claim: Claim,
  keys: readonly string[][],
  negated: ReadonlySet<string>,
  hits: Hits,
  /** Terms with a longer posting are not read: asked of the sentences the others find. */
  readUpTo = Infinity,
): { passage: Passage | undefined; read: number } {
  // A term written more than once in the claim (a run-on sentence repeating "the cat" hundreds of times) is looked
  // up once and counts as often as it is written: the same counts as reading each, for the work of the distinct ones.
  const { terms, weights, unit } = distinctTerms(keys);
  hits.reset(index.spans.length, terms.length);
  let read = 0;
  // The terms whose bits say, of every sentence found, whether it holds the term: those whose postings are read
  // whole and which have no key a sentence holds without a posting. The windows ask the index about the others.
  const known = hits.known();
  let asked: number[] | undefined;
  // Terms not read (`readUpTo`): asked of every window, one sentence or two.
  let unread: number[] | undefined;
  for (let ti = 0; ti < terms.length; ti++) {
    const k = terms[ti]!;
    const weight = weights[ti]!;
    const bit = 1 << (ti & 31);
    const word = ti >>> 5;
    if (readUpTo !== Infinity && k.some((key) => index.postingSize(key) > readUpTo)) {
      (unread ??= []).push(ti);
      (asked ??= []).push(ti);
      continue;
    }
    // A sentence holding two of a term's keys (its stem and its spelling) counts once. Its bit says whether it
    // was counted for an earlier key, and so whether it holds one, as long as postings are read whole; past
    // MAX_POSTING they are not, and the bit still keeps the count. A sentence can hold a negation or quantifier
    // word without being in its posting: the index is asked whether it holds an earlier key.
    const cut = k.length > 1 && k.some((key) => index.postingSize(key) > MAX_POSTING);
    const askEarlier = !cut && k.some(heldWithoutPosting);
    let whole = !cut && !askEarlier;
    for (let j = 0; j < k.length; j++) {
      const size = hits.read(index, k[j]!);
      const n = Math.min(size, MAX_POSTING);
      if (size > n) whole = false;
      read += n;
      const sentences = hits.posting;
      for (let i = 0; i < n; i++) {
        const sid = sentences[i]!;
        let slot: number;
        if (askEarlier) {
          if (j > 0 && holds(index, sid, k, j)) continue;
          slot = hits.find(sid);
        } else {
          slot = hits.find(sid);
          const at = slot * hits.words + word;
          if ((hits.masks[at]! & bit) !== 0) continue;
          hits.masks[at]! |= bit;
        }
        hits.counts[slot]! += weight;
      }
    }
    if (whole) known[word]! |= bit;
    else (asked ??= []).push(ti);
  }
  if (hits.size === 0) return { passage: undefined, read };
  let best: Passage | undefined;
  const consider = (from: number, to: number, held: number, anchor: number) => {
    const first = index.spans[from]!;
    const last = index.spans[to]!;
    const mismatch = negationDisagrees(index.negatedSentences.get(anchor), claim, negated);
    const score = held / keys.length - (mismatch ? NEGATION_MISMATCH : 0);
    // Of passages that hold as much, one sentence before two, then the shortest: a copied sentence's own.
    const better =
      !best ||
      score > best.score ||
      (score === best.score && (to - from < best.sentences || (to - from === best.sentences && last.end - first.start < best.end - best.start)));
    if (better) {
      best = { source: first.source, start: first.start, end: last.end, score, negationMismatch: mismatch, sentences: to - from };
    }
  };
  const { words, masks } = hits;
  for (let slot = 0; slot < hits.size; slot++) {
    const sid = hits.sids[slot]!;
    let own = hits.counts[slot]!;
    if (unread) for (const ti of unread) if (holds(index, sid, terms[ti]!)) own += weights[ti]!;
    consider(sid, sid, own, sid);
    // With the next sentence of the same source (the pair with the previous one is the previous one's).
    const next = sid + 1;
    if (next >= index.spans.length || index.spans[next]!.source !== index.spans[sid]!.source) continue;
    // Two rows of a table are two records: "Basic | $40" is not backed by Basic's row and Team's $40 beside it.
    if (index.spans[sid]!.row === 'body' && index.spans[next]!.row) continue;
    const nextSlot = hits.slot(next);
    let theirs = nextSlot < 0 ? 0 : hits.counts[nextSlot]!;
    if (unread) for (const ti of unread) if (holds(index, next, terms[ti]!)) theirs += weights[ti]!;
    let union = 0;
    for (let w = 0; w < words; w++) {
      const either = masks[slot * words + w]! | (nextSlot < 0 ? 0 : masks[nextSlot * words + w]!);
      union += unit ? bitCount(either & known[w]!) : weightOf(either & known[w]!, w, weights);
    }
    if (asked) for (const ti of asked) if (holds(index, sid, terms[ti]!) || holds(index, next, terms[ti]!)) union += weights[ti]!;
    if (union > own && union > theirs) consider(sid, next, union, own >= theirs ? sid : next);
  }
  return { passage: best, read: read + hits.size * terms.length * (unread ? 2 : 1) };
}

/** A claim's terms without repeats (same keys), each with how often the claim has it; `unit` when none repeats. */
function distinctTerms(keys: readonly string[][]): { terms: string[][]; weights: number[]; unit: boolean } {
  const at = new Map<string, number>();
  const terms: string[][] = [];
  const weights: number[] = [];
  for (const k of keys) {
    const id = k.join('|');
    const i = at.get(id);
    if (i !== undefined) weights[i]!++;
    else {
      at.set(id, terms.length);
      terms.push(k);
      weights.push(1);
    }
  }
  return { terms, weights, unit: terms.length === keys.length };
}

/** The summed weights of the terms whose bits are set in `bits`, the `word`th 32 bits of a sentence's. */
function weightOf(bits: number, word: number, weights: readonly number[]): number {
  let sum = 0;
  for (let x = bits; x !== 0; x &= x - 1) sum += weights[word * 32 + 31 - Math.clz32(x & -x)]!;
  return sum;
}
