import { CHATTER_WORDS, NEGATIONS } from './lexicon.js';
import { readNumber, tokenize, type Token } from './tokenize.js';

/** What a claim asserts that can be checked word by word. */
export type TermKind = 'word' | 'name' | 'number';

/** A checkable unit of a claim: a content word, a name or a number mention (which may span tokens). */
export interface Term {
  kind: TermKind;
  /** UTF-16 offsets into the answer. */
  start: number;
  end: number;
  /** The first token (for look-ups). */
  token: Token;
  /** Number mentions: the values the mention can stand for ("160 million" → 160 and 160,000,000). */
  values?: number[];
}

/** One sentence of the answer that asserts something. */
export interface Claim {
  /** UTF-16 offsets into the answer (the sentence without a leading interjection). */
  start: number;
  end: number;
  terms: Term[];
  /** The claim's negation cues ("not", "never", "n't"), with offsets. */
  negations: Token[];
}

// Sentences that talk to the user rather than about the world: offers of help, thanks, hedges.
const CHATTER_SENTENCE = new RegExp(
  '^(?:' +
    [
      "(?:i'?m |i am |i'?d be |i would be |always )?(?:happy|glad|here) to help",
      "(?:i'?m|i am) not (?:sure|certain)",
      'no problem',
      'my pleasure',
      'good luck',
      'have a (?:nice|great|good|lovely) (?:day|evening|weekend)',
      '(?:i )?hope you (?:enjoy|like|find)',
      "i (?:do not|don'?t) (?:know|remember)",
      'i hope (?:this|that|it) helps',
      'hope (?:this|that|it) helps',
      '(?:please )?(?:let me know|feel free)',
      'is there anything else',
      'anything else',
      '(?:that is|that\'s|what) a (?:good|great) question',
      '(?:good|great|excellent|interesting) question',
      'thanks? (?:you )?for (?:asking|the question)',
      "you'?re welcome",
    ].join('|') +
    ')\\b',
  'i',
);

/**
 * The answer's claims: its sentences, minus conversation that asserts nothing about the sources (greetings,
 * "Sure," openers, offers of help, hedges, questions back to the user). A sentence with no content word, name
 * or number asserts nothing checkable either.
 */
export function splitClaims(answer: string): Claim[] {
  const tokens = tokenize(answer);
  const claims: Claim[] = [];
  let i = 0;
  while (i < tokens.length) {
    let j = i;
    while (j < tokens.length && tokens[j]!.sentence === tokens[i]!.sentence) j++;
    const claim = readClaim(answer, tokens, i, j);
    if (claim) claims.push(claim);
    i = j;
  }
  return claims;
}

function readClaim(answer: string, tokens: readonly Token[], from: number, to: number): Claim | undefined {
  // A leading interjection ("Yeah,", "Sure!", "Well,") is conversation, not part of the claim.
  let first = from;
  while (first < to && CHATTER_WORDS.has(tokens[first]!.word.norm)) first++;
  if (first === to) return undefined;
  const start = tokens[first]!.start;
  const last = tokens[to - 1]!;
  let end = last.end;
  // Include closing punctuation so the claim reads as a sentence.
  while (end < answer.length && /[.!?)"'\u201d\u2019\]]/.test(answer[end]!)) end++;
  const text = answer.slice(start, end);
  if (/\?\s*["'\u201d\u2019)]*$/.test(text)) return undefined; // a question back to the user claims nothing
  if (CHATTER_SENTENCE.test(text)) return undefined;
  const terms: Term[] = [];
  const negations: Token[] = [];
  for (let k = first; k < to; k++) {
    const t = tokens[k]!;
    const w = t.word;
    if (w.negation) negations.push(t);
    if (w.value !== undefined || (w.numberWord !== undefined && w.norm !== 'one' && w.norm !== 'single' && w.norm !== 'half')) {
      const num = readNumber(tokens, k);
      if (num) {
        // List markers ("1." opening a line) are layout, not claims.
        if (!(t.sentenceStart && w.value !== undefined && answer[t.end] === '.' && /\s/.test(answer[t.end + 1] ?? ' '))) {
          terms.push({ kind: 'number', start: t.start, end: tokens[num.next - 1]!.end, token: t, values: num.values });
        }
        k = num.next - 1;
        continue;
      }
    }
    if (!w.content || NEGATIONS.has(w.norm) || (!w.cap && CHATTER_WORDS.has(w.norm))) continue;
    terms.push({ kind: w.cap && k !== first ? 'name' : 'word', start: t.start, end: t.end, token: t });
  }
  if (terms.length === 0) return undefined;
  return { start, end, terms, negations };
}

