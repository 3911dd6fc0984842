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

// Phrases that talk to the user rather than about the world: offers of help, thanks, pleasantries, and hedges
// ("I'm not sure, but he was born in 1813"). Each is stripped from the start of a sentence (with the comma or
// "but" after it); what follows, if anything, is the claim. A hedge's "not" negates no claim.
/** What an answer calls its sources when it points at them: "based on the provided context". */
const SOURCE_NOUNS = '(?:(?:provided|given|above|available|retrieved|attached|supplied) )?(?:context|information|text|document|documents|sources?|passages?|article|excerpt|snippet|knowledge|data)';

const CONVERSATION_PREFIX = new RegExp(
  '^(?:' +
    [
      "(?:i'?m |i am |i'?d be |i would be |always )?(?:happy|glad|here) to help",
      'glad i could help',
      'no problem',
      'my pleasure',
      'of course',
      'good luck',
      'sure thing',
      'have a (?:nice|great|good|lovely) (?:day|evening|weekend)',
      '(?:i )?hope (?:this|that|it) helps',
      '(?:i )?hope you (?:enjoy|like|find)',
      '(?:please )?(?:let me know|feel free)',
      'let me (?:check|see|think|explain)',
      'is there anything else',
      'anything else',
      "(?:that is |that's |what )?a (?:good|great|excellent|interesting) question",
      '(?:good|great|excellent|interesting) question',
      'thanks? (?:you )?(?:so much )?for (?:asking|the question|reaching out|your question)',
      "you'?re welcome",
      "(?:i'?m|i am) not (?:sure|certain)",
      "i (?:do not|don'?t) (?:know|remember)(?: for sure)?",
      'i (?:think|believe|guess|suppose|recall|remember)(?: that)?',
      'to be honest',
      'honestly',
      'as far as i know',
      'if i remember correctly',
      // Pointing at the sources says where the claim comes from, not what it claims.
      `(?:based on|according to) (?:the |this |your )?(?:${SOURCE_NOUNS})`,
      `(?:from|in) (?:the|this) (?:${SOURCE_NOUNS})(?=,)`,
      `(?:the |this )?(?:${SOURCE_NOUNS}) (?:says|states|mentions|shows|notes|indicates|explains)(?: that)?`,
    ].join('|') +
    ')(?=$|[^\\p{L}\\p{N}])[\\s,;:.!-]*(?:(?:but|and|though|so)\\b)?',
  'iu',
);

/** Words that carry only conversation: a sentence left with nothing else ("if you need anything else") asserts nothing. */
const CONVERSATION_WORDS = new Set(
  `anything something else need needs question questions help helps helped asking ask thing things further
assistance want more know let feel free reach hope day luck welcome pleasure problem course check glad happy
sure enjoy find`.split(/\s+/),
);

/**
 * Characters of a claim's start that can hold a conversational prefix, with room to spare: the longest phrase
 * is under 60 characters, and `readable` only shortens text.
 */
const PREFIX_WINDOW = 160;

/**
 * Where the text searched for a conversational prefix ends: at the end of the first token that reaches
 * PREFIX_WINDOW characters past the claim's start (a word's end, where the phrase's own end test holds as it
 * would in the whole claim), or the claim's last token. Rewriting the whole sentence for every claim cost more
 * than the rest of reading it.
 */
function prefixWindowEnd(tokens: readonly Token[], first: number, to: number): number {
  const start = tokens[first]!.start;
  let k = first;
  while (k < to - 1 && tokens[k]!.end - start < PREFIX_WINDOW) k++;
  return tokens[k]!.end;
}

function letterCount(text: string): number {
  return text.match(/[\p{L}\p{N}]/gu)?.length ?? 0;
}

/** The text as a reader means it: " ' " between letters (as in "i ' m", from tokenised corpora) is an apostrophe. */
function readable(text: string): string {
  // Most text has neither: the replacing (a new string, a match per space) is then skipped.
  if (text.includes(" ' ")) text = text.replace(/(\p{L}) ' (\p{L})/gu, "$1'$2");
  return /[^\S ]| \s/.test(text) ? text.replace(/\s+/g, ' ') : text;
}

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
  const last = tokens[to - 1]!;
  // A question back to the user claims nothing (its "?" may stand after a space in tokenised text).
  const after = answer.slice(last.end, tokens[to]?.start ?? answer.length);
  if (/^[\s"'\u201d\u2019)]*\?/.test(after)) return undefined;
  // Conversation at the start ("Yeah,", "Good question!", "I'm not sure, but") is not part of the claim.
  let first = from;
  for (;;) {
    while (first < to && CHATTER_WORDS.has(tokens[first]!.word.norm)) first++;
    if (first === to) return undefined;
    const phrase = CONVERSATION_PREFIX.exec(readable(answer.slice(tokens[first]!.start, prefixWindowEnd(tokens, first, to))));
    if (!phrase || letterCount(phrase[0]) === 0) break;
    // Skip the tokens that spell the phrase: as many letters and digits as it has.
    const letters = letterCount(phrase[0]);
    let skipped = 0;
    while (first < to && skipped < letters) skipped += letterCount(answer.slice(tokens[first]!.start, tokens[first++]!.end));
  }
  const start = tokens[first]!.start;
  let end = last.end;
  // Include closing punctuation so the claim reads as a sentence.
  while (end < answer.length && /[.!?)"'\u201d\u2019\]]/.test(answer[end]!)) end++;
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
        const listMarker = t.sentenceStart && w.value !== undefined && answer[t.end] === '.' && /\s/.test(answer[t.end + 1] ?? ' ');
        // Digits glued to a word ("COVID-19", "Boeing-737") are part of a name, not a quantity.
        const glued = t.start >= 2 && answer[t.start - 1] === '-' && /\p{L}/u.test(answer[t.start - 2]!);
        if (glued) terms.push({ kind: 'name', start: t.start, end: t.end, token: t });
        else if (!listMarker) terms.push({ kind: 'number', start: t.start, end: tokens[num.next - 1]!.end, token: t, values: num.values });
        k = num.next - 1;
        continue;
      }
    }
    if (!w.content || NEGATIONS.has(w.norm) || (!w.cap && CHATTER_WORDS.has(w.norm))) continue;
    terms.push({ kind: w.cap && k !== first ? 'name' : 'word', start: t.start, end: t.end, token: t });
  }
  if (terms.length === 0 || terms.every((t) => t.kind === 'word' && CONVERSATION_WORDS.has(t.token.word.norm))) return undefined;
  return { start, end, terms, negations };
}

