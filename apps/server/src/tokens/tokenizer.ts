type O200k = typeof import('gpt-tokenizer/encoding/o200k_base');

// The o200k tables take ~65 MB: they load on first use (offline model, or an upstream without usage), not at start.
let o200k: O200k | undefined;
let loading: Promise<O200k> | undefined;

/** Loads the o200k_base tokenizer once; `encode` / `decodeGenerator` / `countTokens` need it loaded. */
export async function loadTokenizer(): Promise<void> {
  o200k ??= await (loading ??= import('gpt-tokenizer/encoding/o200k_base'));
}

function tokenizer(): O200k {
  if (!o200k) throw new Error('tokenizer used before loadTokenizer() resolved');
  return o200k;
}

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
  const { encode: bpe } = tokenizer();
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
