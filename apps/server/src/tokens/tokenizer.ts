import { readFile } from 'node:fs/promises';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { createRequire } from 'node:module';
import type { GptEncoding } from 'gpt-tokenizer/GptEncoding';
import { turns } from '../turns.js';

type O200k = GptEncoding;

/**
 * gpt-tokenizer's o200k_base encoding, loaded on first use (offline model, a client that left mid-stream, an
 * upstream without usage) or, on the offline model, once the server listens; never before it listens (gpt-tokenizer's
 * modules are imported then too). Its ranks are read from the package's own data file
 * (`data/o200k_base.tiktoken`) rather than imported from its generated module: compiling that multi-megabyte
 * array literal leaves V8's compiler memory behind, several times the heap the ranks need, and the first client
 * abort would raise the server's peak RSS by that much. Same ranks, same encoder: the tests compare both.
 */
let o200k: O200k | undefined;
let loading: Promise<O200k> | undefined;

/** Loads the o200k_base tokenizer once; `encode` / `decodeGenerator` / `countTokens` need it loaded. */
export async function loadTokenizer(): Promise<void> {
  o200k ??= await (loading ??= readRanks().then(buildEncoding));
}

/** Ranks put into the encoder's lookups between yields to the event loop (a few milliseconds). */
const RANKS_PER_TURN = 2000;

/** The lookups gpt-tokenizer's `BytePairEncodingCore` constructor builds from the ranks (its public fields). */
interface EncoderLookups {
  bytePairRankDecoder: Array<string | number[]>;
  bytePairStringRankEncoder: Map<string, number>;
  bytePairNonUtfRankDecoder: Map<number, Uint8Array>;
  bytePairNonUtfSortedEncoder: Array<[Uint8Array, number]>;
  mergeableBytePairRankCount: number;
}

/**
 * The encoding of `ranks`, built between yields to the event loop. gpt-tokenizer's constructor builds its
 * lookups (a map of 200,000 strings, the byte tokens sorted) in one step of 50–170 ms, in which every open
 * stream stalls: the first counted request (a client leaving mid-stream, an upstream without usage) of a
 * server with streams open. Made with no ranks, the encoding's lookups are filled here as its constructor fills
 * them, RANKS_PER_TURN at a time. Were gpt-tokenizer's fields ever other than these, it is built in one step.
 */
export async function buildEncoding(ranks: Array<string | number[]>): Promise<O200k> {
  const [{ GptEncoding }, { compareUint8Arrays }] = await Promise.all([import('gpt-tokenizer/GptEncoding'), import('gpt-tokenizer/utfUtil')]);
  const encoding = GptEncoding.getEncodingApi('o200k_base', () => []);
  const core = (encoding as unknown as { bytePairEncodingCoreProcessor?: Partial<EncoderLookups> }).bytePairEncodingCoreProcessor;
  const { bytePairStringRankEncoder: strings, bytePairNonUtfRankDecoder: bytesOf } = core ?? {};
  const fieldsAsExpected =
    core !== undefined &&
    strings instanceof Map &&
    bytesOf instanceof Map &&
    Array.isArray(core.bytePairNonUtfSortedEncoder) &&
    typeof core.mergeableBytePairRankCount === 'number' &&
    typeof (encoding as { vocabularySize?: unknown }).vocabularySize === 'number' &&
    (encoding as unknown as { specialTokensEncoder?: unknown }).specialTokensEncoder instanceof Map;
  if (!fieldsAsExpected) return warmedUp(GptEncoding.getEncodingApi('o200k_base', () => ranks));
  const binary: Array<[Uint8Array, number]> = [];
  for (let rank = 0; rank < ranks.length; rank++) {
    if (rank > 0 && rank % RANKS_PER_TURN === 0) await yieldToEventLoop();
    const value = ranks[rank]!;
    if (typeof value === 'string') {
      strings.set(value, rank);
    } else {
      const bytes = new Uint8Array(value);
      binary.push([bytes, rank]);
      bytesOf.set(rank, bytes);
    }
  }
  core.bytePairNonUtfSortedEncoder = binary.sort((a, b) => compareUint8Arrays(a[0], b[0]));
  core.bytePairRankDecoder = ranks;
  // `readRanks` leaves no holes: the constructor's count of the ranks' keys is their length.
  core.mergeableBytePairRankCount = ranks.length;
  const built = encoding as unknown as { vocabularySize: number; specialTokensEncoder: Map<string, number> };
  built.vocabularySize = ranks.length + built.specialTokensEncoder.size;
  await yieldToEventLoop();
  return warmedUp(encoding);
}

