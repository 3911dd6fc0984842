import type { Logger } from 'pino';

/** How long a stop waits, once every connection is closed, for the audits of the requests cut or left by their clients. */
export const SETTLE_MS = 10_000;

/**
 * When the last part of a stop (what is recorded and closed after the drain) must be over: SVC_SHUTDOWN_TIMEOUT_MS
 * after `restFrom`, the moment that part began, and never less than the SETTLE_MS the audits of the cut requests are
 * given. With the drain bounded by SVC_SHUTDOWN_TIMEOUT_MS too, a stop lasts at most twice it, or it plus 10 s when that
 * is longer, as docs/configuration.md (SVC_SHUTDOWN_TIMEOUT_MS) says.
 *
 * @example
 * await stepsBy(steps, restDeadline(Date.now(), config.shutdownTimeoutMs), logger);
 */
export function restDeadline(restFrom: number, shutdownTimeoutMs: number): number {
  return restFrom + Math.max(shutdownTimeoutMs, SETTLE_MS);
}

/** One step of a graceful stop's last part: its work, and what it names in the log when it did not finish in time. */
export interface StopStep {
  /** How the log names it when it was left unfinished (`left`), e.g. `'usage counters'`. */
  name: string;
  /** Its work, started when the step before it finished or was left. */
  run: () => unknown;
  /** Waited for at most this long (ms) even when the deadline is later. */
  atMostMs?: number;
  /** What it leaves undone, added to the log line when it was left (e.g. `{ uncounted_requests: 3 }`). */
  left?: () => Record<string, unknown>;
}

/**
 * Runs `steps` one after another, each waited for until `deadline` (epoch ms) at most; a step not finished by then is
 * left to go on by itself and the next one starts. A database that answers slowly or not at all (Postgres stalled, a
 * statement waiting on a lock an operator holds, with `?lock_timeout=` long) would otherwise hold the stop for as
 * long as it lasts, past the supervisor's grace and its SIGKILL. What was left is logged once, by name. Rejects
 * with the first step's failure, after every step ran.
 *
 * @example
 * await stepsBy([{ name: 'usage counters', run: () => usage.close() }, { name: 'database close', run: () => store.close() }], Date.now() + 25_000, logger);
 */
export async function stepsBy(steps: StopStep[], deadline: number, logger: Pick<Logger, 'warn'>): Promise<string[]> {
  const left: StopStep[] = [];
  let failure: { err: unknown } | undefined;
  for (const step of steps) {
    let work: Promise<unknown>;
    try {
      work = Promise.resolve(step.run());
    } catch (err) {
      work = Promise.reject(err);
    }
    const until = step.atMostMs === undefined ? deadline : Math.min(deadline, Date.now() + step.atMostMs);
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      work.then(
        () => true,
        (err: unknown) => {
          failure ??= { err };
          return true;
        },
      ),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, until - Date.now())))),
    ]);
    clearTimeout(timer);
    if (!finished) {
      left.push(step);
      // Its failure, should it come, is nobody's to report: the stop went on without it.
      work.catch(() => {});
    }
  }
  if (left.length > 0) {
    logger.warn(
      Object.assign({ left: left.map((step) => step.name) }, ...left.map((step) => step.left?.() ?? {})),
      'stopping: what is named in `left` did not finish within SVC_SHUTDOWN_TIMEOUT_MS (the database answers slowly or not at all); the process stops without it',
    );
  }
  if (failure) throw failure.err;
  return left.map((step) => step.name);
}
