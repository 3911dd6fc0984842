/** How many trailing characters of an id the 80-column output shows. */
const SHORT_LENGTH = 8;

/**
 * The tail of an id, which is its random part (`whd_` ids start with a timestamp, so their heads
 * collide); `--wide` prints ids in full.
 *
 * @example
 * shortId('whd_0193a1b2c3d4e5f60718293a4b5c6d7e'); // '4b5c6d7e'
 */
export function shortId(id: string): string {
  return id.length <= SHORT_LENGTH ? id : id.slice(-SHORT_LENGTH);
}

/** True when `candidate` names `id`: the id itself or a tail of it at least 4 characters long (`…` allowed in front). */
export function idMatches(id: string, candidate: string): boolean {
  const tail = candidate.replace(/^…/, '');
  return id === tail || (tail.length >= 4 && id.endsWith(tail));
}

/**
 * Cuts `text` to at most `max` characters, ending with `…` when cut.
 *
 * @example
 * truncate('chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9', 14); // 'chatcmpl-3Jx0…'
 */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  return max <= 1 ? '…'.slice(0, max) : `${text.slice(0, max - 1)}…`;
}
