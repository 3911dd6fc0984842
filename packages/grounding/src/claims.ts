import { CHATTER_WORDS, CURRENCIES, MEASURE_UNITS, NEGATIONS, ORDINAL_WORDS, UNITS, type Unit } from './lexicon.js';
import { readCodeBlocks } from './code-blocks.js';
import { findCodeNames, findLinks, type Link } from './links.js';
import { isoMonth, numericDateMonths, ORDINAL_SUFFIX_RE } from './source-index.js';
import { besideNumber, cjkName, durationValues, inCapitals, isNegation, MAX_ACRONYM, NegationScope, readDuration, readNumber, readTime, sentenceBreak, stem, tokenize, type Token } from './tokenize.js';

/** What a claim asserts that can be checked word by word. */
/** A colon after a word: the word labels what follows ("東京: …"), as a heading does, rather than naming it. */
const LABEL_END = /^\s?[:：]/;

export type TermKind = 'word' | 'name' | 'number' | 'link';

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
  /** A name written as an acronym of a function word's letters ("US"): no word pair is read across it. */
  acronym?: true;
  /** A currency beside a number ("$", "euros"): part of the number's mention, so no word pair is read across it. */
  currency?: true;
  /** Links: the web address, e-mail address or phone number (`findLinks`). */
  link?: Link;
  /**
   * Number mentions followed by a unit of data size or time ("2.4 MB", "1.5 seconds"): the figure as written, its
   * decimals, the unit (`UNITS`) and the unit word's offsets. Another unit's number the figure rounds is support.
   */
  unit?: NumberUnit;
  /**
   * The month of an ISO date ("03" in "2024-03-15"), checked as a date's month: found where the sources name
   * that month in a date or in words, not as a bare number. `values` keeps the number only when the date could
   * be a range ("2011-12", the season), as before.
   */
  month?: number;
  /**
   * A number of a date in digits where the month may stand ("03" or "04" in "03/04/2022"): also found where the
   * sources name that month (`monthKey`), as "3 April 2022" does.
   */
  dateMonth?: true;
  /**
   * A time of day ("6 p.m.", "18:00", "9am"): the hours on a 24-hour clock it can be, found where a source names
   * that hour as a time (`hourKey`), not as a bare number. `values` is then empty.
   */
  hours?: number[];
  /** An ordinal in digits ("2nd"): the stem of its word ("second"), which a source may write instead. */
  ordinal?: string;
}

export interface NumberUnit {
  written: number;
  decimals: number;
  unit: Unit;
  start: number;
  end: number;
}

/** One sentence of the answer that asserts something. */
export interface Claim {
  /** UTF-16 offsets into the answer (the sentence without a leading interjection). */
  start: number;
  end: number;
  terms: Term[];
  /** The claim's negation cues ("not", "never", "n't"), with offsets. */
  negations: Token[];
  /** The stems its negations reach (`NegationScope`). */
  negated: ReadonlySet<string>;
}

/**
 * What an answer calls its sources when it points at them: "the provided context", "Source 2", "the search
 * results", "the Wikipedia article".
 */
const SOURCE_NOUNS =
  '(?:(?:provided|given|above|available|retrieved|attached|supplied|search) )?' +
  '(?:(?:context|information|text|documents?|sources?|passages?|excerpts?|snippets?|knowledge|data|results?|references?)(?: #?\\d{1,3})?' +
  '|documentation|docs|manual|(?:\\p{L}+ )?(?:article|page|entry|report|paper|study))';

// Phrases that talk to the user rather than about the world: offers of help, thanks, pleasantries, and hedges
// ("I'm not sure, but he was born in 1813"). Each is stripped from the start of a sentence (with the comma or
// "but" after it); what follows, if anything, is the claim. A hedge's "not" negates no claim.
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
      'good (?:morning|afternoon|evening|night)',
      // The same in the languages users most often write in besides English.
      'merci(?: beaucoup)?|de rien|bonjour|salut|(?:vielen )?dank(?:e)?(?: sch(?:ö|oe)n| sehr)?|gern geschehen|hallo|guten (?:morgen|tag|abend)' +
        '|(?:muchas )?gracias|de nada|hola|buen(?:os|as) (?:d(?:í|i)as|tardes|noches)|grazie(?: mille)?|ciao' +
        '|bien s(?:û|u)r|avec plaisir|d.accord|selbstverst(?:ä|ae)ndlich|nat(?:ü|ue)rlich|(?:aber |sehr )?gerne?|alles klar' +
        '|por supuesto|claro(?: que s(?:í|i))?|con gusto|de acuerdo|certo|volentieri',
      "you'?re welcome",
      "(?:i'?m|i am) not (?:sure|certain)",
      "i (?:do not|don'?t) (?:know|remember)(?: for sure)?",
      'i (?:think|believe|guess|suppose|recall|remember)(?: that)?',
      'to be honest',
      'honestly',
      // "The answer is Paris.": the claim is what follows.
      '(?:so,? )?the (?:short |simple |final |correct |right )?answer (?:to (?:your|this|that|the) question )?(?:is|would be)(?: that)?',
      'tl; ?dr',
      "you(?:'re| are) (?:right|correct) (?:that|about)",
      "(?:i'?m |i am )?(?:so |very )?sorry",
      'as far as i (?:know|can tell)',
      'if i (?:remember|understand) correctly',
      'it (?:seems|appears|looks like)(?: that)?',
      'i (?:could|might|may) be wrong',
      "(?:i'?m|i am) not (?:entirely|completely|totally|100%) (?:sure|certain)",
      // Pointing at the sources says where the claim comes from, not what it claims.
      `(?:based on|according to) (?:the |this |your )?(?:${SOURCE_NOUNS})`,
      `(?:from|in) (?:the|this) (?:${SOURCE_NOUNS})(?=,)`,
      `(?:the |this )?(?:${SOURCE_NOUNS}) (?:says|states|mentions|shows|notes|indicates|explains|suggests|reports)(?: that)?`,
      // "Here's what I found:", "Here is a quick summary:"
      "here(?:'s| is| are) (?:what|the|a|an|my|some)\\b[^.!?:]{0,60}:",
    ].join('|') +
    ')(?=$|[^\\p{L}\\p{N}])[\\s,;:.!-]*(?:(?:but|and|though|so)\\b)?',
  'iu',
);

