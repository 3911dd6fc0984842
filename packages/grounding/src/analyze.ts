import { NEGATIONS, QUANTIFIERS } from './lexicon.js';
import { addBigram, buildSourceIndex, contentBigrams, type SourceIndexCache, hasBigram, hasNumber, isContent, PREFIX_LEN, type BigramSet, type SourceIndex } from './source-index.js';
import { readNumber, tokenize, type Token } from './tokenize.js';

/** A part of the answer the sources do not support. */
export interface FlaggedSpan {
  /** UTF-16 offset of the first character in the answer. */
  start: number;
  /** UTF-16 offset after the last character. */
  end: number;
  /** `answer.slice(start, end)`. */
  text: string;
  /** Why it was flagged, e.g. "number 1845 is not in the sources". */
  reason: string;
  /** Support for this span in 0..1 (0 = nothing in the sources backs it). */
  score: number;
}

/** Names of the numeric features, in the order of `Analysis.features`. */
export const FEATURE_NAMES = [
  'unsupportedWords',
  'unsupportedFraction',
  'worstClaimGap',
  'badNumbers',
  'badEntities',
  'badNegations',
  'badQuantifiers',
  'bigramMiss',
  'logContentWords',
  'localMiss',
  'droppedNegations',
  'bigramMisses',
  'sourceCoverage',
  'lengthRatio',
  'unsupportedLongWords',
  'logSourceWords',
] as const;

export interface Analysis {
  features: number[];
  /** Content words of the answer that were scored (the question's own words excluded). */
  contentWords: number;
  spans: FlaggedSpan[];
}

const RELATED_SUPPORT = 0.6;
const LOW_CLAIM_COVERAGE = 0.5;

interface Claim {
  first: number;
  last: number;
  content: number;
  support: number;
  best: number;
}

/**
 * Lexical evidence that `answer` is (not) supported by the sources: a feature vector for the
 * calibrated model and the flagged spans. Returns undefined when there is nothing to check.
 */
