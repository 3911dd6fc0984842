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
