/**
 * A bounded memo keyed by spelling and looked up by a range of a text, without cutting the range out:
 * the tokenizer asks for every word of every answer, and a substring plus a string hash per word was
 * most of its time. Open addressing over an FNV-1a hash of the UTF-16 code units; emptied when full.
 * A short ASCII spelling is also packed into one number, exactly, so finding it costs no string
 * comparison.
 *
 * @example
 * const table = new WordTable<number>(1000, 64);
 * table.set('boots', 5);
 * table.get('hiking boots', 7, 12); // 5
 */
export class WordTable<T> {
  /** Entry index + 1 per slot; 0 is a free slot. */
  private slots = new Int32Array(INITIAL_SLOTS);
  private slotHashes = new Int32Array(INITIAL_SLOTS);
  /** `pack` of the slot's key; -1 when it has none. */
  private slotPacks = new Float64Array(INITIAL_SLOTS);
  private keys: string[] = [];
  private values: T[] = [];

  /**
   * @param maxEntries spellings kept at most; the table starts over when it is full
   * @param maxKeyLength longer spellings are not kept (each kept entry stays small)
   */
  constructor(
    readonly maxEntries: number,
    readonly maxKeyLength: number,
  ) {}

  get size(): number {
    return this.keys.length;
  }

  /** The value stored for `text.slice(start, end)`. */
  get(text: string, start: number, end: number): T | undefined {
    return this.getPacked(pack(text, start, end), text, start, end);
  }

  /** `get`, given the range's packed form (`packedSpelling`, or -1): a tokenizer can pack a word as it reads it. */
  getPacked(packed: number, text: string, start: number, end: number): T | undefined {
    const hash = packed >= 0 ? hashPacked(packed) : hashRange(text, start, end);
    const mask = this.slots.length - 1;
    for (let s = hash & mask; ; s = (s + 1) & mask) {
      const entry = this.slots[s]! - 1;
      if (entry < 0) return undefined;
      if (this.slotHashes[s] === hash && (packed >= 0 ? this.slotPacks[s] === packed : sameText(this.keys[entry]!, text, start, end))) {
        return this.values[entry];
      }
    }
  }

  /** Stores `value` for `key`, which must not be in the table yet. */
  set(key: string, value: T): void {
    if (key.length > this.maxKeyLength) return;
    if (this.keys.length >= this.maxEntries) this.clear();
    // At most half full, so probe sequences stay short.
    if ((this.keys.length + 1) * 2 > this.slots.length) this.resize(this.slots.length * 2);
    this.keys.push(key);
    this.values.push(value);
    this.place(this.keys.length - 1);
  }

  clear(): void {
    this.keys = [];
    this.values = [];
    this.slots = new Int32Array(INITIAL_SLOTS);
    this.slotHashes = new Int32Array(INITIAL_SLOTS);
    this.slotPacks = new Float64Array(INITIAL_SLOTS);
  }

  private place(entry: number): void {
    const key = this.keys[entry]!;
    const packed = pack(key, 0, key.length);
    const hash = packed >= 0 ? hashPacked(packed) : hashRange(key, 0, key.length);
    const mask = this.slots.length - 1;
    let s = hash & mask;
    while (this.slots[s] !== 0) s = (s + 1) & mask;
    this.slots[s] = entry + 1;
    this.slotHashes[s] = hash;
    this.slotPacks[s] = packed;
  }

  private resize(slotCount: number): void {
    this.slots = new Int32Array(slotCount);
    this.slotHashes = new Int32Array(slotCount);
    this.slotPacks = new Float64Array(slotCount);
    for (let e = 0; e < this.keys.length; e++) this.place(e);
  }
}

const INITIAL_SLOTS = 1024;

/** 32-bit FNV-1a over the UTF-16 code units of `text[start, end)`. */
function hashRange(text: string, start: number, end: number): number {
  let h = 0x811c9dc5 | 0;
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h;
}

/** Mixes the high and low bits of a packed spelling (Murmur3's finaliser). */
function hashPacked(packed: number): number {
  let h = (packed | 0) ^ Math.imul((packed / 0x100000000) | 0, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** 128 ** length, for spellings of up to 7 characters: where a packed spelling keeps its length. */
const LENGTH_UNIT = Array.from({ length: 8 }, (_, length) => 128 ** length);

/**
 * The packed form of an ASCII spelling of `length` ≤ 7 characters whose character codes, read as base-128
 * digits, make `digits`: what `pack` gives for it.
 */
export function packedSpelling(length: number, digits: number): number {
  return length * LENGTH_UNIT[length]! + digits;
}

/**
 * `text[start, end)` as a number when it is at most 7 ASCII characters: the length, then 7 bits per
 * character, at most 52 bits, so exact in a double and equal only for equal spellings. -1 otherwise.
 */
function pack(text: string, start: number, end: number): number {
  if (end - start > 7) return -1;
  let packed = end - start;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128) return -1;
    packed = packed * 128 + c;
  }
  return packed;
}

function sameText(key: string, text: string, start: number, end: number): boolean {
  if (key.length !== end - start) return false;
  for (let i = 0; i < key.length; i++) if (key.charCodeAt(i) !== text.charCodeAt(start + i)) return false;
  return true;
}
