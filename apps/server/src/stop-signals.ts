/** What a stop signal asks of `svc-server start`: the graceful stop, nothing more, or to stop at once. */
export type StopSignalAnswer = 'stop' | 'ignore' | 'stop-now';

/** How soon after the first a second identical stop signal counts as the same one. */
export const SAME_SIGNAL_MS = 100;

/**
 * Reads the stop signals as they come. The first asks for the graceful stop. A second SIGINT or SIGTERM (Ctrl-C
 * twice, a supervisor's stop sent again) is "stop now", except:
 * - a hangup, which comes twice without anyone insisting: when a terminal window closes, its shell passes its
 *   SIGHUP on to the foreground job, and the kernel sends that job's group another as the shell exits;
 * - the same signal again within SAME_SIGNAL_MS, which is one stop sent twice: GNU `timeout` and a service
 *   manager's KillMode=mixed signal the process and then its whole group, which holds it too. A human pressing
 *   Ctrl-C twice takes longer.
 *
 * @example
 * const read = stopSignalReader();
 * read('SIGTERM'); // 'stop'
 * read('SIGTERM'); // 'ignore' at once, 'stop-now' later
 */
export function stopSignalReader(now: () => number = () => performance.now()): (signal: NodeJS.Signals) => StopSignalAnswer {
  let first: { signal: NodeJS.Signals; at: number } | undefined;
  return (signal) => {
    if (first === undefined) {
      first = { signal, at: now() };
      return 'stop';
    }
    if (signal === 'SIGHUP') return 'ignore';
    if (signal === first.signal && now() - first.at < SAME_SIGNAL_MS) return 'ignore';
    return 'stop-now';
  };
}
