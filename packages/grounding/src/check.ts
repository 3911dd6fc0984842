import { CLOSING, splitClaims, wrappedLineParts } from './claims.js';
import { LINK_NAMES } from './links.js';
import { claimSupport, DEFAULT_MODEL, PERFECT, type ClaimMeasures, type Model } from './model.js';
import { STOPWORDS } from './lexicon.js';
import { buildSourceIndex, type SourceIndexCache } from './source-index.js';
import { tokenize } from './tokenize.js';
import { PassageSearch, questionTerms, supportClaim, type ClaimSupport } from './support.js';

/** Scores at or above this are `grounded`. */
export const DEFAULT_GROUNDING_THRESHOLD = 0.5;

/**
 * Work per check is bounded whatever the input: sources past this many UTF-16 units (all texts together, in
 * order) and answer (and question) text past its own bound are not read. Text left unread supports nothing and is not
 * checked; `truncated` says when that happened.
 */
export const MAX_SOURCE_CHARS = 128_000;
export const MAX_ANSWER_CHARS = 16_000;

export interface GroundingInput {
  /** Texts the answer may rely on (system, user and tool messages). */
  sources: readonly string[];
  /** The text to check. */
  answer: string;
  /** The user's question; its words are never taken as evidence of hallucination. */
  question?: string | undefined;
}

export interface GroundingOptions {
  /** Minimum score for `grounded`; defaults to DEFAULT_GROUNDING_THRESHOLD. */
  threshold?: number;
  /** Calibration; defaults to DEFAULT_MODEL. */
  model?: Model;
  /** Reuse the index of sources seen before (same texts → same result, less CPU). */
  sourceIndexCache?: SourceIndexCache;
}

/** A phrase of the answer the sources do not support. Spans never overlap. */
export interface FlaggedSpan {
  /** UTF-16 offsets into the answer; `text === answer.slice(start, end)`. */
  start: number;
  end: number;
  text: string;
  reason: string;
  /** Support of the phrase in 0..1 (0: nothing in the sources backs it). */
  score: number;
}

/** The passage of a source that best supports a claim. */
export interface Evidence {
  /** Index into `sources`. */
  source: number;
  /** UTF-16 offsets into `sources[source]`; `text === sources[source].slice(start, end)`. */
  start: number;
  end: number;
  text: string;
  /** Share of the claim's words, names and numbers the passage holds (less a penalty when it disagrees on negation). */
  score: number;
}

/** One checkable sentence of the answer and how well the sources support it. */
export interface ClaimResult {
  /** UTF-16 offsets into the answer; `text === answer.slice(start, end)`. */
  start: number;
  end: number;
  text: string;
  /** Support in 0..1. */
  score: number;
  grounded: boolean;
  /** The best supporting passage, or null when no source sentence shares a word with the claim. */
  evidence: Evidence | null;
}

export interface GroundingResult {
  /**
   * False when there was nothing to check: no answer text, or no source that states anything (none, or only
   * greetings, thanks and questions: "Hello", "Who wrote Hamlet?").
   */
  checked: boolean;
  /** `score >= threshold`; true when not checked or when the answer makes no checkable claim. */
  grounded: boolean;
  /** Support in 0..1, 1 = fully supported; 1 when not checked or when there is no claim. */
  score: number;
  /** Unsupported phrases of the claims that are not grounded, ordered by position, never overlapping. */
  flaggedSpans: FlaggedSpan[];
  /** Every checkable claim of the answer, in order, with its evidence. */
  claims: ClaimResult[];
  /** Some of the sources or the answer was past the size bounds and was not read. */
  truncated?: boolean;
}

// How much each claim's shortfall lowers the score beyond the weakest claim's: enough that weakening any claim
// lowers the score; measured from a claim the sources hold entirely, so any number of such claims costs nothing.
const SHORTFALL_WEIGHT = 0.02;

/**
 * Sources this short (in all) are read as claims to see whether they state anything; longer ones are taken as
 * documents. Reading them costs about as much as checking a claim, so only a chat-sized turn is read.
 */
const CONVERSATION_CHARS = 500;

/**
 * A request or an instruction to the assistant: a sentence that opens with a verb asking for something to be made
 * or said ("Write a poem about the sea.", "Tell me a joke.", "Describe the picture."), a rule for how to answer
 * ("Answer concisely.", "Be brief."), or the persona a system message gives ("You are a helpful
 * assistant."), with no colon after which it would go on to state what to work on ("Summarize: the meeting is at
 * 3 pm." states something), nor a line break before a line of data ("Summarize the notes below\nthe meeting moved
 * to 3 pm"). It asks or directs; it states nothing an answer could be checked against. Imperatives
 * that a manual gives its reader ("Do not open the door while it drains.", "Use a soft cloth.") are statements to
 * check against, so only verbs that ask the assistant to make or say something are here.
 */
