import { evidenceReader, type Evidence } from './evidence.js';
import { addBigram, buildSourceIndex, contentBigrams, type SourceIndexCache, hasBigram, hasNumber, isContent, type BigramSet, type SourceIndex } from './source-index.js';
import { isWhiteSpace, readNumber, tokenize, type Token } from './tokenize.js';

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

const LOW_CLAIM_COVERAGE = 0.5;

/** Checks run so far: numbers the marks of the stems one check counts (`Posting.check`). */
let checks = 0;

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
  // Each span's text is cut once, by mergeSpans.
  const flag = (first: Token, last: Token, reason: string, score: number, inClause = false): void => {
    const span = { start: first.start, end: last.end, text: '', reason, score };
    spans.push(inClause ? widen(answer, span) : span);
  };

  // Support of each content token: 1 in the sources, RELATED_SUPPORT for a related form, 0 otherwise;
  // NaN for the question's own words, which are neither evidence for nor against, and other tokens.
  const support = new Array<number>(tokens.length).fill(NaN);
  const evidenceOf = evidenceReader(index);
  const evidence: Evidence[] = new Array(tokens.length);
  const claims: Claim[] = [];
  let badNumbers = 0;
  let badEntities = 0;
  let badNegations = 0;
  let badQuantifiers = 0;
  let droppedNegations = 0;

  for (let i = 0; i < tokens.length; ) {
    const t = tokens[i]!;
    // Only a number (digits or a number word) can start a number mention.
    const num = (t.word.value === undefined && t.word.numberWord === undefined) || isListMarker(answer, t) ? undefined : readNumber(tokens, i);
    if (num && t.word.value === undefined && num.values.length === 1 && num.values[0]! < 10) {
      // "two separate entities": small spelled-out counts are usually the writer's own count; they are
      // scored as ordinary words instead of hard number signals.
    } else if (num) {
      const ok = num.values.some((v) => hasNumber(index, v) || asked.numbers.has(v));
      if (!ok) {
        badNumbers++;
        const prev = tokens[i - 1];
        const first = prev && /^[$€£¥]$/.test(prev.word.norm) && prev.end === t.start ? prev : t;
        const lastTok = tokens[num.next - 1]!;
        const after = tokens[num.next];
        const last = after && after.word.norm === '%' && after.start === lastTok.end ? after : lastTok;
        flag(first, last, `number ${answer.slice(t.start, lastTok.end)} is not in the sources`, 0);
      }
      i = num.next;
      continue;
    }
    if (isContent(t) || num) {
      const e = (evidence[i] = evidenceOf(t.word));
      support[i] = !e.inSources && asked.stems.has(t.word.stem) ? NaN : e.support;
    }
    i++;
  }

  // Claims are sentences; each is compared with its best-matching source passage.
  const ballot: Ballot = { votes: new Array<number>(index.sentences.length).fill(0), voted: [] };
  let first = 0;
  for (let i = 1; i <= tokens.length; i++) {
    if (i < tokens.length && tokens[i]!.sentence === tokens[first]!.sentence) continue;
    claims.push(scoreClaim(evidence, support, first, i - 1, ballot));
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
      if (t.word.negation) {
        hasNegation = true;
        if (!window.negated && !asked.negated) {
          badNegations++;
          flag(t, t, `negation '${answer.slice(t.start, t.end)}' is not in the sources`, 0);
        }
      } else if (t.word.quantifier && !asked.stems.has(t.word.norm) && !inWindow(index, window, t.word.norm)) {
        if (!index.stems.has(t.word.norm)) {
          badQuantifiers++;
          flag(t, t, `'${answer.slice(t.start, t.end)}' is not in the sources`, 0);
        }
      }
      if (!Number.isNaN(support[i]!)) {
        localTotal++;
        if (inWindow(index, window, t.word.stem)) local++;
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
  // Source stems the answer uses, each counted once (marked with this check's number).
  const check = ++checks;
  let usedStems = 0;
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
      if (a.word.cap || !lowClaim) flag(a, b, `'${answer.slice(a.start, b.end)}' is not in the sources`, 0, !a.word.cap);
      runStart = -1;
    };
    for (let i = claim.first; i <= claim.last; i++) {
      const s = support[i]!;
      if (Number.isNaN(s)) {
        if (isContent(tokens[i]!) || tokens[i]!.word.value !== undefined) closeRun();
        continue;
      }
      contentWords++;
      unsupportedWords += 1 - s;
      if (s === 0 && tokens[i]!.word.norm.length >= 7) unsupportedLongWords++;
      const posting = evidence[i]!.posting;
      if (s > 0 && posting && posting.check !== check) {
        posting.check = check;
        usedStems++;
      }
      if (s === 0) {
        const prev = runStart >= 0 ? tokens[runEnd]! : undefined;
        const joinable = prev !== undefined && prev.word.cap === tokens[i]!.word.cap && onlyJoiners(answer, prev.end, tokens[i]!.start);
        if (!joinable) {
          closeRun();
          runStart = i;
        }
        runEnd = i;
      } else closeRun();
    }
    closeRun();
  }

  const questionOnly = (i: number): boolean => i >= 0 && Number.isNaN(support[i]!) && tokens[i]!.word.value === undefined;
  let bigrams = 0;
  let bigramMisses = 0;
  contentBigrams(tokens, (a, b, second) => {
    if (questionOnly(second)) return;
    bigrams++;
    const inSources = evidenceOf(a.word).successors?.has(b.word.stem) ?? false;
    if (!inSources && !hasBigram(asked.bigrams, a.word.stem, b.word.stem)) bigramMisses++;
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
      index.postings.size > 0 ? usedStems / index.postings.size : 0,
      Math.log((contentWords + 1) / (index.contentWords + 1)),
      unsupportedLongWords,
      Math.log1p(index.contentWords),
    ],
    contentWords,
    spans: finalSpans,
  };
}

