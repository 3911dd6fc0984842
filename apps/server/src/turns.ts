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
