/**
 * The `index` of streamed tool-call deltas that come without one. OpenAI numbers each call of a choice and
 * repeats the number on every fragment of it; some OpenAI-compatible servers (Gemini's) leave it out and send
 * parallel calls one per frame. Clients merge fragments by index, so numbering such calls by their position
 * in the frame would fuse every call into the first. Here a call without an index is a new call when it has a
 * new `id` or follows another call in the same frame, and otherwise a fragment of the choice's last call.
 * One instance per stream.
 *
 * @example
 * const indexes = new ToolCallIndexes();
 * indexes.of(0, { id: 'call_a' }, 0); // 0
 * indexes.of(0, {}, 0);               // 0: more of call_a
 * indexes.of(0, { id: 'call_b' }, 0); // 1
 */
export class ToolCallIndexes {
  /** Per choice: the last call's index and id, and how many calls were numbered. */
  private readonly choices = new Map<number, { last: number; id: unknown; count: number }>();

  /** The index of `call`, the `position`-th call of choice `choice`'s delta in its frame. */
  of(choice: number, call: Record<string, unknown>, position: number): number {
    let seen = this.choices.get(choice);
    if (seen === undefined) {
      seen = { last: -1, id: undefined, count: 0 };
      this.choices.set(choice, seen);
    }
    const id = typeof call.id === 'string' && call.id !== '' ? call.id : undefined;
    let index: number;
    if (typeof call.index === 'number') index = call.index;
    else if (seen.last === -1 || position > 0 || (id !== undefined && id !== seen.id)) index = seen.count;
    else index = seen.last;
    seen.last = index;
    if (id !== undefined) seen.id = id;
    seen.count = Math.max(seen.count, index + 1);
    return index;
  }
}