const REQUEST = new RegExp(
  '^(?:(?:please|now|then|ok|okay|so|always|never|also|just|kindly),? )*(?:(?:' +
    [
      'write', 'tell', 'describe', 'explain', 'summari[sz]e', 'translate', 'give', 'generate', 'create', 'compose',
      'suggest', 'recommend', 'brainstorm', 'imagine', 'pretend', 'invent', 'make up', 'come up with', 'rewrite',
      'paraphrase', 'continue', 'teach', 'define', 'compare', 'sing', 'act as', 'roleplay', 'choose', 'calculate',
      'solve', 'analy[sz]e', 'proofread', 'improve', 'shorten', 'expand', 'greet', 'introduce', 'say', 'respond',
      'implement', 'refactor', '(?:answer|reply) (?:concisely|briefly|clearly|honestly|politely|only|in|with|using|as|like)',
      'be (?:concise|brief|short|clear|precise|helpful|polite|friendly|honest|succinct|creative)',
      "you(?: are|'re) (?:a|an|the)", 'your (?:name|role|task|job|goal) is',
    ].join('|') +
    // Verbs that are also nouns ("Plan Basic costs $10.", "Review scores rose.", "Code 42 means …") ask only
    // when what follows is their object: a determiner, a pronoun or a question word.
    ')|(?:' +
    ['list', 'name', 'plan', 'design', 'outline', 'show', 'help', 'review', 'rate', 'rank', 'pick', 'fix', 'correct',
      'draft', 'answer', 'reply', 'code', 'draw', 'play', 'guess', 'critique', 'think of', 'convert'].join('|') +
    ') (?:the|a|an|me|us|my|our|this|that|these|those|it|them|some|all|each|every|one|two|three|four|five|ten|how|what|why|when|where|which|who))' +
    // Nor after a line break before a line of data (a number, a table's cell, a CSV field): the material it is
    // about, set apart by the line break alone ("Summarize the notes below\nthe meeting moved to 3 pm").
    '\\b(?:[^:\\n]|\\n(?![^\\n]*(?:\\p{N}|\\||\\t|,\\S)))*$',
  'iu',
);

/**
 * Do the sources state nothing: only greetings, thanks, questions, requests and instructions ("Hello", "Who
 * wrote Hamlet?", "Write a poem about the sea.", "You are a helpful assistant.")? Then there is nothing to check
 * an answer against, and grading it against the greeting or the request would flag every word of it.
 */
export function onlyConversation(sources: readonly string[]): boolean {
  let chars = 0;
  for (const source of sources) chars += source.length;
  if (chars > CONVERSATION_CHARS) return false;
  return sources.every((source) => {
    const claims = splitClaims(source);
    // A title with nothing under it ("# esbuild") names what the document is about: it is no greeting, and an
    // answer about something else is checked against it.
    if (claims.length === 0) return !MARKDOWN_HEADING.test(source);
    return claims.every((claim) => REQUEST.test(source.slice(claim.start, claim.end).trim()));
  });
}

const MARKDOWN_HEADING = /^[ \t]{0,3}#{1,6}[ \t]+\S/m;

/** A request to translate: "Translate to French: …", "Can you translate this into German?". */
const TRANSLATE = /\btranslat(?:e|es|ed|ing|ion)\b/iu;

/** Share of a translation's words (not its numbers) that the sources may have: names and loanwords. */
const TRANSLATED_WORDS = 0.5;

/**
 * Shares of English function words: English prose is a quarter to a half function words ("Our office is closed on
 * public holidays.": 0.29, "The meeting is at 3 pm in room 4.": 0.57); French, German or Spanish prose an eighth
 * at most (words spelled alike: "an", "a"), Japanese none.
 */
const ENGLISH = 0.25;
const NOT_ENGLISH = 0.15;

/** Share of a text's words that are English function words (STOPWORDS). */
function functionWordShare(text: string): number {
  let words = 0;
  let functionWords = 0;
  for (const t of tokenize(text)) {
    if (t.word.value !== undefined || !/\p{L}/u.test(t.word.norm)) continue;
    words++;
    if (STOPWORDS.has(t.word.norm)) functionWords++;
  }
  return words === 0 ? 0 : functionWords / words;
}

