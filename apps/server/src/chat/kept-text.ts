/**
 * Characters of one choice's streamed text kept for the grounding check and the audit's `response_text`.
 * V8 strings end at 2^29 - 24 characters: an upstream that streams more would make the concatenation throw.
 * The text past this is relayed to the client but not kept (nor counted, when svc counts usage itself).
 */
export const MAX_KEPT_TEXT_CHARS = 2 ** 28;

/** Pieces appended before they may be joined: an array of 17 elements is the size V8 gives one at its first push. */
const MIN_PIECES = 16;

/**
 * The streamed text of each choice, kept while a stream is relayed. An open stream holds it the whole time, and
 * a stream is thousands of small pieces: appended one by one (`text + piece`), each piece stays a string of its
 * own under a concatenation node (about 50 bytes for a token of a few characters). Pieces are joined into one
 * flat string once there are 16 of them and they add up to an eighth of what was joined before, so a piece
 * costs a few bytes, and the copying stays within a small multiple of the text's length however long it grows.
 *
 * @example
 * const texts = new KeptTexts();
 * texts.append(0, 'Hel'); texts.append(0, 'lo');
 * texts.text(0); // 'Hello'
 */
export class KeptTexts {
  // A map, not an array: the index is the upstream's, and an array indexed by 2^31 − 1 would be walked to its
  // length (seconds of one turn) by every pass over it.
  private readonly choices = new Map<number, Kept>();

  append(index: number, piece: string): void {
    let kept = this.choices.get(index);
    if (!kept) this.choices.set(index, (kept = { parts: [''], length: 0, joinedLength: 0 }));
    const room = MAX_KEPT_TEXT_CHARS - kept.length;
    if (room <= 0 || piece === '') return;
    if (piece.length > room) piece = piece.slice(0, room);
    kept.parts.push(piece);
    kept.length += piece.length;
    if (kept.parts.length > MIN_PIECES && (kept.length - kept.joinedLength) * 8 >= kept.joinedLength) join(kept);
  }

  /** The text of choice `index` so far ('' when it has none). */
  text(index: number): string {
    const kept = this.choices.get(index);
    if (!kept) return '';
    join(kept);
    return kept.parts[0]!;
  }

  /** The text of every choice that has some, in order of index. */
  all(): string[] {
    return this.indexes().map((index) => this.text(index));
  }

  /** The index of every choice that has text kept, in order. */
  indexes(): number[] {
    return [...this.choices.keys()].sort((a, b) => a - b);
  }
}

/** `parts[0]` is the text joined so far, the pieces after it wait to be joined. */
interface Kept {
  parts: string[];
  length: number;
  joinedLength: number;
}

function join(kept: Kept): void {
  const { parts } = kept;
  if (parts.length === 1) return;
  // One flat string (join copies), the array kept for the next pieces.
  parts[0] = parts.join('');
  parts.length = 1;
  kept.joinedLength = kept.length;
}
