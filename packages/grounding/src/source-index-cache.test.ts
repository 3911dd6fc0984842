import { describe, expect, it } from 'vitest';
import { checkGrounding, SourceIndexCache } from './index.js';
import { buildSourceIndex, mergeSourceIndexes, type BuiltSourceIndex, type SourceIndex } from './source-index.js';

const OBEROI = 'The Oberoi family is an Indian family famous for its hotels. The Oberoi Group is a hotel company with its head office in Delhi.';
const POSEIDON = 'Poseidon (film). Poseidon grossed $ 181,674,817 at the worldwide box office on a budget of $ 160 million.';

/** The posting of `key` in `index`, whole. */
function posting(index: SourceIndex, key: string): number[] {
  const into = new Int32Array(index.postingSize(key));
  index.readPosting(key, into);
  return [...into];
}

/** Every look-up of `view` answers as `built` does, for the words of `probe` too (mostly absent). */
function expectSameIndex(view: SourceIndex, built: BuiltSourceIndex, probe: string): void {
  const others = buildSourceIndex([probe]);
  const keys = [...new Set([...built.ids.keys(), ...others.ids.keys(), 'not', 'all'])];
  for (const key of keys) {
    expect(view.stems.has(key), key).toBe(built.stems.has(key));
    expect(view.acronyms.has(key), key).toBe(built.acronyms.has(key));
    expect(view.postingSize(key), key).toBe(built.postingSize(key));
    expect(posting(view, key), key).toEqual(posting(built, key));
    for (const second of keys) expect(view.hasBigram(key, second)).toBe(built.hasBigram(key, second));
    for (let sid = 0; sid < built.spans.length; sid++) expect(view.holds(sid, key)).toBe(built.holds(sid, key));
  }
  for (const prefix of [...built.prefixes, ...others.prefixes]) expect(view.prefixes.has(prefix)).toBe(built.prefixes.has(prefix));
  for (const v of [...built.numbers, ...others.numbers, 7]) expect(view.numbers.has(v)).toBe(built.numbers.has(v));
  expect(view.numberList).toEqual(built.numberList);
  for (let sid = -1; sid <= built.spans.length; sid++) expect(view.negatedSentences.has(sid)).toBe(built.negatedSentences.has(sid));
  expect(view.spans).toEqual(built.spans);
  expect(view.texts).toBe(built.texts);
  expect(view.empty).toBe(built.empty);
}

describe('SourceIndexCache', () => {
  it('gives the same results as a fresh index, on a hit and on a miss', () => {
    const cache = new SourceIndexCache(256, 1_000_000, 0);
    const cases = [
      { sources: [OBEROI], answer: 'Mumbai, the financial capital of India.', question: 'Where is the head office of the Oberoi Group?' },
      { sources: [OBEROI], answer: 'The head office of the Oberoi Group is in Delhi.' },
      { sources: [POSEIDON], answer: 'Poseidon grossed $181.7 million worldwide on a $160 million budget.' },
      { sources: [OBEROI, POSEIDON], answer: 'Poseidon grossed $200 million; the Oberoi Group is based in Delhi.' },
    ];
    for (let round = 0; round < 2; round++) {
      for (const input of cases) expect(checkGrounding(input, { sourceIndexCache: cache })).toEqual(checkGrounding(input));
    }
    expect(cache.size).toBe(2); // one entry per text
  });

  it('keys by the exact list of sources (no two lists share an entry)', () => {
    const cache = new SourceIndexCache(256, 1_000_000, 0);
    expect(cache.get(['ab', 'c'])).not.toBe(cache.get(['a', 'bc']));
    expect(cache.get(['a\u0000b'])).not.toBe(cache.get(['a', 'b']));
    expect(cache.get([OBEROI])).toBe(cache.get([OBEROI]));
  });

  it('drops the least recently used entry beyond its entry and character budgets', () => {
    const cache = new SourceIndexCache(2, 10_000, 0);
    const a = cache.get(['Alpha is a letter.']);
    cache.get(['Beta is a letter.']);
    expect(cache.get(['Alpha is a letter.'])).toBe(a); // a is now the most recent
    cache.get(['Gamma is a letter.']); // evicts beta
    expect(cache.size).toBe(2);
    expect(cache.get(['Alpha is a letter.'])).toBe(a);
    const big = 'Delta is a letter. '.repeat(200); // ~3,800 characters: over a quarter of the budget, not kept
    const bigIndex = cache.get([big]);
    expect(cache.get([big])).toBe(bigIndex); // the list asked for last
    cache.get(['Alpha is a letter.']);
    expect(cache.get([big])).not.toBe(bigIndex);
    expect(cache.size).toBe(2);
  });

  it('serves a repeated list from its entry, and a list changed in place from its own', () => {
    const cache = new SourceIndexCache(256, 1_000_000, 0);
    const sources = [OBEROI];
    const oberoi = cache.get(sources);
    expect(cache.get([OBEROI.slice(0, 20) + OBEROI.slice(20)])).toBe(oberoi); // equal text, another string
    sources[0] = POSEIDON;
    const poseidon = cache.get(sources);
    expect(poseidon).not.toBe(oberoi);
    expect(cache.get([POSEIDON])).toBe(poseidon);
    expect(cache.get([OBEROI])).toBe(oberoi);
    expect(cache.size).toBe(2);
  });

  it('indexes a repeated text once whatever the other texts of the list (a system prompt, new questions)', () => {
    const cache = new SourceIndexCache();
    const system = `Answer from this policy only. ${POSEIDON} ${OBEROI}`.repeat(2); // over minChars: kept
    const alone = cache.get([system]);
    for (const question of ['Where is the Oberoi head office?', 'What did Poseidon gross?', 'Who owns the Oberoi Group?']) {
      const sources = [system, question];
      const merged = cache.get(sources);
      expect(merged).not.toBe(alone);
      expectSameIndex(merged, buildSourceIndex(sources), 'Mumbai is in India.');
      expect(cache.get(sources)).toBe(merged); // the list asked for last
    }
    expect(cache.get([system])).toBe(alone); // kept across the lists
    expect(cache.size).toBe(1); // the questions, short, are not kept
  });
});