export function analyze(sources: readonly string[], answer: string, question?: string, cache?: SourceIndexCache): Analysis | undefined {
  if (!/[\p{L}\p{N}]/u.test(answer)) return undefined;
  const index = cache ? cache.get(sources) : buildSourceIndex(sources);
  if (index.empty) return undefined;
  const tokens = tokenize(answer);
  const asked = questionTerms(question);
  const spans: FlaggedSpan[] = [];
  const flag = (first: Token, last: Token, reason: string, score: number, inClause = false): void => {
    const span = { start: first.start, end: last.end, text: '', reason, score };
    spans.push(inClause ? widen(answer, span) : span);
  };

  // Support of each content token: 1 in the sources, RELATED_SUPPORT for a related form, 0 otherwise;
  // NaN for the question's own words, which are neither evidence for nor against.
  const support = new Float64Array(tokens.length).fill(NaN);
  const claims: Claim[] = [];
  let badNumbers = 0;
  let badEntities = 0;
  let badNegations = 0;
  let badQuantifiers = 0;
  let droppedNegations = 0;

  for (let i = 0; i < tokens.length; ) {
    const t = tokens[i]!;
    const num = isListMarker(answer, t) ? undefined : readNumber(tokens, i);
    if (num && t.value === undefined && num.values.length === 1 && num.values[0]! < 10) {
      // "two separate entities": small spelled-out counts are usually the writer's own count; they are
      // scored as ordinary words instead of hard number signals.
    } else if (num) {
      const ok = num.values.some((v) => hasNumber(index, v) || asked.numbers.has(v));
      if (!ok) {
        badNumbers++;
        const prev = tokens[i - 1];
        const first = prev && /^[$€£¥]$/.test(prev.norm) && prev.end === t.start ? prev : t;
        const lastTok = tokens[num.next - 1]!;
        const after = tokens[num.next];
        const last = after && after.norm === '%' && after.start === lastTok.end ? after : lastTok;
        flag(first, last, `number ${answer.slice(t.start, lastTok.end)} is not in the sources`, 0);
      }
      i = num.next;
      continue;
    }
    if (isContent(t) || num) support[i] = asked.stems.has(t.stem) && !inSources(index, t) ? NaN : tokenSupport(index, t);
    i++;
  }

  // Claims are sentences; each is compared with its best-matching source passage.
  let first = 0;
  for (let i = 1; i <= tokens.length; i++) {
    if (i < tokens.length && tokens[i]!.sentence === tokens[first]!.sentence) continue;
    claims.push(scoreClaim(index, tokens, support, first, i - 1));
    first = i;
  }

  let localMissSum = 0;
  let localClaims = 0;
  for (const claim of claims) {
    const window = claimWindow(index, claim.best);
    let hasNegation = false;
    let local = 0;
    let localTotal = 0;
    for (let i = claim.first; i <= claim.last; i++) {
      const t = tokens[i]!;
      if (NEGATIONS.has(t.norm)) {
        hasNegation = true;
        if (!window.negated && !asked.negated) {
          badNegations++;
          flag(t, t, `negation '${answer.slice(t.start, t.end)}' is not in the sources`, 0);
        }
      } else if (QUANTIFIERS.has(t.norm) && !asked.stems.has(t.norm) && !window.words.has(t.norm)) {
        if (!index.stems.has(t.norm)) {
          badQuantifiers++;
          flag(t, t, `'${answer.slice(t.start, t.end)}' is not in the sources`, 0);
        }
      }
      if (!Number.isNaN(support[i]!)) {
        localTotal++;
        if (window.words.has(t.stem)) local++;
      }
    }
    if (localTotal >= 2) {
      localMissSum += 1 - local / localTotal;
      localClaims++;
    }
    if (!hasNegation && window.negated && claim.content >= 3 && local / Math.max(1, localTotal) >= 0.7) {
      droppedNegations++;
    }
  }

  // Unsupported words, grouped into the smallest phrases; low-coverage claims as a whole.
  let unsupportedWords = 0;
  let unsupportedLongWords = 0;
  let contentWords = 0;
  const usedStems = new Set<string>();
  for (const claim of claims) {
    const coverage = claim.content > 0 ? claim.support / claim.content : 1;
    const lowClaim = claim.content >= 3 && coverage < LOW_CLAIM_COVERAGE;
    if (lowClaim) {
      flag(tokens[claim.first]!, tokens[claim.last]!, `little support (${coverage.toFixed(2)})`, round2(coverage));
    }
    let runStart = -1;
    let runEnd = -1;
    const closeRun = (): void => {
      if (runStart < 0) return;
      const a = tokens[runStart]!;
      const b = tokens[runEnd]!;
      const entity = isEntity(a, tokens[runStart + 1], claim.content);
      if (entity) badEntities += runEnd - runStart + 1;
      // Names are exact; other unsupported words are shown with their clause, where the claim is.
      if (a.cap || !lowClaim) flag(a, b, `'${answer.slice(a.start, b.end)}' is not in the sources`, 0, !a.cap);
      runStart = -1;
    };
    for (let i = claim.first; i <= claim.last; i++) {
      const s = support[i]!;
      if (Number.isNaN(s)) {
        if (isContent(tokens[i]!) || tokens[i]!.value !== undefined) closeRun();
        continue;
      }
      contentWords++;
      unsupportedWords += 1 - s;
      if (s === 0 && tokens[i]!.norm.length >= 7) unsupportedLongWords++;
      if (s > 0) usedStems.add(tokens[i]!.stem);
      if (s === 0) {
        const prev = tokens[runEnd];
        const joinable = runStart >= 0 && prev && prev.cap === tokens[i]!.cap && /^[\s\-–]*$/.test(answer.slice(prev.end, tokens[i]!.start));
        if (!joinable) {
          closeRun();
          runStart = i;
        }
        runEnd = i;
      } else closeRun();
    }
    closeRun();
  }

  const questionOnly = (i: number): boolean => i >= 0 && Number.isNaN(support[i]!) && tokens[i]!.value === undefined;
  let bigrams = 0;
  let bigramMisses = 0;
  contentBigrams(tokens, (a, b, second) => {
    if (questionOnly(second)) return;
    bigrams++;
    if (!hasBigram(index.bigrams, a, b) && !hasBigram(asked.bigrams, a, b)) bigramMisses++;
  });

  let worstClaimGap = 0;
  for (const claim of claims) {
    if (claim.content >= 2) worstClaimGap = Math.max(worstClaimGap, 1 - claim.support / claim.content);
  }

  const finalSpans = mergeSpans(answer, spans);
  return {
    features: [
      unsupportedWords,
      contentWords > 0 ? unsupportedWords / contentWords : 0,
      worstClaimGap,
      badNumbers,
      badEntities,
      badNegations,
      badQuantifiers,
      bigrams > 0 ? bigramMisses / bigrams : 0,
      Math.log1p(contentWords),
      localClaims > 0 ? localMissSum / localClaims : 0,
      droppedNegations,
      bigramMisses,
      index.postings.size > 0 ? countIn(usedStems, index.postings) / index.postings.size : 0,
      Math.log((contentWords + 1) / (index.contentWords + 1)),
      unsupportedLongWords,
      Math.log1p(index.contentWords),
    ],
    contentWords,
    spans: finalSpans,
  };
}