/**
 * Sentences that talk to the user, whatever follows their opening words up to a clause break: offers and
 * sign-offs ("Let me know if you want the full list."), apologies and acknowledgements ("Sorry for the
 * confusion", "You're right!"), restating the question ("You asked when it opened"). Past a comma, semicolon,
 * colon or dash the sentence may go on to a claim ("I hope this helps, the office is in Delhi."), which is read.
 */
const CHATTER_CLAUSE = new RegExp(
  '^(?:' +
    [
      "(?:please )?(?:let me know|feel free|(?:do not|don'?t) hesitate to (?:ask|contact|reach|let|get in touch))",
      "(?:i'?m |i am |i'?d be |i would be |always )?(?:happy|glad) to help",
      '(?:i )?hope (?:this|that|it|my answer|the above)\\b',
      'good luck',
      // Thanks for anything ("Thank you for your patience."): "Thank" alone would be stripped as an interjection.
      'thanks? (?:you )?(?:so much |very much )?for\\b',
      'take care',
      'have a (?:\\p{L}+ )?(?:day|evening|weekend|time|trip|one)',
      '(?:best|kind|warm) regards',
      'goodbye',
      'bye',
      "if you (?:have|need|want|would like|'d like) (?:any |more |further |other |additional )*(?:questions?|help|information|info|details|assistance|anything)",
      'is there anything else',
      "(?:my )?apolog(?:ies|ize|ise)",
      "(?:i'?m |i am )?(?:so |very |really |truly )?sorry (?:for|about|to hear)",
      // What the assistant will do or understands, not what the sources say: "I'll look into this", "I understand
      // your frustration", "but I can help with general questions".
      "(?:(?:but|and|so) )?i(?:'ll| will| shall) (?:look into|check (?:on )?(?:this|that|it)|get back to you|wait for|follow up|keep you (?:posted|updated)|be (?:happy|glad) to)",
      "i (?:completely |totally |fully )?understand (?:your|how|why|that this|the frustration)",
      "(?:(?:but|and|so) )?i (?:can|could|would be (?:happy|glad) to|'d be (?:happy|glad) to) help\\b",
      // "You're right that …" goes on to say what: the prefix is stripped, what follows is a claim.
      "you(?:'re| are) (?:right|correct|welcome)(?! (?:that|about)\\b)",
      'got it',
      'understood',
      'no worries',
      'good catch',
      'sounds good',
      'one moment',
      "you(?:'ve)? asked",
      "you(?:'re| are) asking",
      'you want(?:ed)? to know',
      'as an ai\\b',
      'for more (?:details|information|info)\\b',
      // Pointing at a link or the sources ("See the link below", "see [link]" with the link blanked), not at a fact.
      "(?:please )?(?:see|refer to|check out|visit)(?: the)? (?:link|links|sources?|documentation|docs|references?|above|below|attached|for more)\\b",
      '(?:please )?(?:see|visit)(?=\\s*[.!:]?\\s*$)',
      "i (?:do not|don'?t) have (?:personal|access|real-time|the ability|any way)",
    ].join('|') +
    ')(?=$|[^\\p{L}\\p{N}])',
  'iu',
);

/**
 * A sentence about what the sources do not hold ("The provided context does not mention the Mona Lisa", "I
 * couldn't find that in the documents") reports their absence: a refusal, not a claim about the world.
 */
const ABSENCE = new RegExp(
  '^(?:' +
    [
      // "I couldn't find that in the documents", "I was unable to determine …"
      "i (?:could ?n[o']t|can ?n[o']t|cannot|was ?n[o']t able to|was unable to|am unable to|did ?n[o']t) (?:find|locate|see|determine)\\b",
      // "The provided context does not mention the Mona Lisa"
      '(?:the|these|this) (?:provided |given |above |supplied |retrieved )?(?:context|documents?|passages?|excerpts?|snippets?|search results|text|information)' +
        "(?: (?:provided|given|above))? (?:does|do|did)(?: not|n't) (?:mention|contain|say|provide|include|specify|state|discuss|cover|address|give|list|have)\\b",
      // "There is no information about that in the context"
      '(?:there (?:is|are|was) )?no (?:mention|information|details?|data|records?)\\b.*\\b(?:the|these|this) (?:provided |given |above )?(?:context|documents?|passages?|excerpts?|snippets?|search results)\\b',
    ].join('|') +
    ')',
  'iu',
);

/**
 * What points at sources or lays out a list rather than asserting: citation markers ("[1]", "[^2]", ".^3",
 * "【3†source】", "(Source 1)", "<sup>4</sup>", a link that cites its page), the list of sources after an answer, a
 * code fence's line ("```json"), and list numbering at a line's start ("1)", "ii.",
 * "Step 2:"). Blanked before the answer is read, keeping its length, so offsets into it still hold.
 */
