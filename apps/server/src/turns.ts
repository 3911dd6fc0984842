import { setImmediate as yieldToEventLoop } from 'node:timers/promises';

/**
 * Milliseconds of synchronous work between yields to the event loop. Several large requests work at once, each
 * a turn per loop iteration: their turns add up to what every other request waits.
 */
const TURN_MS = 2;

/**
 * A clock of turns: says when a turn of TURN_MS is used up (then the caller yields). One clock per job: a
 * prompt of 20,000 short messages is one counting job, whose texts share the turns; a clock per text would
 * never run out.
 *
 * @example
 * const turn = turns(); for (const item of items) { work(item); if (turn()) await yieldToEventLoop(); }
 */
export function turns(): () => boolean {
  let since = performance.now();
  return () => {
    const now = performance.now();
    if (now - since < TURN_MS) return false;
    since = now;
    return true;
  };
}

/**
 * Yields to the event loop when `turn`'s time is used up: between the phases of one job (parse, translate,
 * number, store, serialise), so a large request takes as many turns as its work needs. A pass that waited
 * on I/O counts the wait too, so a small request may yield once after it: a setImmediate, cheap.
 *
 * @example
 * const turn = turns(); validate(body); await pace(turn); translate(body); await pace(turn);
 */
export async function pace(turn: () => boolean): Promise<void> {
  if (turn()) await yieldToEventLoop();
}
