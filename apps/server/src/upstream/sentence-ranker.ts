import { NEGATIONS, STOPWORDS, stem } from '@svc/grounding';

/** A sentence of a source document, kept verbatim. */
export interface Passage {
  text: string;
  /** Index of the source it came from. */
  source: number;
  /** Position within all passages (document order). */
  position: number;
}

export interface RankedPassage extends Passage {
  score: number;
  /** Query terms the passage contains. */
  matched: string[];
}

/**
 * Words of a request rather than of its subject ("Please tell me what …"); with the grounding check's function
 * words and negations they are no query terms.
 */
const REQUEST_WORDS = new Set(['tell', 'please', 'give', 'show', 'explain', 'describe', 'know', 'say', 'says', 'said', 'according', 'get', 'got', 'whats']);

/** Abbreviations whose period does not end a sentence. */
const ABBREVIATIONS = new Set(['e.g', 'i.e', 'etc', 'vs', 'mr', 'mrs', 'ms', 'dr', 'prof', 'st', 'no', 'fig', 'approx', 'inc', 'ltd', 'jr', 'sr']);

/**
 * Lower-cased content words as written: no function words, negations or words of the request itself.
 *
 * @example
 * contentWords('Please tell me where the towers are'); // ['towers']
 */
export function contentWords(text: string): string[] {
  const out: string[] = [];
  for (const match of text.toLowerCase().matchAll(/[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu)) {
    const word = match[0].replace(/['’]s$/, '').replace(/’/g, "'");
    if (STOPWORDS.has(word) || NEGATIONS.has(word) || word.endsWith("n't") || REQUEST_WORDS.has(word)) continue;
    out.push(word);
  }
  return out;
}

/**
 * The content words stemmed as the grounding check stems them: what queries and documents are matched on.
 *
 * @example
 * terms('Please tell me where the towers are'); // ['tower']
 */
export function terms(text: string): string[] {
  return contentWords(text).map(stem);
}

/**
 * Splits text into sentences, verbatim: by line, then after `.`/`!`/`?` followed by space and a capital,
 * digit or quote (abbreviations such as "e.g." and "Dr." do not end a sentence). Bullet markers are dropped.
 *
 * @example
 * splitSentences('Paris is big. It has 2 million people.\n- Lyon is smaller.')
 * // ['Paris is big.', 'It has 2 million people.', 'Lyon is smaller.']
 */
const WHITE_SPACE = /\s/;

export function splitSentences(text: string): string[] {
  const sentences: string[] = [];
  for (const rawLine of text.split(/\r?\n|\r/)) {
    const line = rawLine.replace(/^\s*(?:[-*•>]+|#{1,6}|\d{1,3}[.)])\s+/, '').trim();
    if (!line) continue;
    let start = 0;
    for (const match of line.matchAll(/[.!?。](?:["'”’)\]]*)\s+(?=["'“‘(\[]?[\p{Lu}\p{Lo}\p{N}])/gu)) {
      const end = match.index + match[0].trimEnd().length;
      // The word before the stop, read back from it: from `start`, a run of skipped stops ("A. A. A. …") would
      // re-read the whole run at each one.
      let from = match.index;
      while (from > start && !WHITE_SPACE.test(line[from - 1]!)) from--;
      const before = line.slice(from, match.index);
      // "Dr. Who", "e.g. Paris", and initials ("Wile E. Coyote") do not end a sentence.
      if (ABBREVIATIONS.has(before.toLowerCase().replace(/\.$/, '')) || /^\p{Lu}$/u.test(before)) continue;
      sentences.push(line.slice(start, end).trim());
      start = match.index + match[0].length;
    }
    const rest = line.slice(start).trim();
    if (rest) sentences.push(rest);
  }
  return sentences;
}

/** Sentences that read as instructions to the model ("You are…", "Answer…") rank below facts. */
const INSTRUCTION = /^(you are|you're|you will|answer|respond|reply|use|always|never|do not|don't|be |act as|your task)/i;

/**
 * Ranks passages against a query with Okapi BM25 (k1 1.2, b 0.75); passages scoring 0 are left out.
 * Ties keep document order, so the ranking is deterministic.
 */
export function rankPassages(query: string, passages: Passage[]): RankedPassage[] {
  const queryTerms = [...new Set(terms(query))];
  if (queryTerms.length === 0 || passages.length === 0) return [];
  const docs = passages.map((p) => terms(p.text));
  const avgLength = docs.reduce((sum, d) => sum + d.length, 0) / docs.length || 1;
  const df = new Map<string, number>();
  for (const doc of docs) for (const term of new Set(doc)) df.set(term, (df.get(term) ?? 0) + 1);
  const k1 = 1.2;
  const b = 0.75;
  const ranked: RankedPassage[] = [];
  passages.forEach((passage, i) => {
    const doc = docs[i]!;
    const tf = new Map<string, number>();
    for (const term of doc) tf.set(term, (tf.get(term) ?? 0) + 1);
    let score = 0;
    const matched: string[] = [];
    for (const term of queryTerms) {
      const f = tf.get(term);
      if (!f) continue;
      const n = df.get(term) ?? 0;
      const idf = Math.log(1 + (passages.length - n + 0.5) / (n + 0.5));
      score += (idf * f * (k1 + 1)) / (f + k1 * (1 - b + (b * doc.length) / avgLength));
      matched.push(term);
    }
    if (score <= 0) return;
    if (INSTRUCTION.test(passage.text)) score *= 0.3;
    ranked.push({ ...passage, score, matched });
  });
  return ranked.sort((x, y) => y.score - x.score || x.position - y.position);
}