/** The clause around a span: what a reader needs to see the unsupported words in context. */
function widen(answer: string, span: FlaggedSpan): FlaggedSpan {
  let start = span.start;
  while (start > 0 && !isClauseBreak(answer.charCodeAt(start - 1))) start--;
  let end = span.end;
  while (end < answer.length && !isClauseBreak(answer.charCodeAt(end))) end++;
  while (start < end && isWhiteSpace(answer.charCodeAt(start))) start++;
  while (end > start && isWhiteSpace(answer.charCodeAt(end - 1))) end--;
  return { start, end, text: '', reason: span.reason, score: span.score };
}

const ASCII_CLAUSE_BREAKS = new Uint8Array(128);
for (const ch of ',;:.!?()\n"') ASCII_CLAUSE_BREAKS[ch.charCodeAt(0)] = 1;

/** , ; : . ! ? ( ) line feed " “ ” */
function isClauseBreak(c: number): boolean {
  return c < 128 ? ASCII_CLAUSE_BREAKS[c] === 1 : c === 0x201c || c === 0x201d;
}

/** Is `text[from, to)` white space, hyphens and dashes only (words of one phrase)? */
function onlyJoiners(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (!(c === 45 || c === 0x2013 || isWhiteSpace(c))) return false;
  }
  return true;
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
  const next = text.charCodeAt(t.end);
  if (t.word.value === undefined || !(next === 46 || next === 41)) return false;
  const lineStart = text.lastIndexOf('\n', t.start - 1) + 1;
  return /^[\s*#-]*$/.test(text.slice(lineStart, t.start));
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

/** A run of unsupported words is an entity when capitalised and not merely sentence-initial. */
function isEntity(t: Token, next: Token | undefined, claimWords: number): boolean {
  if (!t.word.cap) return false;
  // A capitalised sentence opener is a name when the sentence is short ("Lutheran.") or the name goes on.
  return !t.sentenceStart || claimWords <= 3 || (next !== undefined && next.word.cap && next.sentence === t.sentence);
}

/**
 * Scratch space of `scoreClaim`, one per check: votes per source sentence and the sentences voted for,
 * cleared after each claim.
 */
interface Ballot {
  votes: number[];
  voted: number[];
}

function scoreClaim(evidence: readonly Evidence[], support: readonly number[], first: number, last: number, ballot: Ballot): Claim {
  const { votes, voted } = ballot;
  let content = 0;
  let sum = 0;
  for (let i = first; i <= last; i++) {
    const s = support[i]!;
    if (Number.isNaN(s)) continue;
    content++;
    sum += s;
    const list = evidence[i]!.posting?.sentences;
    // Very common words say little about which passage a claim comes from.
    if (!list || list.length > 64) continue;
    const w = 1 / list.length;
    for (const sid of list) {
      if (votes[sid] === 0) voted.push(sid);
      votes[sid] = votes[sid]! + 1 + w;
    }
  }
  // Most votes; the first passage among equals.
  let best = -1;
  let bestVotes = 0;
  for (const sid of voted) {
    const v = votes[sid]!;
    if (v > bestVotes || (v === bestVotes && sid < best)) {
      best = sid;
      bestVotes = v;
    }
    votes[sid] = 0;
  }
  voted.length = 0;
  return { first, last, content, support: sum, best };
}

/** The best passage and its neighbours (sentences `first..last`): summaries often merge adjacent sentences. */
interface Window {
  first: number;
  last: number;
  negated: boolean;
}

function claimWindow(index: SourceIndex, best: number): Window {
  if (best < 0) return { first: 0, last: -1, negated: false };
  const first = Math.max(0, best - 1);
  const last = Math.min(index.sentences.length - 1, best + 1);
  let negated = false;
  for (let sid = first; sid <= last; sid++) if (index.negatedSentences.has(sid)) negated = true;
  return { first, last, negated };
}

function inWindow(index: SourceIndex, window: Window, word: string): boolean {
  for (let sid = window.first; sid <= window.last; sid++) if (index.sentences[sid]!.has(word)) return true;
  return false;
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
    terms.stems.add(t.word.stem);
    terms.stems.add(t.word.norm);
    if (t.word.negation) terms.negated = true;
    const num = readNumber(tokens, i);
    if (num) for (const v of num.values) terms.numbers.add(v);
  }
  contentBigrams(tokens, (a, b) => addBigram(terms.bigrams, a.word.stem, b.word.stem));
  return terms;
}
