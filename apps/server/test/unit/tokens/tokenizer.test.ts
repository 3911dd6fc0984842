import { beforeAll, describe, expect, it } from 'vitest';
import { encode as reference } from 'gpt-tokenizer/encoding/o200k_base';
import referenceRanks from 'gpt-tokenizer/bpeRanks/o200k_base';
import { readFileSync } from 'node:fs';
import { countUsage } from '../../../src/chat/prompt.js';
import { GptEncoding } from 'gpt-tokenizer/GptEncoding';
import { buildEncoding, countTokens, countTokensBounded, decodeGenerator, encode, encodeBounded, EXACT_COUNT_CHARS, loadTokenizer, readRanks } from '../../../src/tokens/tokenizer.js';

beforeAll(loadTokenizer);

const decode = (tokens: number[]) => [...decodeGenerator(tokens)].join('');

describe('readRanks', () => {
  it("gives exactly the ranks of gpt-tokenizer's generated o200k_base module", async () => {
    const ranks = await readRanks();
    expect(ranks.length).toBe(referenceRanks.length);
    let differing = 0;
    let bytes = 0;
    for (let i = 0; i < ranks.length; i++) {
      const [mine, theirs] = [ranks[i]!, referenceRanks[i]!];
      if (typeof theirs !== 'string') bytes++;
      if (typeof mine === 'string' ? mine !== theirs : typeof theirs === 'string' || mine.join() !== theirs.join()) differing++;
    }
    expect(bytes).toBeGreaterThan(1000); // tokens that are not UTF-8 on their own are byte arrays in both
    expect(differing).toBe(0);
  });
});

describe('buildEncoding', () => {
  it("fills the encoder's lookups between turns of the event loop, not in one step", async () => {
    const ranks = await readRanks();
    let turns = 0;
    let building = true;
    const turn = () => {
      turns++;
      if (building) setImmediate(turn);
    };
    setImmediate(turn);
    await buildEncoding(ranks);
    building = false;
    // 200,000 ranks, 2,000 a turn: other requests run about a hundred times while it builds.
    expect(ranks.length).toBeGreaterThan(199_000);
    expect(turns).toBeGreaterThanOrEqual(Math.floor(ranks.length / 2000));
  });

  it("builds what gpt-tokenizer's constructor builds from the same ranks", async () => {
    const ranks = await readRanks();
    const stepped = await buildEncoding(ranks);
    const oneStep = GptEncoding.getEncodingApi('o200k_base', () => ranks);
    const lookups = (encoding: GptEncoding) => {
      const core = (encoding as unknown as { bytePairEncodingCoreProcessor: Record<string, unknown> }).bytePairEncodingCoreProcessor;
      return {
        strings: [...(core.bytePairStringRankEncoder as Map<string, number>)],
        bytes: [...(core.bytePairNonUtfRankDecoder as Map<number, Uint8Array>)].map(([rank, b]) => [rank, [...b]]),
        sorted: (core.bytePairNonUtfSortedEncoder as Array<[Uint8Array, number]>).map(([b, rank]) => [[...b], rank]),
        count: core.mergeableBytePairRankCount,
        decoder: core.bytePairRankDecoder,
        vocabulary: encoding.vocabularySize,
      };
    };
    expect(lookups(stepped)).toEqual(lookups(oneStep));
    const text = mixedText(7, 2000);
    expect(stepped.encode(text, { disallowedSpecial: new Set() })).toEqual(oneStep.encode(text, { disallowedSpecial: new Set() }));
  });
});

/**
 * Deterministic text over scripts, emoji, combining marks, digits, white space runs and special-token text,
 * with no run of more than 64 non-space characters (those are encoded in pieces on purpose, tested below).
 */
function mixedText(seed: number, length: number): string {
  const pieces = ['the ', 'The', ' tower', '1889', ' 3.14', 'naïve', 'café', 'e\u0301', '日本語', '中文', 'Привет', 'مرحبا', '🎉', '👩‍💻', '\n', '\n\n', '   ', '\t', "'s", "n't", '<|endoftext|>', '<|im_start|>', '$', '%', '—', '…', 'https://example.com/a?b=c', 'CamelCase', 'snake_case', '\u00a0', '\ud83d\ude00'];
  let x = seed;
  let out = '';
  while (out.length < length) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += pieces[x % pieces.length];
    if (/\S{40,}$/.test(out)) out += ' ';
  }
  return out;
}

