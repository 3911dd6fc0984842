import { createGapTracker } from '@svc/verify';
import { clockTime, kleur, type Io } from './output.js';

export interface GapWatch {
  /** Tracks a received body's `sequence` (per `user_id`) and prints a line when it shows a gap or fills one. */
  observe(body: Buffer, time: Date): Promise<void>;
}

/** `3`, `3–5`, or `3, 7–9` — numbers kept short for a status line. */
function ranges(numbers: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < numbers.length; ) {
    let j = i;
    while (j + 1 < numbers.length && numbers[j + 1] === numbers[j]! + 1) j++;
    parts.push(i === j ? `${numbers[i]}` : `${numbers[i]}–${numbers[j]}`);
    i = j + 1;
  }
  return parts.join(', ');
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
      const who = `(user ${stream.slice(0, 8)}…)`;
      if (report.skipped.length > 0) {
        const what = report.skipped.length === 1 ? 'delivery' : 'deliveries';
        io.err(`${clockTime(time)}  ${kleur.yellow(`! gap: ${what} ${ranges(report.skipped)} not received before ${sequence as number}`)} ${who}\n`);
      } else if (report.late) {
        const left = report.missing.length === 0 ? 'no gap left' : `still missing: ${ranges(report.missing)}`;
        io.err(`${clockTime(time)}  ${kleur.green('✔')} delivery ${sequence as number} arrived late; ${left} ${who}\n`);
      }
    },
  };
}
