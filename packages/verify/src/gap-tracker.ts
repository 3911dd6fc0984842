/** Consecutive sequence numbers, `from` to `to`, both included. */
export interface SequenceRange {
  from: number;
  to: number;
}

/** What a gap tracker remembers of one stream of deliveries (an API key's, or a user's). */
export interface SequenceState {
  /** The highest `sequence` seen. */
  highest: number;
  /**
   * The numbers below `highest` that have not arrived (yet), as ascending, disjoint ranges — so a gap of
   * millions costs one entry.
   */
  missing: SequenceRange[];
}

/**
 * Where a gap tracker keeps its state, per stream: a `Map` in memory by default. Either method may return a
 * promise (a database, Redis). The tracker runs one `track` per stream at a time in its process; a store that
 * several receiver processes share needs one process per stream, or locking of its own.
 */
export interface GapStore {
  get(stream: string): SequenceState | undefined | Promise<SequenceState | undefined>;
  set(stream: string, state: SequenceState): void | Promise<void>;
}

/** What one tracked delivery tells. */
export interface GapReport {
  /** Every number below the highest seen that has not arrived: the deliveries missed so far, as ascending ranges. */
  missing: SequenceRange[];
  /** How many numbers `missing` holds. */
  missingCount: number;
  /** The numbers this delivery jumped over (newly missing): one range, or none when it revealed no new gap. */
  skipped: SequenceRange[];
  /** How many numbers `skipped` holds. */
  skippedCount: number;
  /** It had been missing: it arrived late and filled its hole. */
  late: boolean;
  /** Already seen (a retry or a redelivery), or before the tracker's start: nothing changed. */
  duplicate: boolean;
}

export interface GapTrackerOptions {
  /** Where the state lives; default: in memory, lost on restart. */
  store?: GapStore;
  /**
   * The first number expected of a stream the store knows nothing of (1: every delivery since the key's
   * first). Unset: the first number that arrives, so a tracker started mid-stream reports nothing before it.
   */
  start?: number;
}

export interface GapTracker {
  /**
   * Records that delivery number `sequence` of `stream` arrived and reports the gaps. Out of order is fine: a
   * late delivery fills its hole; a number seen before is reported as a duplicate and changes nothing.
   */
  track(stream: string, sequence: number): Promise<GapReport>;
}

function isPositiveInteger(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 1;
}

function memoryStore(): GapStore {
  const states = new Map<string, SequenceState>();
  return {
    get: (stream) => states.get(stream),
    set: (stream, state) => void states.set(stream, state),
  };
}

/** The range `from..to`, or none when it is empty. */
function span(from: number, to: number): SequenceRange[] {
  return from <= to ? [{ from, to }] : [];
}

function count(ranges: readonly SequenceRange[]): number {
  let total = 0;
  for (const { from, to } of ranges) total += to - from + 1;
  return total;
}

/** The index of the range holding `n`, or -1. Binary search: a stream can have many holes. */
function indexOf(ranges: readonly SequenceRange[], n: number): number {
  let low = 0;
  let high = ranges.length - 1;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    const { from, to } = ranges[mid]!;
    if (n < from) high = mid - 1;
    else if (n > to) low = mid + 1;
    else return mid;
  }
  return -1;
}

/** `ranges` without `n`, which the range at `index` holds: that range shrinks, disappears or splits in two. */
function without(ranges: readonly SequenceRange[], index: number, n: number): SequenceRange[] {
  const { from, to } = ranges[index]!;
  return [...ranges.slice(0, index), ...span(from, n - 1), ...span(n + 1, to), ...ranges.slice(index + 1)];
}

function report(missing: SequenceRange[], skipped: SequenceRange[], late: boolean, duplicate: boolean): GapReport {
  return { missing, missingCount: count(missing), skipped, skippedCount: count(skipped), late, duplicate };
}

/**
 * A stored state as ranges. Earlier versions stored `missing` as a list of numbers; such a state is read as
 * ranges (and written back as ranges on its next change), so a persisted store survives the upgrade.
 */
function fromStore(state: SequenceState | { highest: number; missing: readonly (number | SequenceRange)[] } | undefined): SequenceState | undefined {
  if (state === undefined || !state.missing.some((entry) => typeof entry === 'number')) return state as SequenceState | undefined;
  const missing: SequenceRange[] = [];
  for (const entry of state.missing) {
    const { from, to } = typeof entry === 'number' ? { from: entry, to: entry } : entry;
    const last = missing.at(-1);
    if (last && last.to + 1 === from) last.to = to;
    else missing.push({ from, to });
  }
  return { highest: state.highest, missing };
}

/** The next state of a stream after `sequence` arrived (undefined: unchanged), and the report. */
function advance(state: SequenceState | undefined, sequence: number, start: number | undefined): [SequenceState | undefined, GapReport] {
  if (state === undefined) {
    const first = start ?? sequence;
    if (sequence < first) return [undefined, report([], [], false, true)];
    const skipped = span(first, sequence - 1);
    return [{ highest: sequence, missing: skipped }, report(skipped, skipped, false, false)];
  }
  if (sequence > state.highest) {
    const skipped = span(state.highest + 1, sequence - 1);
    const missing = [...state.missing, ...skipped];
    return [{ highest: sequence, missing }, report(missing, skipped, false, false)];
  }
  const index = indexOf(state.missing, sequence);
  if (index < 0) return [undefined, report(state.missing, [], false, true)];
  const missing = without(state.missing, index, sequence);
  return [{ highest: state.highest, missing }, report(missing, [], true, false)];
}

/**
 * Reports missed audit deliveries from their `sequence` (1, 2, 3, … per API key, without gaps; test
 * deliveries have none). Track the deliveries of one key (or of one user, when each user has one key) as one
 * stream, after verifying them. A number that stays missing was not delivered: svc gave up after its retries
 * or the delivery was cancelled, or the receiver acknowledged it without keeping it.
 *
 * @example
 * const gaps = createGapTracker();
 * const event = constructEvent(rawBody, req.headers['x-svc-signature'], secret);
 * if (event.sequence !== undefined) {
 *   const { skipped, skippedCount } = await gaps.track(event.user_id, event.sequence);
 *   for (const { from, to } of skipped) console.warn(`missed ${skippedCount} deliveries: ${from}–${to}`);
 * }
 */
export function createGapTracker(options: GapTrackerOptions = {}): GapTracker {
  const { store = memoryStore(), start } = options;
  if (start !== undefined && !isPositiveInteger(start)) throw new TypeError('[@svc/verify] start must be a positive integer.');
  // One track per stream at a time: the store's read and write of a stream never interleave with another's.
  const queues = new Map<string, Promise<unknown>>();
  return {
    track(stream, sequence) {
      if (typeof stream !== 'string' || stream === '') throw new TypeError('[@svc/verify] stream must be a non-empty string.');
      if (!isPositiveInteger(sequence)) throw new TypeError('[@svc/verify] sequence must be a positive integer.');
      const previous = queues.get(stream) ?? Promise.resolve();
      const run = previous.then(async () => {
        const [next, report] = advance(fromStore(await store.get(stream)), sequence, start);
        if (next) await store.set(stream, next);
        return report;
      });
      const settled = run.catch(() => undefined);
      queues.set(stream, settled);
      void settled.then(() => {
        if (queues.get(stream) === settled) queues.delete(stream);
      });
      return run;
    },
  };
}