/**
 * Is the answer a translation out of English: asked for ("translate" in the question, which is English), not
 * English itself, and most of its words in no source? A translation cannot be checked word by word against its
 * original; only its numbers can.
 */
function translation(question: string | undefined, answer: string, supports: readonly ClaimSupport[]): boolean {
  if (question === undefined || !TRANSLATE.test(question)) return false;
  if (functionWordShare(answer) >= NOT_ENGLISH || functionWordShare(question) < ENGLISH) return false;
  let words = 0;
  let found = 0;
  for (const c of supports) {
    for (const t of c.terms) {
      if (t.term.kind === 'number') continue;
      words++;
      if (t.support > 0) found++;
    }
  }
  return words > 0 && found < words * TRANSLATED_WORDS;
}

/** A claim judged by its numbers alone (its score then is PERFECT's but for the numbers no source has). */
function numbersOnly(c: ClaimSupport): ClaimSupport {
  return { ...c, terms: c.terms.filter((t) => t.term.kind === 'number'), unsupportedNames: 0, unsupportedWords: 0 };
}

/** One way `checkGrounding` reads a claim: the measures it scores, and the support whose phrases it flags. */
export interface ClaimReading {
  measures: ClaimMeasures;
  support: ClaimSupport;
}

/** What `checkGrounding` reads of an input before it scores it (the calibration's evaluation reads the same). */
export type ReadClaims =
  | { checked: false; truncated: boolean }
  | {
      checked: true;
      truncated: boolean;
      sources: readonly string[];
      answer: string;
      /** Each claim as a whole: its span and its evidence. */
      supports: ClaimSupport[];
      /** Each claim's readings, the claim as a whole first, then its wrapped lines: the claim is scored by its weakest. */
      readings: ClaimReading[][];
    };

/**
 * The claims of an answer and the measures each is scored by, exactly as `checkGrounding` reads them: the input cut
 * to its bounds, nothing to check when the answer has no word or the sources state nothing, a translation judged by
 * its numbers alone, and a claim over wrapped lines read also line by line. The evaluation scores rows from these,
 * so its figures are the check's.
 */
export function readClaims(input: GroundingInput, sourceIndexCache?: SourceIndexCache): ReadClaims {
  const { input: read, truncated } = boundedInput(input);
  const { sources, answer } = read;
  if (!/[\p{L}\p{N}]/u.test(answer)) return { checked: false, truncated };
  if (onlyConversation(sources)) return { checked: false, truncated };
  const index = sourceIndexCache ? sourceIndexCache.get(sources) : buildSourceIndex(sources);
  if (index.empty) return { checked: false, truncated };
  const question = questionTerms(read.question);
  const search = new PassageSearch();
  const split = splitClaims(answer);
  let supports = split.map((claim) => supportClaim(index, question, claim, search, sources));
  const translated = translation(read.question, answer, supports);
  if (translated) supports = supports.map(numbersOnly);
  const readings = supports.map((c, i): ClaimReading[] => {
    if (translated) return [{ measures: { ...PERFECT, unsupportedNumbers: c.unsupportedNumbers }, support: c }];
    const parts = wrappedLineParts(answer, split[i]!).map((part) => {
      const p = supportClaim(index, question, part, search, sources);
      return { measures: p, support: p };
    });
    return [{ measures: c, support: c }, ...parts];
  });
  return { checked: true, truncated, sources, answer, supports, readings };
}

/**
 * Checks whether `answer` is supported by `sources`, offline and in well under a millisecond for chat-sized
 * inputs. The answer is split into claims (sentences that assert something: greetings, offers of help and
 * questions back are not claims); each claim is scored by how much of it the sources hold, anywhere and in
 * one passage, and by the numbers and names it has that no source has. The answer is as grounded as its
 * weakest claim. Pure: no I/O, no state between calls (beyond the optional index cache, which does not
 * change results).
 *
 * @example
 * const r = checkGrounding({
 *   sources: ['The Oberoi Group is a hotel company with its head office in Delhi.'],
 *   question: 'Where is the head office of the Oberoi Group?',
 *   answer: 'The head office is in Mumbai.',
 * });
 * r.grounded; // false
 * r.flaggedSpans.map((s) => s.text); // ['Mumbai']
 * r.claims[0]?.evidence?.text; // 'The Oberoi Group is a hotel company with its head office in Delhi.'
 */