describe('mergeSourceIndexes', () => {
  const texts = [OBEROI, POSEIDON, 'It is not in the United States. Twenty five of them, all in Delhi, and every one.', OBEROI];

  it('answers as the index of the texts taken together, sentences numbered on from part to part', () => {
    const merged = mergeSourceIndexes(texts.map((t) => buildSourceIndex([t])));
    const built = buildSourceIndex(texts);
    expectSameIndex(merged, built, 'Mumbai grossed 160 dollars in the US. Hotels are famous.');
    expect(posting(merged, 'oberoi')).toEqual([0, 1, 6, 7]);
    expect(merged.negatedSentences.has(4)).toBe(true);
    // Parts of several texts each, as the cache makes them from runs of short texts.
    expectSameIndex(mergeSourceIndexes([buildSourceIndex(texts.slice(0, 3)), buildSourceIndex(texts.slice(3))]), built, 'Delhi');
  });

  it('leaves its parts as they were, and skips texts without letters or digits', () => {
    const a = buildSourceIndex([OBEROI]);
    const before = structuredClone(a);
    const merged = mergeSourceIndexes([buildSourceIndex([' -- ']), a, buildSourceIndex([POSEIDON]), a]);
    posting(merged, 'oberoi');
    merged.hasBigram('oberoi', 'group');
    expect(a).toEqual(before);
    expectSameIndex(merged, buildSourceIndex([' -- ', OBEROI, POSEIDON, OBEROI]), 'Poseidon');
    expect(mergeSourceIndexes([a])).toBe(a);
    expect(mergeSourceIndexes([buildSourceIndex(['']), buildSourceIndex(['?'])]).empty).toBe(true);
  });
});

describe('SourceIndexCache on conversations', () => {
  const system = `You answer from these notes only. ${OBEROI} ${POSEIDON}`.repeat(3);
  const conversations = [
    [system, 'Where is the Oberoi head office?'],
    [system, 'What did Poseidon gross?', 'And its budget?'],
    ['Short system prompt.', system, 'Is it in Mumbai?'],
    Array.from({ length: 2 * 8 + 1 }, (_, i) => (i % 2 === 0 ? `${system} ${i}` : `Question ${i} about Delhi?`)), // more than 8 parts
  ];
  const answers = ['The Oberoi Group has its head office in Mumbai.', 'Poseidon grossed $181.7 million on a $160 million budget, its best result.'];

  it('gives the results of an index built afresh, for every conversation and answer, on hits and misses', () => {
    const cache = new SourceIndexCache();
    for (let round = 0; round < 2; round++) {
      for (const sources of conversations) {
        for (const answer of answers) {
          const input = { sources, answer, question: sources[sources.length - 1] };
          expect(checkGrounding(input, { sourceIndexCache: cache })).toEqual(checkGrounding(input));
        }
      }
    }
  });
});
