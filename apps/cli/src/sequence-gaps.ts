import { createGapTracker, type SequenceRange } from '@svc/verify';
import { clockTime, kleur, printable, type Io } from './output.js';

export interface GapWatch {
  /** Tracks a received body's `sequence` (per `user_id`) and prints a line when it shows a gap or fills one. */
  observe(body: Buffer, time: Date): Promise<void>;
}

/** How many ranges a status line lists before it says how many more there are. */
const MAX_RANGES = 5;

/**
 * `3`, `3–5`, or `3, 7–9` — numbers kept short for a status line; past five ranges,
 * `3, 7–9, 12, 15, 20–22, … 4 more ranges`.
 */
function ranges(list: readonly SequenceRange[]): string {
  const shown = list.slice(0, MAX_RANGES).map(({ from, to }) => (from === to ? `${from}` : `${from}–${to}`));
  if (list.length > MAX_RANGES) shown.push(`… ${list.length - MAX_RANGES} more ranges`);
  return shown.join(', ');
}

/** `delivery 3`, or `3 deliveries: 5–7`. */
function deliveries(list: readonly SequenceRange[], count: number): string {
  return count === 1 ? `delivery ${ranges(list)}` : `${count} deliveries: ${ranges(list)}`;
}

/**
 * Watches the deliveries' `sequence` (1, 2, 3, … per API key) for missed ones, one stream per key owner
 * (`user_id`: the payload does not name the key). Status lines go to stderr: a warning when a delivery jumps
 * over numbers, a note when a missing one arrives after all (deliveries sent in parallel or retried can
 * arrive out of order). Bodies that are not JSON or have no sequence (test deliveries) are left alone.
 *
 * @example
 * const gaps = createGapWatch(io);
 * await gaps.observe(body, new Date());
 */
export function createGapWatch(io: Io): GapWatch {
  const tracker = createGapTracker();
  return {
    async observe(body, time) {
      let payload: { user_id?: unknown; sequence?: unknown };
      try {
        payload = JSON.parse(body.toString('utf8')) as typeof payload;
      } catch {
        return;
      }
      const { user_id: stream, sequence } = payload ?? {};
      if (typeof stream !== 'string' || stream === '' || !Number.isSafeInteger(sequence) || (sequence as number) < 1) return;
      const report = await tracker.track(stream, sequence as number);
      const who = `(user ${printable(stream.slice(0, 8))}…)`;
      if (report.skippedCount > 0) {
        io.err(`${clockTime(time)}  ${kleur.yellow(`! gap: ${deliveries(report.skipped, report.skippedCount)} not received before ${sequence as number}`)} ${who}\n`);
      } else if (report.late) {
        const left = report.missingCount === 0 ? 'no gap left' : `still missing ${deliveries(report.missing, report.missingCount)}`;
        io.err(`${clockTime(time)}  ${kleur.green('✔')} delivery ${sequence as number} arrived late; ${left} ${who}\n`);
      }
    },
  };
}
