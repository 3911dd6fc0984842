import { randomBytes } from 'node:crypto';
import { isRecord } from '../is-record.js';

/**
 * The `index` of streamed tool-call deltas that come without one. OpenAI numbers each call of a choice and
 * repeats the number on every fragment of it; some OpenAI-compatible servers (Gemini's) leave it out and send
 * parallel calls one per frame. Clients merge fragments by index, so numbering such calls by their position
 * in the frame would fuse every call into the first. Here a call without an index takes the index of its `id`
 * (a new id: the next index); a fragment without an id is the choice's last call when it is alone in its
 * frame, else numbered by its position, as before. One instance per stream.
 *
 * @example
 * const indexes = new ToolCallIndexes();
 * indexes.of(0, { id: 'call_a' }, 0, 1); // 0
 * indexes.of(0, {}, 0, 1);               // 0: more of call_a
 * indexes.of(0, { id: 'call_b' }, 0, 1); // 1
 */
export class ToolCallIndexes {
  /** Per choice: the index of each call id, the last call's index, and how many indexes were given. */
  // Made on the first tool-call fragment: most streams carry none, and every open stream holds one of these.
  private choices: Map<number, { ids: Map<string, number>; last: number; count: number }> | undefined;

  /** The index of `call`, the `position`-th of the `calls` tool calls in choice `choice`'s delta of one frame. */
  of(choice: number, call: Record<string, unknown>, position: number, calls: number): number {
    this.choices ??= new Map();
    let seen = this.choices.get(choice);
    if (seen === undefined) {
      seen = { ids: new Map(), last: 0, count: 0 };
      this.choices.set(choice, seen);
    }
    const id = typeof call.id === 'string' && call.id !== '' ? call.id : undefined;
    let index: number;
    if (typeof call.index === 'number') index = call.index;
    else if (id !== undefined) {
      index = seen.ids.get(id) ?? seen.count;
      seen.ids.set(id, index);
    } else if (call.id === '' && isRecord(call.function) && typeof call.function.name === 'string' && call.function.name !== '') {
      // Gemini's older models send each call whole, one per frame, with `"id": ""`: a named one is a new call.
      index = calls === 1 ? seen.count : position;
    } else index = calls === 1 ? seen.last : position;
    seen.last = index;
    seen.count = Math.max(seen.count, index + 1);
    return index;
  }

  /**
   * The `id` the fragment of call `index` of choice `choice` goes on with: the upstream's when it sent one; for
   * the first fragment of a call without one (Gemini's older models send `"id": ""`), a new `call_…` id, so
   * clients can match the tool's result to the call; undefined for the call's later fragments, which carry
   * none, as OpenAI sends them.
   */
  idOf(choice: number, index: number, id: unknown): string | undefined {
    this.named ??= new Map();
    let given = this.named.get(choice);
    if (given === undefined) {
      given = new Set();
      this.named.set(choice, given);
    }
    if (typeof id === 'string' && id !== '') {
      given.add(index);
      return id;
    }
    if (given.has(index)) return undefined;
    given.add(index);
    return newToolCallId();
  }

  /** Per choice: the call indexes that have an id. */
  private named: Map<number, Set<number>> | undefined;
}

/** A tool call id for a call the upstream gave none: OpenAI's form, `call_` and 24 letters and digits. */
export function newToolCallId(): string {
  const bytes = randomBytes(24);
  let out = 'call_';
  for (const byte of bytes) out += ID_CHARS[byte % ID_CHARS.length]!;
  return out;
}
const ID_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
