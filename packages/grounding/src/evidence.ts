import { PREFIX_LEN, type Lookup, type Posting, type SourceIndex } from './source-index.js';
import type { Word } from './tokenize.js';

/** Support of a word related to a source word ("Australian" in "Australian-British"). */
export const RELATED_SUPPORT = 0.6;

/** What the sources say about one word, whatever the answer and question it is read in. */
export interface Evidence {
  /** The word or its stem is in the sources. */
  inSources: boolean;
  /** 1 in the sources (also as an acronym), RELATED_SUPPORT for a related form, 0 otherwise. */
  support: number;
  /** Source sentences with the stem as a content word. */
  posting: Posting | undefined;
  /** Stems that follow the stem in the sources (content bigrams). */
  successors: Lookup<string> | undefined;
}

// Per source index, the evidence of the words looked up so far: an answer repeats words, and answers
// checked against a cached index repeat them across checks. A weak map, so a memo goes with its index.
const memos = new WeakMap<SourceIndex, Map<Word, Evidence>>();

/**
 * Reads the evidence for words in `index`, once per index and word. Entries kept per index: a small
 * multiple of the index's own size; the memo starts over when it is full.
 */
export function evidenceReader(index: SourceIndex): (word: Word) => Evidence {
  let memo = memos.get(index);
  if (memo === undefined) memos.set(index, (memo = new Map()));
  const known = memo;
  // (`postings.size` counts the content stems; the spellings looked up are a few per stem.)
  const limit = 512 + 4 * index.postings.size;
  return (word) => {
    let evidence = known.get(word);
    if (evidence === undefined) {
      evidence = readEvidence(index, word);
      if (known.size >= limit) known.clear();
      known.set(word, evidence);
    }
    return evidence;
  };
}

function readEvidence(index: SourceIndex, word: Word): Evidence {
  const inSources = index.stems.has(word.stem) || index.stems.has(word.norm);
  return { inSources, support: inSources ? 1 : relatedSupport(index, word), posting: index.postings.get(word.stem), successors: index.bigrams.get(word.stem) };
}

function relatedSupport(index: SourceIndex, word: Word): number {
  if (word.norm.length >= 2 && word.norm.length <= 6 && (index.acronyms.has(word.norm) || index.acronyms.has(word.stem))) return 1;
  // A compound like "Australian-British" is split by the tokenizer; a word glued from source words counts.
  if (word.stem.length >= PREFIX_LEN && index.prefixes.has(word.stem.slice(0, PREFIX_LEN))) return RELATED_SUPPORT;
  return 0;
}
