import type { Claim, Term } from './claims.js';
import { hasNumber, numberKey, PREFIX_LEN, type SourceIndex } from './source-index.js';
import { tokenize, readNumber } from './tokenize.js';

/** Support of a word related to a source word ("Australian" in "Australian-British"). */
export const RELATED_SUPPORT = 0.6;

/** Penalty on a passage's coverage when the claim and the passage disagree on negation. */
export const NEGATION_MISMATCH = 0.5;

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
}

export function questionTerms(question: string | undefined): QuestionTerms {
  const stems = new Set<string>();
  const numbers = new Set<number>();
  if (question) {
    const tokens = tokenize(question);
    for (let i = 0; i < tokens.length; i++) {
      const w = tokens[i]!.word;
      stems.add(w.stem);
      stems.add(w.norm);
      if (w.value !== undefined || w.numberWord !== undefined) for (const v of readNumber(tokens, i)?.values ?? []) numbers.add(v);
    }
  }
  return { stems, numbers };
}

/** Candidate sentences kept for the passage search, by how many of the claim's terms they hold. */
const CANDIDATES = 8;

/**
 * Measures how well the sources support one claim. Every measure is monotone in the sources: adding a
 * source can only find more terms and better passages, never fewer.
 */
export function supportClaim(index: SourceIndex, question: QuestionTerms, claim: Claim): ClaimSupport {
  const terms: TermSupport[] = [];
  let covered = 0;
  let unsupportedNumbers = 0;
  let unsupportedNames = 0;
  let unsupportedWords = 0;
  for (const term of claim.terms) {
    const support = termSupport(index, question, term);
    terms.push({ term, support });
    covered += support;
    if (support === 0) {
      if (term.kind === 'number') unsupportedNumbers++;
      else if (term.kind === 'name') unsupportedNames++;
      else unsupportedWords++;
    }
  }
  let pairs = 0;
  let pairsFound = 0;
  for (let i = 1; i < claim.terms.length; i++) {
    const a = claim.terms[i - 1]!;
    const b = claim.terms[i]!;
    if (a.kind === 'number' || b.kind === 'number') continue;
    pairs++;
    if (index.bigrams.get(a.token.word.stem)?.has(b.token.word.stem)) pairsFound++;
  }
  return {
    claim,
    terms,
    pairCoverage: pairs === 0 ? 1 : pairsFound / pairs,
    coverage: covered / claim.terms.length,
    passage: bestPassage(index, claim),
    unsupportedNumbers,
    unsupportedNames,
    unsupportedWords,
  };
}

function termSupport(index: SourceIndex, question: QuestionTerms, term: Term): number {
  if (term.kind === 'number') {
    for (const v of term.values ?? []) if (hasNumber(index, v) || question.numbers.has(v)) return 1;
    return 0;
  }
  const w = term.token.word;
  if (index.stems.has(w.stem) || index.stems.has(w.norm) || question.stems.has(w.stem) || question.stems.has(w.norm)) return 1;
  if (w.norm.length >= 2 && w.norm.length <= 6 && (index.acronyms.has(w.norm) || index.acronyms.has(w.stem))) return 1;
  // A word glued from or derived from a source word ("Australian-British", "producer" for "production").
  if (w.stem.length >= PREFIX_LEN && index.prefixes.has(w.stem.slice(0, PREFIX_LEN))) return RELATED_SUPPORT;
  return 0;
}

/** The keys a term has among a sentence's stems. */
function termKeys(term: Term): string[] {
  if (term.kind === 'number') return (term.values ?? []).map(numberKey);
  const w = term.token.word;
  return w.stem === w.norm ? [w.stem] : [w.stem, w.norm];
}

function bestPassage(index: SourceIndex, claim: Claim): Passage | undefined {
  const keys = claim.terms.map(termKeys);
  // Sentences by the number of the claim's terms they hold, through the postings.
  const hits = new Map<number, number>();
  for (const k of keys) {
    const seen = new Set<number>();
    for (const key of k) {
      const posting = index.postings.get(key);
      if (!posting) continue;
      for (const sid of posting.sentences) {
        if (seen.has(sid)) continue;
        seen.add(sid);
        hits.set(sid, (hits.get(sid) ?? 0) + 1);
      }
    }
  }
  if (hits.size === 0) return undefined;
  const candidates = [...hits].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, CANDIDATES);
  const claimNegated = claim.negations.length > 0;
  let best: Passage | undefined;
  const consider = (from: number, to: number) => {
    const first = index.spans[from];
    const last = index.spans[to];
    if (!first || !last || first.source !== last.source) return;
    let held = 0;
    for (const k of keys) {
      let found = false;
      for (let sid = from; sid <= to && !found; sid++) for (const key of k) if (index.sentences[sid]!.has(key)) found = true;
      if (found) held++;
    }
    let negated = false;
    for (let sid = from; sid <= to; sid++) if (index.negatedSentences.has(sid)) negated = true;
    const mismatch = negated !== claimNegated;
    const score = held / keys.length - (mismatch ? NEGATION_MISMATCH : 0);
    if (!best || score > best.score) best = { source: first.source, start: first.start, end: last.end, score, negationMismatch: mismatch };
  };
  for (const [sid] of candidates) {
    consider(sid, sid);
    consider(sid - 1, sid);
    consider(sid, sid + 1);
  }
  return best;
}
