/**
 * A set of choice indexes (`n` choices are 0 … n − 1) as the bits of a number, with a `Set` only for indexes
 * past 30. A stream keeps a few of these open as long as it lasts, and an empty `Set` costs about 100 bytes
 * of heap where this costs the object alone.
 *
 * @example
 * const started = new ChoiceIndexes(); started.add(0); started.has(0) === true; started.size === 1;
 */
export class ChoiceIndexes {
  private bits = 0;
  private count = 0;
  private more: Set<number> | null = null;

  add(index: number): void {
    if (this.has(index)) return;
    this.count += 1;
    if (isBit(index)) this.bits |= 1 << index;
    else (this.more ??= new Set()).add(index);
  }

  has(index: number): boolean {
    return isBit(index) ? (this.bits & (1 << index)) !== 0 : (this.more?.has(index) ?? false);
  }

  get size(): number {
    return this.count;
  }

  /** The indexes, in order. */
  indexes(): number[] {
    const out: number[] = [];
    for (let i = 0; i <= 30; i++) if ((this.bits & (1 << i)) !== 0) out.push(i);
    if (this.more) out.push(...[...this.more].sort((a, b) => a - b));
    return out;
  }
}

function isBit(index: number): boolean {
  return Number.isInteger(index) && index >= 0 && index <= 30;
}

/**
 * The number a client gets for each upstream choice index: the choice's place among the stream's indexes, as a
 * non-streamed answer's choices are numbered (sorted by index, then 0, 1, 2, …), so that a server numbering from
 * 1 gives choices 0 … n − 1 in the same order streamed or not. A stream does not say its indexes up front, so
 * the numbers wait for the upstream's first index (`base`): it is known once index 0 came, or indexes `n − 1`
 * apart (all `n` of them, numbered from the lowest), or at the end (`settle`: the lowest seen). Until then the
 * reader holds the frames (`settled` false). After it, `index − base` of 0 … n − 1 is the number; any other
 * index (a stray choice) takes the lowest number not given yet, in the order they first appear, so that choice
 * 0 — the one svc checks and audits — is there, and no two choices merge.
 *
 * @example
 * const numbers = new ChoiceNumbers(2); numbers.see(1); numbers.settled === false;
 * numbers.see(2); numbers.of(2) === 1; numbers.of(1) === 0; // a server numbering from 1
 */
export class ChoiceNumbers {
  /** Every number given. While none differs from its index (`numbers` null), an index given is its own number. */
  private readonly given = new ChoiceIndexes();
  /** Made when an index first differs from its number. */
  private numbers: Map<number, number> | null = null;
  /** Below this every number is given. */
  private lowestFree = 0;
  /** The upstream's first index; null while an index below every one seen may still come. */
  private base: number | null = null;
  private lowest = Infinity;
  private highest = -Infinity;

  constructor(private readonly n: number) {}

  /** The upstream's first index is known: `of` gives final numbers. */
  get settled(): boolean {
    return this.base !== null;
  }

  /** Notes an index the stream holds, before its number is asked for. */
  see(index: number): void {
    if (this.base !== null) return;
    this.lowest = Math.min(this.lowest, index);
    this.highest = Math.max(this.highest, index);
    if (this.lowest === 0 || this.highest - this.lowest === this.n - 1) this.base = this.lowest;
  }

  /** No more indexes will be seen before numbers are given (the stream ended, or held frames must go): the lowest seen is the first. */
  settle(): void {
    this.base ??= Number.isFinite(this.lowest) ? this.lowest : 0;
  }

  of(index: number): number {
    if (this.base === null) {
      this.see(index);
      this.settle();
    }
    if (this.numbers === null) {
      if (this.given.has(index)) return index;
    } else {
      const number = this.numbers.get(index);
      if (number !== undefined) return number;
    }
    const shifted = index - this.base!;
    let number = shifted;
    if (!(Number.isInteger(shifted) && shifted >= 0 && shifted < this.n) || this.given.has(shifted)) {
      while (this.given.has(this.lowestFree)) this.lowestFree += 1;
      number = this.lowestFree;
    }
    this.given.add(number);
    if (number !== index && this.numbers === null) {
      // The indexes so far kept their own numbers.
      this.numbers = new Map();
      for (const kept of this.given.indexes()) if (kept !== number) this.numbers.set(kept, kept);
    }
    this.numbers?.set(index, number);
    return number;
  }
}

/**
 * The choices that streamed a tool call, and the finish each is told with: a `stop` of theirs is `tool_calls`,
 * which is what clients' agent loops branch on. The upstream reader applies it to the upstream's own finish
 * (Gemini's OpenAI-compatible API ends a streamed tool call with `stop`); the relay to the finish it writes
 * itself for a choice the upstream, whichever it is, left unfinished.
 *
 * @example
 * const calling = new ToolCallingChoices(); calling.see({ index: 0, delta: { tool_calls: [call] } });
 * calling.finish(0, 'stop') === 'tool_calls';
 */
export class ToolCallingChoices {
  private readonly choices = new ChoiceIndexes();

  /** Notes `choice` when its delta carries a tool call. */
  see(choice: { index: number; delta: { tool_calls?: readonly unknown[] | null } }): void {
    const calls = choice.delta.tool_calls;
    if (calls !== undefined && calls !== null && calls.length > 0) this.choices.add(choice.index);
  }

  /** The finish choice `index` is told with, for `reason`. */
  finish<Reason>(index: number, reason: Reason): Reason | 'tool_calls' {
    return reason === 'stop' && this.choices.has(index) ? 'tool_calls' : reason;
  }
}