export function checkGrounding(input: GroundingInput, options: GroundingOptions = {}): GroundingResult {
  const threshold = options.threshold ?? DEFAULT_GROUNDING_THRESHOLD;
  const model = options.model ?? DEFAULT_MODEL;
  const read = readClaims(input, options.sourceIndexCache);
  const truncated = read.truncated;
  if (!read.checked) return { checked: false, grounded: true, score: 1, flaggedSpans: [], claims: [] };
  const { sources, answer, supports } = read;
  // A claim over wrapped lines is as supported as its weakest line (`wrappedLineParts`), and that line's phrases are
  // what a UI shows when it is flagged.
  const scores: number[] = [];
  const shown: ClaimSupport[] = [];
  for (const readings of read.readings) {
    let low = Infinity;
    let weakest = readings[0]!;
    for (const r of readings) {
      const s = claimSupport(model, r.measures);
      if (s < low) {
        low = s;
        weakest = r;
      }
    }
    scores.push(low);
    shown.push(weakest.support);
  }
  const score = round(aggregate(scores, claimSupport(model, PERFECT)));
  const claims: ClaimResult[] = [];
  const flaggedSpans: FlaggedSpan[] = [];
  for (let i = 0; i < supports.length; i++) {
    const c = supports[i]!;
    const s = round(scores[i]!);
    const passage = c.passage;
    claims.push({
      start: c.claim.start,
      end: c.claim.end,
      text: answer.slice(c.claim.start, c.claim.end),
      score: s,
      grounded: s >= threshold,
      evidence: passage
        ? evidenceOf(sources[passage.source]!, passage.source, passage.start, passage.end, passage.score)
        : null,
    });
    if (s < threshold) flaggedSpans.push(...spansOf(answer, shown[i]!, s));
  }
  // Claims each just above the threshold can add up to an answer below it: the weakest is then what a UI
  // shows as the reason.
  if (score < threshold && flaggedSpans.length === 0 && supports.length > 0) {
    let weakest = 0;
    for (let i = 1; i < scores.length; i++) if (scores[i]! < scores[weakest]!) weakest = i;
    flaggedSpans.push(...spansOf(answer, shown[weakest]!, round(scores[weakest]!)));
  }
  const result: GroundingResult = { checked: true, grounded: score >= threshold, score, flaggedSpans, claims };
  if (truncated) result.truncated = true;
  return result;
}

/**
 * The highest score an answer can get when one of its claims has a number or a name that no source has (the
 * claim's other measures as good as they get). The calibration puts it below DEFAULT_GROUNDING_THRESHOLD, so
 * that one such term flags its claim; a threshold at or below it lets such a claim through.
 *
 * @example
 * unsupportedTermScore(); // 0.432
 */
export function unsupportedTermScore(model: Model = DEFAULT_MODEL): number {
  const ceiling = claimSupport(model, PERFECT);
  const number = aggregate([claimSupport(model, { ...PERFECT, unsupportedNumbers: 1 })], ceiling);
  const name = aggregate([claimSupport(model, { ...PERFECT, unsupportedNames: 1 })], ceiling);
  return round(Math.max(number, name));
}

/**
 * The weakest claim's support, lowered a little by every other claim's shortfall from `ceiling` (the support of a
 * claim the sources hold entirely). Adding a claim or weakening one never raises it; an answer with no claim has
 * nothing unsupported (1).
 */
export function aggregate(scores: readonly number[], ceiling = 1): number {
  if (scores.length === 0) return 1;
  let min = 1;
  let logSum = 0;
  for (const s of scores) {
    min = Math.min(min, s);
    logSum += Math.log(Math.min(1, Math.max(s, 1e-9) / ceiling));
  }
  return min * Math.exp(SHORTFALL_WEIGHT * logSum);
}

/**
 * What `checkGrounding` reads of an input: sources up to MAX_SOURCE_CHARS (all texts, in order), the answer and
 * the question up to MAX_ANSWER_CHARS (a pasted document in the question is also a source, and read there).
 * A caller that hands the input on (to a worker thread) can cut it first and copy no more than is read.
 */