const CLAUSE_BREAK = /[,;:.!?()\n"“”]/;

/** The clause around a span: what a reader needs to see the unsupported words in context. */
function widen(answer: string, span: FlaggedSpan): FlaggedSpan {
  let start = span.start;
  while (start > 0 && !CLAUSE_BREAK.test(answer[start - 1]!)) start--;
  let end = span.end;
  while (end < answer.length && !CLAUSE_BREAK.test(answer[end]!)) end++;
  while (start < end && /\s/.test(answer[start]!)) start++;
  while (end > start && /\s/.test(answer[end - 1]!)) end--;
  return { ...span, start, end, text: answer.slice(start, end) };
}

/** One span per range; reasons of spans on the same range are joined. */
function mergeSpans(answer: string, spans: FlaggedSpan[]): FlaggedSpan[] {
  spans.sort((a, b) => a.start - b.start || b.end - a.end);
  const out: FlaggedSpan[] = [];
  for (const s of spans) {
    const prev = out[out.length - 1];
    if (prev && prev.start === s.start && prev.end === s.end) {
      if (!prev.reason.includes(s.reason)) prev.reason += '; ' + s.reason;
      prev.score = Math.min(prev.score, s.score);
    } else out.push({ ...s, text: answer.slice(s.start, s.end) });
  }
  return out;
}

/** "1." or "2)" opening a line numbers a list item; it is not a claim. */
function isListMarker(text: string, t: Token): boolean {
  if (t.value === undefined || !/^[.)]/.test(text.slice(t.end, t.end + 1))) return false;
  const lineStart = text.lastIndexOf('\n', t.start - 1) + 1;
  return /^[\s*#-]*$/.test(text.slice(lineStart, t.start));
}

function countIn(stems: ReadonlySet<string>, map: ReadonlyMap<string, unknown>): number {
  let n = 0;
  for (const s of stems) if (map.has(s)) n++;
  return n;
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

function inSources(index: SourceIndex, t: Token): boolean {
  return index.stems.has(t.stem) || index.stems.has(t.norm);
}

function tokenSupport(index: SourceIndex, t: Token): number {
  if (inSources(index, t)) return 1;
  if (t.norm.length >= 2 && t.norm.length <= 6 && (index.acronyms.has(t.norm) || index.acronyms.has(t.stem))) return 1;
  // A compound like "Australian-British" is split by the tokenizer; a word glued from source words counts.
  if (t.stem.length >= PREFIX_LEN && index.prefixes.has(t.stem.slice(0, PREFIX_LEN))) return RELATED_SUPPORT;
  return 0;
}

/** A run of unsupported words is an entity when capitalised and not merely sentence-initial. */
function isEntity(t: Token, next: Token | undefined, claimWords: number): boolean {
  if (!t.cap) return false;
  // A capitalised sentence opener is a name when the sentence is short ("Lutheran.") or the name goes on.
  return !t.sentenceStart || claimWords <= 3 || (next !== undefined && next.cap && next.sentence === t.sentence);
}

function scoreClaim(index: SourceIndex, tokens: readonly Token[], support: Float64Array, first: number, last: number): Claim {
  let content = 0;
  let sum = 0;
  const votes = new Map<number, number>();
  for (let i = first; i <= last; i++) {
    const s = support[i]!;
    if (Number.isNaN(s)) continue;
    content++;
    sum += s;
    const list = index.postings.get(tokens[i]!.stem);
    // Very common words say little about which passage a claim comes from.
    if (!list || list.length > 64) continue;
    const w = 1 / list.length;
    for (const sid of list) votes.set(sid, (votes.get(sid) ?? 0) + 1 + w);
  }
  let best = -1;
  let bestVotes = 0;
  for (const [sid, v] of votes) {
    if (v > bestVotes || (v === bestVotes && sid < best)) {
      best = sid;
      bestVotes = v;
    }
  }
  return { first, last, content, support: sum, best };
}

interface Window {
  words: Set<string>;
  negated: boolean;
}

const EMPTY_WINDOW: Window = { words: new Set(), negated: false };

/** The best passage and its neighbours: summaries often merge adjacent sentences. */
function claimWindow(index: SourceIndex, best: number): Window {
  if (best < 0) return EMPTY_WINDOW;
  const words = new Set<string>();
  let negated = false;
  for (let sid = Math.max(0, best - 1); sid <= Math.min(index.sentences.length - 1, best + 1); sid++) {
    for (const w of index.sentences[sid]!) words.add(w);
    if (index.negatedSentences.has(sid)) negated = true;
  }
  return { words, negated };
}

interface QuestionTerms {
  stems: Set<string>;
  bigrams: BigramSet;
  numbers: Set<number>;
  negated: boolean;
}

function questionTerms(question: string | undefined): QuestionTerms {
  const terms: QuestionTerms = { stems: new Set(), bigrams: new Map(), numbers: new Set(), negated: false };
  if (!question) return terms;
  const tokens = tokenize(question);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    terms.stems.add(t.stem);
    terms.stems.add(t.norm);
    if (NEGATIONS.has(t.norm)) terms.negated = true;
    const num = readNumber(tokens, i);
    if (num) for (const v of num.values) terms.numbers.add(v);
  }
  contentBigrams(tokens, (a, b) => addBigram(terms.bigrams, a, b));
  return terms;
}