const SOURCE_LIST = /^[ \t]*(?:#{1,6}[ \t]+)?[*_]{0,2}(?:sources|references|citations|bibliography)[*_]{0,2}:?[*_]{0,2}[ \t]*\n(?:[ \t]*\n)*(?:[ \t]*\S[^\n]*(?:\n|$))*/gim;
const FOOTNOTE_TEXT = /^[ \t]*\[\^\d{1,3}\]:[^\n]*/gm;
// Each with a character it cannot match without, looked for first: one pattern of all the alternatives, tried
// at every position of every answer, was a fifth of a check's time.
const CITATIONS: ReadonlyArray<[trigger: string, pattern: RegExp]> = [
  // A list of the sources after the answer ("Sources:", then "[1] Rhine – Wikipedia"), and a footnote's text
  // ("[^1]: Source 1"), name where the claims come from.
  ['\n', SOURCE_LIST],
  ['[^', FOOTNOTE_TEXT],
  // A link alone in brackets cites its page: "(in 1815 ([Wikipedia](https://…)))"; so does one alone after a
  // sentence's end or a "Source:" at a line's end ("… in London. [Wikipedia](https://…)"). Looked for before the
  // marks below, which would blank "[Source 1]" and leave its address to be read as a claim's, and again after
  // them, which clear the way to a sentence's end ("… season.' (Source 1) [Wikipedia](https://…)").
  ['](', /\(\s*\[[^\]\n]{1,100}\]\([^()\s]{1,500}\)\s*\)/g],
  ['](', /(?:(?<=[.!?\u3002\uff01\uff1f]["'\u201d\u2019)]?[ \t]+)|\b(?:sources?|references?|via):[ \t]*)\[[^\]\n]{1,100}\]\([^()\s]{1,500}\)(?=[.,;]?[ \t]*(?:\n|$))/gi],
  ['[', /\[\^?\d{1,3}(?:\s*[,;\u2013-]\s*\^?\d{1,3})*\]/g],
  // A footnote mark after a word or a sentence: "the North Sea.^1" (not "x^2" or "mc^2").
  ['^', /(?<=[.,;:!?)\]"'\u201d\u3002\uff01\uff1f]|\p{L}{3})\^\d{1,3}(?!\p{N})/gu],
  ['```', /^[ \t]*```[^\n]*/gm],
  ['\u3010', /\u3010[^\u3011\n]{0,80}\u3011/g],
  ['[', /\[(?:source|doc|document|ref|reference|citation|context|passage|result)s?\s*#?\d{1,3}(?:\s*(?:[,;&]|and)\s*#?\d{1,3})*\]/gi],
  ['(', /\((?:source|doc|document|ref|reference|citation|context|passage|result)s?\s*#?\d{1,3}(?:\s*(?:[,;&]|and)\s*#?\d{1,3})*\)/gi],
  // A number alone in brackets at a sentence's end ("the North Sea (1)."), or before or after one (a citation or
  // an item's number: "… Sea. (1) It passes …"), not in a sentence ("two rules: (1) a tax cut").
  ['(', /(?<=\s)\(\d{1,2}\)(?=[.,;:!?]|[ \t]*(?:\n|$)|[ \t]+[A-Z])|(?<=[.!?"'\u201d\u2019\u3002\uff01\uff1f][ \t])\(\d{1,2}\)/g],
  ['<', /<sup>[^<\n]{0,20}<\/sup>|<\/?cite\b[^>\n]{0,200}>|<\/?[a-z][a-z0-9]{0,9}(?:\s[^<>\n]{0,200})?\/?>/gi],
  // Again, once the marks before a link are gone (see above).
  ['](', /\(\s*\[[^\]\n]{1,100}\]\([^()\s]{1,500}\)\s*\)/g],
  ['](', /(?:(?<=[.!?\u3002\uff01\uff1f]["'\u201d\u2019)]?[ \t]+)|\b(?:sources?|references?|via):[ \t]*)\[[^\]\n]{1,100}\]\([^()\s]{1,500}\)(?=[.,;]?[ \t]*(?:\n|$))/gi],
];
// Anchored at a line's start with its indent captured (a look-behind over the indent would scan back over a
// whole run of white space at every position of it).
const LIST_NUMBERS = /^([ \t]*(?:[-*\u2022][ \t]+)?)(\d{1,2}[.)]|\d\ufe0f?\u20e3|[ivx]{1,5}[.)]|[IVX]{1,5}[.)]|[a-h][.)]|[Ss]tep \d{1,2}:)(?=[ \t])/gmu;

function blankNotAsserted(answer: string): { answer: string; links: Link[]; cited: Link[] } {
  // A cited page's address ("… London. [Wikipedia](https://…)") is blanked with its mark, so it weighs nothing in
  // its sentence's claim, and is still checked as a claim of its own: a cited page no source has is made up.
  const cited: Link[] = [];
  // A fenced block of code is read for the names it takes from the sources' library or tool (`readCodeBlocks`),
  // before its brackets and tags could read as citation marks.
  const block = readCodeBlocks(answer, stem);
  answer = block.text;
  for (const [trigger, pattern] of CITATIONS) {
    if (!answer.includes(trigger)) continue;
    // The list of sources names its pages too, and footnotes theirs: "Sources:\n- https://…", "[^1]: https://…".
    const citesPage = trigger === '](' || pattern === SOURCE_LIST || pattern === FOOTNOTE_TEXT;
    answer = answer.replace(pattern, (m: string, at: number) => {
      if (citesPage) for (const l of findLinks(m)) cited.push({ ...l, start: l.start + at, end: l.end + at });
      return ' '.repeat(m.length);
    });
  }
  // Links left (not citation marks nor the list of sources) are checked whole (`Term.link`), not word by word.
  // So are the names of code quoted inline (`pool_size`, `/app/main.py`): a changed one shares most of its words.
  const found = findLinks(answer);
  const inline = findCodeNames(answer, stem);
  const code = block.names.length === 0 ? inline : [...inline, ...block.names];
  const links = code.length === 0 ? found : [...found, ...code].sort((a, b) => a.start - b.start);
  if (links.length > 0) {
    const parts: string[] = [];
    let at = 0;
    for (const l of links) {
      parts.push(answer.slice(at, l.start), ' '.repeat(l.end - l.start));
      at = l.end;
    }
    parts.push(answer.slice(at));
    answer = parts.join('');
  }
  if (answer.includes('|')) answer = answer.replace(NUMBERED_TABLE, (rows) => rows.replace(ROW_NUMBER, (_m, cell: string, number: string) => cell + ' '.repeat(number.length)));
  // A list's number becomes a bullet, not blanks: a line break before white space and a lower-case word would
  // read as a wrapped line, and the items would run together.
  answer = runOnItems(answer);
  return { answer: answer.replace(LIST_NUMBERS, (_m, indent: string, number: string) => `${indent}\u2022${' '.repeat(number.length - 1)}`), links, cited };
}

/** A list's first item on a line: at the line's start, or after a colon that introduces it ("Key facts: - …"). */
const RUN_ON_START = /(^|:)([ \t]*)([-*\u2022]|(\d{1,2})([.)]))[ \t]+(?=\S)/gm;

/**
 * A list whose items were run together on one line ("- Opens at 9 - Closes at 5", "1. Opens at 9 2. Closes at 5"):
 * the space before each later item's marker becomes a line break, so each item is a claim of its own, as it is
 * when written one a line, and a numbered item's number is the list's, not the item before's ("… Friday 3."). An
 * item's marker is the first one's (the same bullet, or the next number with the same mark) after a space and
 * before a capital letter or a digit; after a colon two more of them must follow, so a dash in prose is left be.
 * A number is the list's only where the item before it is whole without it: after a word that wants one more
 * ("Doors open at 2. Bring your ticket.") it is the item's own, a time or a count to check, and the list's next
 * number, if any, is looked for after it.
 * The text keeps its length: offsets into it are the answer's.
 */
function runOnItems(text: string): string {
  if (!/[-*\u2022.)][ \t]/.test(text)) return text;
  let out: number[] | undefined;
  for (const m of text.matchAll(RUN_ON_START)) {
    const afterColon = m[1] === ':';
    const lineEnd = text.indexOf('\n', m.index);
    const end = lineEnd === -1 ? text.length : lineEnd;
    const from = m.index + m[0].length;
    const breaks: number[] = [];
    let n = m[4] === undefined ? undefined : Number(m[4]);
    let at = from;
    let search = from;
    for (;;) {
      const marker = n === undefined ? m[3]! : `${n + 1}${m[5]}`;
      const i = text.indexOf(` ${marker} `, search);
      if (i === -1 || i >= end) break;
      let j = i + marker.length + 2;
      while (text[j] === ' ' || text[j] === '\t') j++;
      if (!ITEM_START.test(String.fromCodePoint(text.codePointAt(j) ?? 32))) break;
      // The item before must be whole without the number: one that ends wanting a word ("Doors open at 2. Bring …")
      // takes the number as its own (a time, a count), and the list's next number, if any, comes later.
      if (n !== undefined && endsDangling(text, at, i)) {
        search = i + 1;
        continue;
      }
      if (n !== undefined) n++;
      breaks.push(i);
      at = search = i + marker.length + 2;
    }
    if (breaks.length < (afterColon ? 2 : 1)) continue;
    // After a colon the first item starts a line too (the white space before it), as the list written one a line:
    // else its number reads as a number the words before the colon claim ("Key facts: 1." flagged for the 1).
    if (afterColon && m[2]!.length > 0) breaks.push(m.index + m[1]!.length + m[2]!.length - 1);
    (out ??= []).push(...breaks);
  }
  if (!out) return text;
  let joined = '';
  let at = 0;
  // A line's list and a list after a colon on it break before the same items ("- Hours: - Mon … - Tue …"): each
  // break once, in order, or the text read grows and its offsets are no longer the answer's.
  for (const i of [...new Set(out)].sort((a, b) => a - b)) {
    joined += text.slice(at, i) + '\n';
    at = i + 1;
  }
  return joined + text.slice(at);
}

const ITEM_START = /^[\p{Lu}\p{N}]/u;

/**
 * Words a sentence cannot end on (a preposition that wants its object, an article, a conjunction, a verb that wants
 * its complement): an item that ends on one goes on with the number after it. Particles that end an instruction
 * ("Log in", "Turn it on", "Sign up") are not here.
 */
const DANGLING = new Set(
  `at by to from until till of for with than between per every each since into onto via near the a an and or nor is
are was were be been will shall would could should can must approximately about`.split(/\s+/),
);

/** Longest word of DANGLING: a longer last word is none of them. */
const DANGLING_CHARS = 13;

/** Does text[from, to) end (white space aside) on a word of DANGLING? Reads at most a word's length back. */
function endsDangling(text: string, from: number, to: number): boolean {
  let end = to;
  while (end > from && /\s/.test(text[end - 1]!)) end--;
  let start = end;
  while (start > from && end - start <= DANGLING_CHARS && /\p{L}/u.test(text[start - 1]!)) start--;
  return end - start <= DANGLING_CHARS && DANGLING.has(text.slice(start, end).toLowerCase());
}

/**
 * A table whose first column counts its rows (headed "#", "No.", "Nr." or nothing): its header, separator and
 * body rows. The row numbers are layout, as a list's are; a column headed "Rank" or "Year" says something.
 */
const NUMBERED_TABLE = /^[ \t]*\|[ \t]*(?:#|No\.?|Nr\.?)?[ \t]*\|[^\n]*\n[ \t]*\|[ \t]*:?-+:?[ \t]*\|[^\n]*(?:\n[ \t]*\|[^\n]*)*/gim;
const ROW_NUMBER = /^([ \t]*\|[ \t]*)(\d{1,4}\.?)(?=[ \t]*\|)/gm;

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
export function splitClaims(text: string): Claim[] {
  const { answer, links, cited } = blankNotAsserted(text);
  const tokens = tokenize(answer);
  const { bySentence, alone } = linkSentences(answer, tokens, links);
  alone.push(...cited);
  const math = mathSpans(answer);
  const claims: Claim[] = [];
  let i = 0;
  while (i < tokens.length) {
    let j = i;
    while (j < tokens.length && tokens[j]!.sentence === tokens[i]!.sentence) j++;
    const sentenceLinks = bySentence.get(tokens[i]!.sentence);
    const claim = readClaim(answer, tokens, i, j, math);
    if (sentenceLinks) claims.push(withLinks(answer, claim, sentenceLinks));
    else if (claim) claims.push(claim);
    i = j;
  }
  if (alone.length === 0) return claims;
  for (const l of alone) claims.push(withLinks(answer, undefined, [l]));
  return claims.sort((a, b) => a.start - b.start);
}

/**
 * The sentence each link is part of: that of the word before it when no sentence ends between them, else that of
 * the word after it on the same terms; a link on a line of its own is a claim of its own (`alone`).
 */
function linkSentences(answer: string, tokens: readonly Token[], links: readonly Link[]): { bySentence: Map<number, Link[]>; alone: Link[] } {
  const bySentence = new Map<number, Link[]>();
  const alone: Link[] = [];
  let k = 0;
  for (const l of links) {
    while (k < tokens.length && tokens[k]!.end <= l.start) k++;
    const before = tokens[k - 1];
    const after = tokens[k];
    let sentence = -1;
    if (before && !sentenceBreak(answer, before.end, l.start)) sentence = before.sentence;
    else if (after && after.start >= l.end && !sentenceBreak(answer, l.end, after.start)) sentence = after.sentence;
    if (sentence === -1) alone.push(l);
    else {
      const links = bySentence.get(sentence);
      if (links) links.push(l);
      else bySentence.set(sentence, [l]);
    }
  }
  return { bySentence, alone };
}

/**
 * A claim with its sentence's links among its terms (a link is checked in a sentence that asserts nothing else:
 * "See https://…"), or the links alone when the sentence makes no claim.
 */
function withLinks(answer: string, claim: Claim | undefined, links: readonly Link[]): Claim {
  const terms: Term[] = links.map((link) => ({ kind: 'link', start: link.start, end: link.end, token: linkToken(link), link }));
  const first = links[0]!;
  const last = links[links.length - 1]!;
  if (!claim) return { start: first.start, end: last.end, terms, negations: [], negated: new Set() };
  let end = claim.end;
  if (last.end > end) {
    end = last.end;
    while (end < answer.length && CLOSING.test(answer[end]!)) end++;
  }
  return { ...claim, start: Math.min(claim.start, first.start), end, terms: [...claim.terms, ...terms].sort((a, b) => a.start - b.start) };
}

/** A link as a token: its first look-up key is its stem and spelling, so no word of the sources matches it. */
function linkToken(link: Link): Token {
  const key = link.lookups[0]!;
  return {
    start: link.start,
    end: link.end,
    sentenceStart: false,
    sentence: -1,
    word: { norm: key, stem: key, cap: false, value: undefined, content: true, negation: false, quantifier: false, numberWord: undefined, numberedIn: 0, stemKey: 0, normKey: 0 },
  };
}

/**
 * LaTeX math in an answer, as sorted, disjoint [start, end) pairs: `$…$` on one line holding a command, a sub- or
 * superscript or an equals sign ("$E = mc^2$", "$\\log p_i$"; not "$10 and $20"), `$$…$$`, `\\(…\\)` and `\\[…\\]`.
 * Found with `indexOf` from each closing mark on, so an answer of unclosed marks is read in one pass.
 */
function mathSpans(answer: string): number[] {
  if (!answer.includes('$') && !answer.includes('\\')) return [];
  const found: [number, number][] = [];
  for (const [open, close] of [['\\(', '\\)'], ['\\[', '\\]'], ['$$', '$$']] as const) {
    for (let i = answer.indexOf(open); i !== -1; ) {
      const end = answer.indexOf(close, i + open.length);
      if (end === -1) break;
      found.push([i, end + close.length]);
      i = answer.indexOf(open, end + close.length);
    }
  }
  for (let i = answer.indexOf('$'); i !== -1; ) {
    // "$$" is read above.
    if (answer[i + 1] === '$') {
      i = answer.indexOf('$', i + 2);
      continue;
    }
    const end = answer.indexOf('$', i + 1);
    if (end === -1) break;
    const body = answer.slice(i + 1, end);
    if (!body.includes('\n') && MATH_MARK_RE.test(body)) {
      found.push([i, end + 1]);
      i = answer.indexOf('$', end + 1);
    } else i = end;
  }
  found.sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  for (const [a, b] of found) {
    if (out.length > 0 && a <= out[out.length - 1]!) out[out.length - 1] = Math.max(out[out.length - 1]!, b);
    else out.push(a, b);
  }
  return out;
}

const MATH_MARK_RE = /[\\^_=]/;

/** Whether `at` is inside one of the math spans (`mathSpans`): a binary search. */
function inMath(math: readonly number[], at: number): boolean {
  let lo = 0;
  let hi = math.length / 2;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (math[2 * mid + 1]! <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo < math.length / 2 && math[2 * lo]! <= at;
}

function readClaim(answer: string, tokens: readonly Token[], from: number, to: number, math: readonly number[] = []): Claim | undefined {
  const last = tokens[to - 1]!;
  // A question back to the user claims nothing (its "?" may stand after a space in tokenised text).
  const after = answer.slice(last.end, tokens[to]?.start ?? answer.length);
  // A "?" inside brackets before the full stop ("… (in the next release?).") doubts an aside; the sentence states.
  if (/^[\s"'\u201d\u2019)]*[?\uff1f]/.test(after) && !/^\s*[?\uff1f]\)+["'\u201d\u2019]*\s*\./.test(after)) return undefined;
  // A heading ("## Background") or a table's header row names what follows; it asserts nothing.
  if (headingLine(answer, tokens[from]!.start)) return undefined;
  // Conversation at the start ("Yeah,", "Good question!", "I'm not sure, but", "**Answer:**") is not part of
  // the claim; a sentence that talks to the user up to its end is not a claim at all.
  let first = from;
  for (;;) {
    if (first === to) return undefined;
    const window = readable(answer.slice(tokens[first]!.start, prefixWindowEnd(tokens, first, to)));
    if (CHATTER_CLAUSE.test(window)) {
      const next = clauseBreak(answer, tokens[first]!.start, last.end);
      if (next === -1) return undefined;
      while (first < to && tokens[first]!.start < next) first++;
      continue;
    }
    if (CHATTER_WORDS.has(tokens[first]!.word.norm)) {
      first++;
      continue;
    }
    const label = emphasisedLabelEnd(answer, tokens[first]!.start);
    if (label !== -1) {
      while (first < to && tokens[first]!.start < label) first++;
      continue;
    }
    const phrase = CONVERSATION_PREFIX.exec(window);
    if (!phrase || letterCount(phrase[0]) === 0) break;
    // Skip the tokens that spell the phrase: as many letters and digits as it has.
    const letters = letterCount(phrase[0]);
    let skipped = 0;
    while (first < to && skipped < letters) skipped += letterCount(answer.slice(tokens[first]!.start, tokens[first++]!.end));
  }
  const start = tokens[first]!.start;
  const said = answer.slice(start, last.end);
  // "The provided context does not mention the Mona Lisa": a refusal reports what the sources lack.
  if (ABSENCE.test(readable(said))) return undefined;
  let end = last.end;
  // Include closing punctuation so the claim reads as a sentence.
  while (end < answer.length && CLOSING.test(answer[end]!)) end++;
  const terms: Term[] = [];
  const negations: Token[] = [];
  const negation = new NegationScope();
  for (let k = first; k < to; k++) negation.read(tokens, k);
  for (let k = first; k < to; k++) {
    const t = tokens[k]!;
    const w = t.word;
    if (isNegation(tokens, k)) negations.push(t);
    if (w.value !== undefined || (w.numberWord !== undefined && w.norm !== 'one' && w.norm !== 'single' && w.norm !== 'half')) {
      const num = readNumber(tokens, k, true);
      if (num) {
        // List markers ("1." opening a line) are layout, not claims.
        // Only one or two digits with more on the same line: "1887." alone is an answer, "2018. Sales fell" a year.
        const listMarker =
          t.sentenceStart &&
          w.value !== undefined &&
          t.end - t.start <= 2 &&
          answer[t.end] === '.' &&
          /\s/.test(answer[t.end + 1] ?? ' ') &&
          tokens[k + 1] !== undefined &&
          !answer.slice(t.end, tokens[k + 1]!.start).includes('\n');
        // Digits glued to a word ("COVID-19", "Boeing-737") are part of a name, not a quantity.
        const glued = t.start >= 2 && answer[t.start - 1] === '-' && /\p{L}/u.test(answer[t.start - 2]!);
        // "2 hours 45 minutes" is one figure, 165 minutes or 2.75 hours, as a source may write it.
        const duration = glued || listMarker ? undefined : readDuration(tokens, k);
        if (duration && duration.next <= to) {
          const values = durationValues(duration.seconds).map((d) => d.value);
          terms.push({ kind: 'number', start: t.start, end: tokens[duration.next - 1]!.end, token: t, values });
          k = duration.next - 1;
          continue;
        }
        const time = glued || listMarker ? undefined : readTime(answer, tokens, k, true);
        if (time && time.next <= to) {
          // "6 p.m." is one term, the hour, and its minutes ("2:30 pm": 30) and seconds ("17:25:35": 35) others;
          // ":00" says nothing more.
          const end = time.minutes || time.seconds ? t.end : tokens[time.next - 1]!.end;
          terms.push({ kind: 'number', start: t.start, end, token: t, values: [], hours: time.hours });
          for (const m of [time.minutes, time.seconds]) {
            if (m) terms.push({ kind: 'number', start: m.start, end: m.end, token: m, values: [m.word.value!] });
          }
          k = time.next - 1;
          continue;
        }
        if (glued) terms.push({ kind: 'name', start: t.start, end: t.end, token: t });
        else if (!listMarker) {
          const term: Term = { kind: 'number', start: t.start, end: tokens[num.next - 1]!.end, token: t, values: num.values };
          const month = k > first ? isoMonth(answer, tokens[k - 1]!, t) : undefined;
          if (month !== undefined) {
            term.month = month;
            // "2024-03" and "2024-03-15" are dates; "2011-12" may be the season 2011 to 2012.
            const day = tokens[k + 1] !== undefined && answer.slice(t.end, tokens[k + 1]!.start) === '-';
            if (day || answer[t.start] === '0') term.values = [];
          } else if (w.value !== undefined && (numericDateMonths(answer, tokens, k).includes(w.value) || (k > first && numericDateMonths(answer, tokens, k - 1).includes(w.value)))) {
            term.dateMonth = true;
          }
          const unit = numberUnit(answer, tokens, k, num.next, to);
          if (unit) term.unit = unit;
          const ordinal = ORDINAL_SUFFIX_RE.test(w.norm) ? ORDINAL_WORDS.get(w.value!) : undefined;
          if (ordinal) term.ordinal = stem(ordinal);
          terms.push(term);
        }
        k = num.next - 1;
        continue;
      }
    }
    // A function word spelled as an acronym, or the month May, is a name: "the US", "the WHO", "Austin, IN", "May 1889".
    if (!w.content && !w.negation && k !== first && (isAcronym(answer, tokens, k) || isMay(tokens, k, to))) {
      terms.push({ kind: 'name', start: t.start, end: t.end, token: t, acronym: true });
      continue;
    }
    // A currency beside a number ("12 euros", "$12") is as exact as a name: another currency is another fact.
    // So is a unit of measure ("12.5 miles" for "12.5 km"), read as part of the number's mention as a currency is.
    if ((CURRENCIES.has(w.norm) || MEASURE_UNITS.has(w.stem)) && besideNumber(tokens, k)) {
      terms.push({ kind: 'name', start: t.start, end: t.end, token: t, currency: true });
      continue;
    }
    if (!w.content || NEGATIONS.has(w.norm) || (!w.cap && CHATTER_WORDS.has(w.norm))) continue;
    // A version in dotted digits ("v2.3.1") is as exact as a name: another one is another fact.
    // So is a variable in a formula ("$\\log p_i$" for "$\\log q_i$" is another formula): a word of one or two letters in math.
    const variable = t.end - t.start <= 2 && math.length > 0 && inMath(math, t.start);
    terms.push({ kind: (w.cap && k !== first) || DIGIT_START.test(w.norm) || variable || (cjkName(w.norm) && !LABEL_END.test(answer.slice(t.end, t.end + 2))) ? 'name' : 'word', start: t.start, end: t.end, token: t });
  }
  if (terms.length === 0 || terms.every((t) => t.kind === 'word' && CONVERSATION_WORDS.has(t.token.word.norm))) return undefined;
  // A lead-in ("The main reasons are:", "Key points:") introduces what follows; one with a number or a name
  // ("The tower has three levels:") still says something checkable.
  // A Chinese or Japanese word read as a name ("東京:") is as much a label's word as an English one.
  if (/^[*_\s]*:/.test(after) && terms.every((t) => t.kind === 'word' || cjkName(t.token.word.norm))) return undefined;
  return { start, end, terms, negations, negated: negation.scope() };
}

/**
 * The unit after a number written in digits alone ("2.4 MB", "1530ms", "1.5 seconds"; not "2.4 million bytes"),
 * token `next` of the claim's tokens up to `to`.
 */
function numberUnit(answer: string, tokens: readonly Token[], k: number, next: number, to: number): NumberUnit | undefined {
  const t = tokens[k]!;
  // "373.15 K": a capital K after a space, read as thousands, may be kelvin too (the claim keeps both readings).
  const kelvin = tokens[k + 1];
  if (next === k + 2 && kelvin && kelvin.word.norm === 'k' && answer[kelvin.start] === 'K' && kelvin.start - t.end === 1 && t.word.value !== undefined) {
    const decimals = /\.(\d+)$/.exec(t.word.norm)?.[1]?.length ?? 0;
    return { written: t.word.value, decimals, unit: UNITS.get('kelvin')!, start: kelvin.start, end: kelvin.end };
  }
  const u = tokens[next];
  if (next >= to || !u || t.word.value === undefined) return undefined;
  const unit = UNITS.get(u.word.norm);
  if (!unit) return undefined;
  if (unit.kind === 'temperature') {
    // A scale after "°" ("21 °C", "-5°F") or "degrees" (read with the number: "21 degrees Celsius"), never "grade C".
    const degrees = next === k + 2 && DEGREES_RE.test(tokens[k + 1]!.word.norm);
    // Or a sign ("25℃", "77℉", "373 K" with the Kelvin sign) or kelvin spelled out, right after the number.
    const sign = next === k + 1 && u.start - t.end <= 1 && (u.end - u.start === 1 ? /[\u2103\u2109\u212a]/.test(answer[u.start]!) : u.word.norm.startsWith('kelvin'));
    if (!degrees && !sign && !(next === k + 1 && /^ ?° ?$/.test(answer.slice(t.end, u.start)))) return undefined;
  } else if (next !== k + 1 || u.start - t.end > 1 || t.word.value < 0) return undefined;
  const decimals = /\.(\d+)$/.exec(t.word.norm)?.[1]?.length ?? 0;
  return { written: t.word.value, decimals, unit, start: u.start, end: u.end };
}

const DEGREES_RE = /^(?:degrees?|deg)$/;

/**
 * What closes a sentence after its last word: its end mark (also another script's, "。", "！", "？", "।", "؟", as
 * `sentenceBreak` reads them), closing quotes, brackets or backticks.
 */
export const CLOSING = /[.!?)"'`\]\u201d\u2019\u3002\uff01\uff1f\uff61\uff0e\u0964\u0965\u061f\u06d4\u0589\u1362\u104b\u17d4\u0f0d]/;

/**
 * Whether token `k` is an acronym (`inCapitals`, up to MAX_ACRONYM letters) between words that are not (a shouted
 * sentence has no acronyms). Its neighbours are the nearest words of two letters or more: numbers, symbols, units
 * and words of a script without capitals have no case to tell ("PLATFORM 4 AT 9:15", "-5°C TO 12°C", Thai before
 * "THE U.K."). Past its claim's ends they are looked for in the claims beside it, whose case is the answer's too.
 */
const ACRONYM_REACH = 32;

function isAcronym(answer: string, tokens: readonly Token[], k: number): boolean {
  const caps = (i: number, step: number) => {
    // So far and no further, or a run of numbers would be read again for each word in capitals beside it.
    const stop = Math.min(tokens.length, Math.max(-1, i + step * ACRONYM_REACH));
    while (i !== stop && (tokens[i]!.end - tokens[i]!.start < 2 || !CASED_RE.test(answer[tokens[i]!.start]!))) i += step;
    return i !== stop && inCapitals(answer, tokens[i]!);
  };
  return inCapitals(answer, tokens[k]!, MAX_ACRONYM) && !caps(k - 1, -1) && !caps(k + 1, 1);
}

const LETTER_RE = /\p{L}/u;
const CASED_RE = /[\p{Lu}\p{Ll}\p{Lt}]/u;
const DIGIT_START = /^\d/;

/** Whether token `k` is the month May: capitalised, beside a number in its claim ("May 1889", "5 May"). */
function isMay(tokens: readonly Token[], k: number, to: number): boolean {
  const t = tokens[k]!;
  if (!t.word.cap || t.word.norm !== 'may') return false;
  const number = (i: number) => i >= 0 && i < to && tokens[i]!.sentence === t.sentence && tokens[i]!.word.value !== undefined;
  return number(k + 1) || number(k - 1);
}

/** Whether the line holding `at` is a markdown heading ("# …" to "###### …") or a table's header row. */
function headingLine(answer: string, at: number): boolean {
  const lineStart = answer.lastIndexOf('\n', at - 1) + 1;
  const lineEnd = answer.indexOf('\n', at);
  const hash = /^[ \t]{0,3}(#{1,6})[ \t]/.exec(answer.slice(lineStart, at + 1));
  if (hash) {
    const line = answer.slice(lineStart, lineEnd === -1 ? answer.length : lineEnd);
    const prevStart = lineStart === 0 ? -1 : answer.lastIndexOf('\n', lineStart - 2) + 1;
    const prev = prevStart === -1 ? '' : answer.slice(prevStart, Math.min(lineStart - 1, prevStart + 16));
    return !commentLine(line, hash[1]!, prev, lineEnd === -1 ? '' : answer.slice(lineEnd + 1, lineEnd + 16));
  }
  if (lineEnd === -1) return false;
  if (answer.charCodeAt(lineStart) === 124 /* | */ && /^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\||\n|$)/.test(answer.slice(lineEnd + 1, lineEnd + 80))) return true;
  return listLabel(answer.slice(lineStart, lineEnd), answer.slice(lineEnd + 1, lineEnd + 200));
}

/**
 * Whether a "#" line is prose that a "#" opens, as in a shell script's or a configuration file's comments, rather
 * than a heading: it ends a sentence ("# Restart the service after editing."), or holds one and goes on to the
 * next ("# Defaults to 10. Set 0 to disable"), or goes on, in lower case, on the next line opened by the same marks
 * (a comment wrapped over lines), or a line of the marks alone is beside it (a comment's blank line). A heading
 * names a section in a few words and ends no sentence.
 */
function commentLine(line: string, marks: string, prev: string, next: string): boolean {
  if (/\p{Ll}{2}\.["')]?(?:[ \t]+["'(]?\p{Lu}|[ \t]*$)/u.test(line)) return true;
  if (!next.startsWith(marks) && !prev.startsWith(marks)) return false;
  const rest = (l: string) => (l.startsWith(marks) && !l.startsWith(`${marks}#`) ? l.slice(marks.length) : undefined);
  const after = rest(next);
  if (after !== undefined && /^[ \t]+\p{Ll}/u.test(after)) return true;
  return [rest(prev), after].some((r) => r !== undefined && /^[ \t]*(?:\n|$)/.test(r));
}

const LABEL_LINE = /^([ \t]*)([-*+\u2022][ \t]+)?(?:(\*\*[^*\n]{1,60}\*\*|__[^_\n]{1,60}__)|([^\n]{1,60}?))[ \t]*:?[ \t]*$/;
const LIST_ITEM = /^(?:[ \t]*\n)*([ \t]*)[-*+\u2022][ \t]/;

/**
 * Whether a line labels the list below it, as a heading would: "**Financials**" or "- **Operations**" over list
 * items, or "- Outlook" over items indented under it. A bulleted line of plain words labels only items nested
 * under it, and only when it does not end as a sentence does ("- Closed the Seattle store." is a claim).
 */
function listLabel(line: string, below: string): boolean {
  const label = LABEL_LINE.exec(line);
  const item = label && LIST_ITEM.exec(below);
  if (!label || !item) return false;
  const deeper = item[1]!.replace(/\t/g, '    ').length > label[1]!.replace(/\t/g, '    ').length;
  if (label[3] !== undefined) return !label[2] || deeper;
  return label[2] !== undefined && deeper && !/[.!?]$/.test(label[4]!);
}

/** Where an emphasised label that opens a claim ends ("**Answer:** …", "__Note__: …"), or -1. */
function emphasisedLabelEnd(answer: string, at: number): number {
  const mark = answer.slice(Math.max(0, at - 2), at);
  if (mark !== '**' && mark !== '__') return -1;
  const label = /^[^*_\n]{1,40}?(?::\*\*|\*\*:|:__|__:)/.exec(answer.slice(at, at + 48));
  return label ? at + label[0].length : -1;
}

/** The first clause break (comma, semicolon, colon, dash) in `answer` between `from` and `to`, or -1. */
function clauseBreak(answer: string, from: number, to: number): number {
  for (let i = from; i < to; i++) {
    const c = answer.charCodeAt(i);
    if (c === 44 || c === 59 || c === 58 || c === 0x2013 || c === 0x2014) return i;
    if (c === 45 && answer.charCodeAt(i - 1) === 32 && answer.charCodeAt(i + 1) === 32) return i;
  }
  return -1;
}


/**
 * The lines of a claim that runs over line breaks (a line with no end mark, then one in lower case: read as one
 * sentence wrapped, as a licence or an e-mail wraps it), each with its own terms. A wrapped sentence copied from a
 * source has every line in that source's sentence; a line joined onto another ("Our office is open from Monday to
 * Friday\notters juggle saxophones.") is a sentence of its own that the other line's support must not cover for.
 * Empty when the claim is on one line or only one of its lines has a term.
 */
export function wrappedLineParts(answer: string, claim: Claim): Claim[] {
  const breaks: number[] = [];
  for (let at = answer.indexOf('\n', claim.start); at !== -1 && at < claim.end; at = answer.indexOf('\n', at + 1)) breaks.push(at);
  if (breaks.length === 0) return [];
  const parts: Claim[] = [];
  let from = 0;
  for (let b = 0; b <= breaks.length; b++) {
    const lineEnd = b < breaks.length ? breaks[b]! : claim.end;
    let to = from;
    while (to < claim.terms.length && claim.terms[to]!.start < lineEnd) to++;
    if (to > from) {
      const terms = claim.terms.slice(from, to);
      const start = terms[0]!.start;
      const end = terms[terms.length - 1]!.end;
      // A negation reaches over the line break ("it's not\nan identifier"): a line is negated where the
      // sentence negates it, whichever line the "not" is on.
      const stems = new Set(terms.map((t) => t.token.word.stem));
      const negated = new Set([...claim.negated].filter((s) => stems.has(s)));
      const lineStart = b === 0 ? claim.start : breaks[b - 1]!;
      const negations = negated.size > 0 ? claim.negations : claim.negations.filter((n) => n.start < lineEnd && n.end > lineStart);
      parts.push({ start, end, terms, negations, negated });
    }
    from = to;
  }
  return parts.length > 1 ? parts : [];
}