export function boundedInput(input: GroundingInput): { input: GroundingInput; truncated: boolean } {
  let total = 0;
  for (const s of input.sources) total += s.length;
  let sources = input.sources;
  if (total > MAX_SOURCE_CHARS) {
    const kept: string[] = [];
    let budget = MAX_SOURCE_CHARS;
    for (const s of input.sources) {
      kept.push(s.length <= budget ? s : s.slice(0, budget));
      budget -= Math.min(budget, s.length);
    }
    sources = kept;
  }
  const cut = (text: string) => (text.length > MAX_ANSWER_CHARS ? text.slice(0, MAX_ANSWER_CHARS) : text);
  const answer = cut(input.answer);
  return {
    input: { sources, answer, question: input.question === undefined ? undefined : cut(input.question) },
    truncated: sources !== input.sources || answer.length < input.answer.length,
  };
}

/** The passage as a reader sees it: through its closing punctuation. */
function evidenceOf(text: string, source: number, start: number, end: number, score: number): Evidence {
  let e = end;
  while (e < text.length && CLOSING.test(text[e]!)) e++;
  return { source, start, end: e, text: text.slice(start, e), score: round(Math.max(0, score)) };
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

const PHRASE_BREAK = /[,;:()[\]{}"“”!?]/;
const CLAIM_MARKUP = /[\s>*_`"#|]/;

/** The unsupported phrases of a claim: numbers, runs of names, runs of other words, or the claim itself. */
function spansOf(answer: string, c: ClaimSupport, claimScore: number): FlaggedSpan[] {
  const out: FlaggedSpan[] = [];
  // A date's month, a link or a missing negation keeps its own reason: never joined with a word it touches (`joinTouching`).
  const own = new Set<FlaggedSpan>();
  const span = (start: number, end: number, reason: string, score: number, apart = false) => {
    const s = { start, end, text: answer.slice(start, end), reason, score };
    out.push(s);
    if (apart) own.add(s);
  };
  let run: { start: number; end: number; kind: string } | undefined;
  const close = () => {
    if (!run) return;
    const text = answer.slice(run.start, run.end);
    span(run.start, run.end, run.kind === 'name' ? `'${text}' is not in the sources` : 'not in the sources', 0);
    run = undefined;
  };
  for (const { term, support } of c.terms) {
    if (support > 0) {
      close();
      continue;
    }
    if (term.kind === 'number') {
      close();
      const reason = term.month === undefined ? `number ${answer.slice(term.start, term.end)}` : `the date's month ${answer.slice(term.start, term.end)}`;
      span(term.start, term.end, `${reason} is not in the sources`, 0, term.month !== undefined);
      continue;
    }
    if (term.link) {
      close();
      span(term.start, term.end, `${LINK_NAMES[term.link.kind]} not in the sources`, 0, true);
      continue;
    }
    // Words of one kind with only spaces or function words between them form one phrase; punctuation ends it
    // ("SVC_UPSTREAM_BASE_URL (and …" is two phrases).
    if (run && run.kind === term.kind && !PHRASE_BREAK.test(answer.slice(run.end, term.start))) run.end = term.end;
    else {
      close();
      run = { start: term.start, end: term.end, kind: term.kind };
    }
  }
  close();
  if (c.passage?.negationMismatch && c.claim.negations.length > 0) {
    for (const t of c.claim.negations) {
      if (!out.some((s) => s.start < t.end && t.start < s.end)) span(t.start, t.end, 'the closest source passage has no such negation', 0, true);
    }
  }
  if (out.length === 0) {
    // The claim itself, without the markup around it (a closing backtick or emphasis its end takes in).
    let start = c.claim.start;
    let end = c.claim.end;
    while (end > start && CLAIM_MARKUP.test(answer[end - 1]!)) end--;
    while (start < end && CLAIM_MARKUP.test(answer[start]!)) start++;
    span(start, end > start ? end : c.claim.end, `little support (${claimScore.toFixed(2)})`, claimScore);
  }
  return joinTouching(answer, out.sort((a, b) => a.start - b.start), own);
}

/**
 * Spans that touch within one token ("10x", a number then a word) become one span of the token: a UI draws one
 * mark, and the reader gets one reason for the word they see, not "number 10" and "x" side by side.
 */
function joinTouching(answer: string, spans: FlaggedSpan[], apart: ReadonlySet<FlaggedSpan>): FlaggedSpan[] {
  const out: FlaggedSpan[] = [];
  for (const s of spans) {
    const last = out[out.length - 1];
    if (last && last.end === s.start && !apart.has(last) && !apart.has(s)) {
      const text = answer.slice(last.start, s.end);
      out[out.length - 1] = { start: last.start, end: s.end, text, reason: `'${text}' is not in the sources`, score: Math.min(last.score, s.score) };
    } else out.push(s);
  }
  return out;
}
