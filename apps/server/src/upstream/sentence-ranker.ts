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

const STOPWORDS = new Set(
  `a about above after again against all am an and any are aren't as at be because been before being below between both but by
  can can't cannot could couldn't did didn't do does doesn't doing don't down during each few for from further had hadn't has
  hasn't have haven't having he her here hers herself him himself his how i if in into is isn't it it's its itself just let's
  me more most my myself no nor not of off on once only or other ought our ours ourselves out over own same she should
  shouldn't so some such than that that's the their theirs them themselves then there there's these they this those through
  to too under until up very was wasn't we were weren't what what's when where which while who whom why will with won't would
  wouldn't you your yours yourself yourselves tell please give show explain describe know say says said does according also
  may might must shall us get got whats much many`.split(/\s+/),
);

/** Abbreviations whose period does not end a sentence. */
const ABBREVIATIONS = new Set(['e.g', 'i.e', 'etc', 'vs', 'mr', 'mrs', 'ms', 'dr', 'prof', 'st', 'no', 'fig', 'approx', 'inc', 'ltd', 'jr', 'sr']);

/** Lower-cased content words with a light English stemming; the same function serves queries and documents. */
export function terms(text: string): string[] {
  const out: string[] = [];
  for (const match of text.toLowerCase().matchAll(/[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu)) {
    const word = match[0].replace(/['’]s$/, '').replace(/’/g, "'");
    if (STOPWORDS.has(word)) continue;
    out.push(stem(word));
  }
  return out;
}

function stem(word: string): string {
  if (word.length <= 3 || /\d/.test(word)) return word;
  if (word.endsWith('ies') && word.length > 4) return `${word.slice(0, -3)}y`;
  if (/(ss|us|is)$/.test(word)) return word;
  if (/(sses|xes|ches|shes)$/.test(word)) return word.slice(0, -2);
  if (word.endsWith('s')) return word.slice(0, -1);
  if (word.endsWith('ing') && word.length > 5) return word.slice(0, -3);
  if (word.endsWith('ed') && word.length > 4) return word.slice(0, -2);
  return word;
}

/**
 * Splits text into sentences, verbatim: by line, then after `.`/`!`/`?` followed by space and a capital,
 * digit or quote (abbreviations such as "e.g." and "Dr." do not end a sentence). Bullet markers are dropped.
 *
 * @example
 * splitSentences('Paris is big. It has 2 million people.\n- Lyon is smaller.')
 * // ['Paris is big.', 'It has 2 million people.', 'Lyon is smaller.']
 */
export function splitSentences(text: string): string[] {
  const sentences: string[] = [];
  for (const rawLine of text.split(/\r?\n|\r/)) {
    const line = rawLine.replace(/^\s*(?:[-*•>]+|#{1,6}|\d{1,3}[.)])\s+/, '').trim();
    if (!line) continue;
    let start = 0;
    for (const match of line.matchAll(/[.!?。](?:["'”’)\]]*)\s+(?=["'“‘(\[]?[\p{Lu}\p{Lo}\p{N}])/gu)) {
      const end = match.index + match[0].trimEnd().length;
      const before = line.slice(start, match.index).split(/\s+/).pop() ?? '';
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