/** The first encode sets up the encoder's lookups, which takes a while: here, not in the first request that counts. */
function warmedUp(encoding: O200k): O200k {
  encoding.encode('Hello, world. 1889 ', ORDINARY);
  return encoding;
}

/** Lines of the ranks file parsed between yields to the event loop (a few milliseconds). */
const LINES_PER_TURN = 5000;

const RANKS_FILE = createRequire(import.meta.url).resolve('gpt-tokenizer/data/o200k_base.tiktoken');

/**
 * The ranks as gpt-tokenizer's codegen writes them: index = rank, a string for a token that is valid UTF-8 on
 * its own, else its bytes; '' fills a gap in the ranks. Each line of the file is `<base64 bytes> <rank>`.
 */
export async function readRanks(file = RANKS_FILE): Promise<Array<string | number[]>> {
  const text = await readFile(file, 'latin1');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const ranks: Array<string | number[]> = [];
  // The file has 200,000 lines: parsed in one go, a first use (a client leaving mid-stream) would hold every
  // request up.
  let linesToYield = LINES_PER_TURN;
  for (let start = 0; start < text.length; ) {
    if (--linesToYield === 0) {
      linesToYield = LINES_PER_TURN;
      await yieldToEventLoop();
    }
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    const space = text.indexOf(' ', start);
    if (space > start && space < end) {
      const bytes = Buffer.from(text.slice(start, space), 'base64');
      const rank = Number(text.slice(space + 1, end));
      if (bytes.length === 0 || !Number.isInteger(rank) || rank < ranks.length) throw new Error(`${file}: line ${ranks.length + 1} is not "<base64> <rank>" in rank order`);
      while (ranks.length < rank) ranks.push('');
      ranks.push(asUtf8(utf8, bytes) ?? Array.from(bytes));
    }
    start = end + 1;
  }
  return ranks;
}

/** `bytes` as a string when they are valid UTF-8 that encodes back to the same length, else undefined. */
function asUtf8(decoder: InstanceType<typeof TextDecoder>, bytes: Uint8Array): string | undefined {
  try {
    const text = decoder.decode(bytes);
    return Buffer.byteLength(text) === bytes.length ? text : undefined;
  } catch {
    return undefined;
  }
}

function tokenizer(): O200k {
  if (!o200k) throw new Error('tokenizer used before loadTokenizer() resolved');
  return o200k;
}

/**
 * Text that spells a special token ("<|endoftext|>") is counted as the ordinary text it is, as OpenAI counts
 * message content; gpt-tokenizer's default throws on it, which made such a message a 500.
 */
const ORDINARY = { disallowedSpecial: new Set<string>() };

/**
 * BPE merging is quadratic in the length of one pre-token, and o200k's pre-tokenizer makes one pre-token of a
 * run of non-space characters (a pasted hash, base64) and one of a run of white space (a pasted page of
 * spaces would take tens of seconds). No piece handed to the encoder holds a run longer than this.
 */
const MAX_RUN = 64;
/**
 * Other text is handed to the encoder in slices of at most this many characters, each cut before a space that
 * follows a non-space character: o200k's pre-tokenizer starts a pre-token there anyway, so the tokens are the
 * same as for the whole text.
 */
const SLICE = 2048;
/** Characters of one run scanned at a time (a multiple of MAX_RUN). */
const RUN_SCAN = 64 * MAX_RUN;

/** JavaScript's `\s`, by code unit (a regular expression over the whole text scanned 9 MiB in one go). */
function isSpace(code: number): boolean {
  if (code <= 32) return code === 32 || (code >= 9 && code <= 13);
  if (code < 0xa0) return false;
  return (
    code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 ||
    code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff
  );
}

/**
 * The pieces `text` is encoded in, found in one pass and handed out as they are found: slices of text without
 * long runs, and 64-character pieces of runs longer than that (their tokens decode to the same text). Of a
 * long white-space run, the last 1–64 characters stay with the text that follows, where o200k puts a run's
 * last space (in front of the next word).
 */
