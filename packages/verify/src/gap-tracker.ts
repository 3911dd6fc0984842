/** What a gap tracker remembers of one stream of deliveries (an API key's, or a user's). */
export interface SequenceState {
  /** The highest `sequence` seen. */
  highest: number;
  /** The numbers below `highest` that have not arrived (yet), ascending. */
  missing: number[];
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
  /** Every number below the highest seen that has not arrived: the deliveries missed so far, ascending. */
  missing: number[];
  /** The numbers this delivery jumped over (newly missing); empty when it revealed no new gap. */
  skipped: number[];
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

function range(from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
}

function memoryStore(): GapStore {
  const states = new Map<string, SequenceState>();
  return {
    get: (stream) => states.get(stream),
    set: (stream, state) => void states.set(stream, state),
  };
}

/** The next state of a stream after `sequence` arrived, and the report. */
function advance(state: SequenceState | undefined, sequence: number, start: number | undefined): [SequenceState | undefined, GapReport] {
  if (state === undefined) {
    const first = start ?? sequence;
    if (sequence < first) return [undefined, { missing: [], skipped: [], late: false, duplicate: true }];
    const skipped = range(first, sequence - 1);
    return [{ highest: sequence, missing: skipped }, { missing: skipped, skipped, late: false, duplicate: false }];
  }
  if (sequence > state.highest) {
    const skipped = range(state.highest + 1, sequence - 1);
    const missing = [...state.missing, ...skipped];
    return [{ highest: sequence, missing }, { missing, skipped, late: false, duplicate: false }];
  }
  if (!state.missing.includes(sequence)) return [undefined, { missing: state.missing, skipped: [], late: false, duplicate: true }];
  const missing = state.missing.filter((n) => n !== sequence);
  return [{ highest: state.highest, missing }, { missing, skipped: [], late: true, duplicate: false }];
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
 *   const { skipped } = await gaps.track(event.user_id, event.sequence);
 *   if (skipped.length > 0) console.warn(`missed deliveries ${skipped.join(', ')}`);
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
        const [next, report] = advance(await store.get(stream), sequence, start);
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
