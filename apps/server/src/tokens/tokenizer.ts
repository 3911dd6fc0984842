import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { GptEncoding } from 'gpt-tokenizer/GptEncoding';

type O200k = GptEncoding;

/**
 * gpt-tokenizer's o200k_base encoding, loaded on first use (offline model, a client that left mid-stream, an
 * upstream without usage), not at start. Its ranks are read from the package's own data file
 * (`data/o200k_base.tiktoken`) rather than imported from its generated module: compiling that 2.2 MB array
 * literal left ~37 MB of RSS for 12 MB of heap, and the server's peak RSS rose by 25–30 MB on a first
 * client abort (bench/PROFILE.md, ninth session). Same ranks, same encoder: the tests compare both.
 */
let o200k: O200k | undefined;
let loading: Promise<O200k> | undefined;

/** Loads the o200k_base tokenizer once; `encode` / `decodeGenerator` / `countTokens` need it loaded. */
export async function loadTokenizer(): Promise<void> {
  o200k ??= await (loading ??= readRanks().then((ranks) => GptEncoding.getEncodingApi('o200k_base', () => ranks)));
}

const RANKS_FILE = createRequire(import.meta.url).resolve('gpt-tokenizer/data/o200k_base.tiktoken');

/**
 * The ranks as gpt-tokenizer's codegen writes them: index = rank, a string for a token that is valid UTF-8 on
 * its own, else its bytes; '' fills a gap in the ranks. Each line of the file is `<base64 bytes> <rank>`.
 */
export async function readRanks(file = RANKS_FILE): Promise<Array<string | number[]>> {
  const text = await readFile(file, 'latin1');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const ranks: Array<string | number[]> = [];
  for (let start = 0; start < text.length; ) {
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

/** BPE merging is quadratic in the length of one pre-token: longer runs are encoded in pieces of this size. */
const MAX_RUN = 64;
const LONG_RUN = /\S{65,}/g;

/**
 * o200k_base tokens of `text`, in time linear in its length: a run of more than 64 non-space characters
 * (a pasted hash, base64, or an attack) is encoded in 64-character pieces, which decode to the same text.
 *
 * @example
 * await loadTokenizer(); encode('Hello world').length === 2;
 */
export function encode(text: string): number[] {
  const { encode: encodeSpecial } = tokenizer();
  const bpe = (piece: string): number[] => encodeSpecial(piece, ORDINARY);
  LONG_RUN.lastIndex = 0;
  if (!LONG_RUN.test(text)) return bpe(text);
  const tokens: number[] = [];
  let last = 0;
  LONG_RUN.lastIndex = 0;
  for (const match of text.matchAll(LONG_RUN)) {
    if (match.index > last) tokens.push(...bpe(text.slice(last, match.index)));
    const run = match[0];
    for (let i = 0; i < run.length; ) {
      let end = Math.min(run.length, i + MAX_RUN);
      // never cut a surrogate pair in two
      if (end < run.length && /[\uD800-\uDBFF]/.test(run[end - 1]!)) end -= 1;
      for (const t of bpe(run.slice(i, end))) tokens.push(t);
      i = end;
    }
    last = match.index + run.length;
  }
  if (last < text.length) tokens.push(...bpe(text.slice(last)));
  return tokens;
}

export function decodeGenerator(tokens: Iterable<number>): Generator<string> {
  return tokenizer().decodeGenerator(tokens);
}

export function countTokens(text: string): number {
  return text ? encode(text).length : 0;
}