function* pieces(text: string): Generator<string> {
  let pending = 0; // start of the text not handed out yet
  for (let i = 0; i < text.length; ) {
    const space = isSpace(text.charCodeAt(i));
    // A run is scanned RUN_SCAN characters at a time: 3 MB of spaces is not one step.
    const limit = Math.min(text.length, i + RUN_SCAN);
    let end = i + 1;
    while (end < limit && isSpace(text.charCodeAt(end)) === space) end++;
    const continues = end === limit && end < text.length && isSpace(text.charCodeAt(end)) === space;
    if (continues && !space && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
    if (end - i > MAX_RUN) {
      yield* slices(text, pending, i);
      let at = i;
      if (space && !continues) {
        for (; end - at > MAX_RUN; at += MAX_RUN) yield text.slice(at, at + MAX_RUN);
        pending = at;
      } else {
        while (at < end) {
          let cut = Math.min(end, at + MAX_RUN);
          // never cut a surrogate pair in two
          if (cut < end && isHighSurrogate(text.charCodeAt(cut - 1))) cut -= 1;
          yield text.slice(at, cut);
          at = cut;
        }
        pending = end;
      }
    } else if (i - pending >= SLICE && ((space && text.charCodeAt(i) === 32) || i - pending >= 4 * SLICE)) {
      // Hand out what is pending before a space that ends a word (exact), or, in text without such spaces,
      // at any run boundary (approximate): never more than a few slices are scanned before they are encoded.
      yield* slices(text, pending, i);
      pending = i;
    }
    i = end;
  }
  yield* slices(text, pending, text.length);
}

/** `text[from, to)` (no run over 64 characters) in slices of at most SLICE characters. */
function* slices(text: string, from: number, to: number): Generator<string> {
  while (to - from > SLICE) {
    // Look back at most half a slice for a space after a non-space: linear however the text looks.
    let cut = from + SLICE;
    while (cut > from + SLICE / 2 && !(text.charCodeAt(cut) === 32 && !isSpace(text.charCodeAt(cut - 1)))) cut--;
    if (cut <= from + SLICE / 2) {
      cut = from + SLICE;
      if (isHighSurrogate(text.charCodeAt(cut - 1))) cut -= 1;
    }
    yield text.slice(from, cut);
    from = cut;
  }
  if (to > from) yield text.slice(from, to);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function bpe(piece: string): number[] {
  return tokenizer().encode(piece, ORDINARY);
}

/**
 * o200k_base tokens of `text`, in time linear in its length: long runs of non-space or white-space characters
 * are encoded in 64-character pieces (see `pieces`). Synchronous: for text of any size from a request, use
 * `countTokensBounded` / `encodeBounded`, which yield to the event loop and stop early.
 *
 * @example
 * await loadTokenizer(); encode('Hello world').length === 2;
 */
export function encode(text: string): number[] {
  const tokens: number[] = [];
  // A loop, not push(...array): spreading a long array as arguments overflows the stack (>~120k tokens).
  for (const piece of pieces(text)) for (const t of bpe(piece)) tokens.push(t);
  return tokens;
}


/**
 * Characters of one text counted exactly by `countTokensBounded`; the rest is estimated at the same
 * characters-per-token ratio, so the CPU one text can take is bounded whatever its size; the exact part is
 * counted in short turns between which other requests run.
 */
export const EXACT_COUNT_CHARS = 128 * 1024;

/**
 * Usage counting for text of any size: the exact o200k_base count of the first EXACT_COUNT_CHARS characters,
 * plus the rest of the text estimated at the ratio measured on them; yields to the event loop every 2 ms, so
 * a 10 MiB message never holds up other requests. Texts counted as one job pass the same `turns()` clock.
 *
 * @example
 * await countTokensBounded('Hello world') === 2;
 * const turn = turns(); for (const m of messages) total += await countTokensBounded(m, turn);
 */
export async function countTokensBounded(text: string, turnUsed: () => boolean = turns()): Promise<number> {
  let tokens = 0;
  let counted = 0;
  for (const piece of pieces(text)) {
    if (counted >= EXACT_COUNT_CHARS) break;
    tokens += bpe(piece).length;
    counted += piece.length;
    if (turnUsed()) await yieldToEventLoop();
  }
  if (counted < text.length && counted > 0) tokens += Math.ceil(((text.length - counted) * tokens) / counted);
  return tokens;
}

/**
 * The first tokens of `text`, at most `maxTokens` of them (`truncated` when there were more), yielding to the
 * event loop every 2 ms: the offline model encodes its answers with it.
 */
export async function encodeBounded(text: string, maxTokens: number): Promise<{ tokens: number[]; truncated: boolean }> {
  const tokens: number[] = [];
  const turnUsed = turns();
  for (const piece of pieces(text)) {
    for (const t of bpe(piece)) {
      if (tokens.length >= maxTokens) return { tokens, truncated: true };
      tokens.push(t);
    }
    if (turnUsed()) await yieldToEventLoop();
  }
  return { tokens, truncated: false };
}

export function decodeGenerator(tokens: Iterable<number>): Generator<string> {
  return tokenizer().decodeGenerator(tokens);
}

export function countTokens(text: string): number {
  let count = 0;
  for (const piece of pieces(text)) count += bpe(piece).length;
  return count;
}