describe('encode', () => {
  it('equals plain o200k_base on mixed text and on this repository\'s README and API page (lines without 65-character runs)', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const text = mixedText(seed, 40 + (seed % 7) * 60);
      expect(text).not.toMatch(/\S{65,}/);
      expect(encode(text)).toEqual(reference(text, { disallowedSpecial: new Set() }));
    }
    const readme = ['README.md', 'docs/api.md']
      .map((file) => readFileSync(new URL(`../../../../../${file}`, import.meta.url), 'utf8'))
      .join('\n')
      .split('\n')
      .filter((line) => !/\S{65,}/.test(line))
      .join('\n');
    expect(readme.length).toBeGreaterThan(10_000);
    // docs/api.md spells special tokens (how usage is counted): as ordinary text, as in the mixed text above.
    expect(readme).toContain('<|endoftext|>');
    expect(encode(readme)).toEqual(reference(readme, { disallowedSpecial: new Set() }));
  });

  it('equals plain o200k_base on ordinary text', () => {
    for (const text of ['Hello world', 'The Eiffel Tower (330 m) was completed in 1889.', 'naïve café 🎉 日本語', '']) {
      expect(encode(text)).toEqual(reference(text));
    }
  });

  it('round-trips long runs, including surrogate pairs at piece boundaries', () => {
    const runs = [
      'a'.repeat(1000),
      `${'x'.repeat(63)}😀${'y'.repeat(200)}`,
      `pre ${'ab'.repeat(500)} post`,
      '😀'.repeat(300),
      // across the 4096-character steps a run is scanned in
      `${'x'.repeat(4095)}${'😀'.repeat(3000)}`,
      `a${' '.repeat(4096 * 3 + 5)}b${'\n'.repeat(5000)}c`,
    ];
    for (const text of runs) expect(decode(encode(text))).toBe(text);
  });

  it('stays linear on a 2 MB single word (plain BPE would take hours)', () => {
    const text = 'a'.repeat(2_000_000);
    const count = countTokens(text);
    expect(count).toBeGreaterThan(2_000_000 / 64);
    expect(count).toBeLessThan(2_000_000);
  });

  it('stays linear on long white-space runs (200 KB of spaces took 41 s) and round-trips them', () => {
    for (const text of [' '.repeat(3_000_000), '\n'.repeat(1_000_000), `word${' '.repeat(200_000)}word`, ` \t\n`.repeat(100_000)]) {
      const count = countTokens(text);
      expect(count).toBeGreaterThan(0);
      expect(count).toBeLessThan(text.length);
    }
    const mixed = `a ${' '.repeat(1000)}b\n${'\n'.repeat(500)}c   d`;
    expect(decode(encode(mixed))).toBe(mixed);
  });

  it('cuts long ordinary text into slices without changing a token', () => {
    const text = Array.from({ length: 200 }, (_, seed) => mixedText(seed + 1, 400)).join(' ');
    expect(text.length).toBeGreaterThan(8192 * 5);
    expect(text).not.toMatch(/\S{65,}|\s{65,}/);
    expect(encode(text)).toEqual(reference(text, { disallowedSpecial: new Set() }));
  });

  it('never spreads a long token array (an answer of over ~120k tokens overflowed the stack)', () => {
    const text = `${'x'.repeat(100)} ${'word '.repeat(300_000)}`;
    expect(encode(text).length).toBeGreaterThan(300_000);
  });
});

describe('bounded counting', () => {
  it('is exact up to EXACT_COUNT_CHARS and estimates beyond, within a few per cent', async () => {
    const small = Array.from({ length: 50 }, (_, seed) => mixedText(seed + 1, 400)).join(' ');
    expect(await countTokensBounded(small)).toBe(countTokens(small));
    // (mixedText is slow beyond a few hundred characters: its run check rescans the text.)
    const chunks = Array.from({ length: 100 }, (_, seed) => mixedText(seed + 1, 400));
    const big = Array.from({ length: 800 }, (_, i) => chunks[(i * 37) % 100]).join(' ');
    expect(big.length).toBeGreaterThan(EXACT_COUNT_CHARS * 2);
    const [estimated, exact] = [await countTokensBounded(big), countTokens(big)];
    expect(Math.abs(estimated - exact) / exact).toBeLessThan(0.05);
    expect(await countTokensBounded('')).toBe(0);
  });

  it('counts a prompt of 20,000 short messages in turns of one clock: the event loop runs between them, and the count is exact', async () => {
    const messages = Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Item ${i} is a tower of ${i} metres.` }));
    await loadTokenizer(); // its first load yields too: only the count's own turns are counted
    // A clock whose turn ends every 500th look: the count must consult this one clock across all its texts.
    let looks = 0;
    const turn = () => ++looks % 500 === 0;
    let turnsBetween = 0;
    let counting = true;
    const tick = () => {
      if (!counting) return;
      turnsBetween += 1;
      setImmediate(tick);
    };
    setImmediate(tick);
    const usage = await countUsage(messages, ['Done.'], turn);
    counting = false;
    expect(looks).toBeGreaterThanOrEqual(20_000);
    // A clock per message never ran out (each takes microseconds): the whole prompt was one turn.
    expect(turnsBetween).toBeGreaterThanOrEqual(Math.floor(looks / 500) - 1);
    const exact = messages.reduce((sum, m) => sum + 3 + countTokens(`${m.role}\n${m.content}`), 3);
    expect(usage.prompt_tokens).toBe(exact);
    expect(usage.completion_tokens).toBe(countTokens('Done.'));
  });

  it('encodes at most maxTokens', async () => {
    const text = 'word '.repeat(10_000);
    const { tokens, truncated } = await encodeBounded(text, 100);
    expect(tokens).toEqual(encode(text).slice(0, 100));
    expect(truncated).toBe(true);
    expect(await encodeBounded('Hello world', 100)).toEqual({ tokens: encode('Hello world'), truncated: false });
  });
});
