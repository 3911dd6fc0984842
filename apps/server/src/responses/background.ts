import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { ResponseObject } from '@svc/protocol';
import type { Orphan, ResponsesStore, RunningLease } from '../storage/responses-store.js';
import { Cancellation } from '../upstream/upstream.js';
import { hasStoredEnd, readStoredResponse, rebuiltStoredEnd, recordOrphanAudit, recordStoredEnd, runWithEnd, standInResponse, type OrphanAuditDeps } from './background-audit.js';

/**
 * How long a process vouches for the background responses it runs, pushed forward every quarter of it. Past it
 * another instance (or this one's next start) ends them as `failed`: long enough that a pause of the event loop or a
 * database hiccup of several seconds ends nothing, short enough that a client polling a crashed instance's response
 * learns it within a minute.
 */
export const BACKGROUND_LEASE_MS = 20_000;

/** How often the process running background responses looks for a cancel asked on another instance. */
export const CANCEL_POLL_MS = 1_000;

/** How often a DELETE reads the row of a run whose end is being written, until that write is done (`endBeforeDelete`). */
const WRITE_READ_MS = 100;
/** Writes of a run's end a DELETE waits for (each within its writer's lease) before it ends the run itself. */
const MAX_WRITE_WAITS = 5;

/** Orphaned responses ended in one statement's worth (the rest at the next look). */
const ORPHANS_BATCH = 100;

/**
 * A background response's run stopped by `POST /v1/responses/{id}/cancel`: it ends `cancelled`, audited 409 (the
 * request ended by a later request of its client), which a receiver tells apart from a client that went away (499).
 */
export class CancelRequested extends Error {
  readonly auditStatus = 409;
  constructor() {
    super('cancelled by POST /v1/responses/{id}/cancel');
    this.name = 'CancelRequested';
  }
}

/**
 * A background response's run cut by the graceful stop of its server: it ends `failed`, saying so, audited 503 (the
 * service went away; sending the request again is the remedy), not as a client that went away (499).
 */
export class ServerStopping extends Error {
  readonly auditStatus = 503;
  constructor() {
    super('svc stopped (SIGTERM or SIGINT) before this background response finished; send the request again.');
    this.name = 'ServerStopping';
  }
}

/** The `error` of a background response ended because of `reason`, when `reason` is the server's own. */
export function stoppedError(reason: unknown): { code: string; message: string } | undefined {
  return reason instanceof ServerStopping ? { code: 'server_error', message: reason.message } : undefined;
}

export interface BackgroundOptions {
  store: ResponsesStore;
  /** Where the audit of a response ended because nobody ran it goes (`recordOrphanAudit`). */
  audit: OrphanAuditDeps['audit'];
  keys: OrphanAuditDeps['keys'];
  deliveries: OrphanAuditDeps['deliveries'];
  /** This process's id in the rows it runs (its webhook worker's: a cluster primary ends a dead worker's by it). */
  owner: string;
  clock: () => number;
  logger: Logger;
  /** This process holds its database alone (embedded SQLite, one process): whatever runs at its start was left by the previous run. */
  exclusive?: boolean;
  leaseMs?: number;
  pollMs?: number;
}

interface Run {
  abort: Cancellation;
  done: Promise<void>;
}

/**
 * The background responses (`background: true`) this process runs, after their POST was answered. Each is stored
 * running with a lease (`lease()`); this keeps the leases alive, stops a run whose cancel was asked on any instance
 * (at once here, else within CANCEL_POLL_MS), and ends as `failed` the runs of processes that died (lapsed leases).
 *
 * @example
 * const background = new BackgroundResponses({ store: store.responses, owner: worker.id, clock, logger });
 * background.start();
 * background.run(id, abort, work);
 * await background.stop(10_000);
 */
export class BackgroundResponses {
  readonly owner: string;
  readonly #runs = new Map<string, Run>();
  readonly #options: BackgroundOptions;
  readonly #leaseMs: number;
  readonly #pollMs: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #stopping = new AbortController();
  #lastRenewAt = 0;
  #lastSweepAt = 0;
  /** The look under way, so that `stop` does not close the store under it. */
  #looking: Promise<void> = Promise.resolve();

  constructor(options: BackgroundOptions) {
    this.#options = options;
    this.owner = options.owner;
    this.#leaseMs = options.leaseMs ?? BACKGROUND_LEASE_MS;
    this.#pollMs = options.pollMs ?? CANCEL_POLL_MS;
  }

  /** The lease a response starting now is stored with. */
  lease(): RunningLease {
    return { owner: this.owner, until: this.#options.clock() + this.#leaseMs };
  }

  /** Fires when the graceful stop begins: what follows background responses from here (a stream read again) ends. */
  get stopping(): AbortSignal {
    return this.#stopping.signal;
  }

  /** Runs in this process now. */
  get size(): number {
    return this.#runs.size;
  }

  /** Starts the looks (cancels, leases, orphans); the first ends what a previous run of an exclusive server left. */
  start(): void {
    if (this.#timer || this.#stopped) return;
    const first = this.#options.exclusive ? endOrphans(this.#orphanDeps(), { otherThan: this.owner }, PREVIOUS_RUN) : Promise.resolve();
    this.#looking = first.catch((err: unknown) => this.#options.logger.error({ err }, 'could not end the background responses left by the previous run')).then(() => this.#schedule());
  }

  /**
   * Runs `work` (which stores the response's final state and records its audit) under `abort`, which `cancel` and
   * `stop` fire; resolves when it ended. Never rejects: the work's own failure is logged.
   */
  run(id: string, abort: Cancellation, work: () => Promise<void>): Promise<void> {
    const done = work()
      .catch((err: unknown) => this.#options.logger.error({ err, response_id: id }, 'background response failed unexpectedly'))
      .finally(() => this.#runs.delete(id));
    this.#runs.set(id, { abort, done });
    return done;
  }

  /** Whether this process runs `id`. */
  has(id: string): boolean {
    return this.#runs.has(id);
  }

  /** Stops this process's run of `id` (no-op when it runs no such) and resolves once its final state is stored. */
  async cancel(id: string): Promise<void> {
    const run = this.#runs.get(id);
    if (!run) return;
    run.abort.abort(new CancelRequested());
    await run.done;
  }

  /**
   * Ends the run of `id` when its end is stored with its audit still to record (`recordStoredEnd`), as whoever finds
   * it nobody's does: for a cancel or a DELETE that finds nothing left to stop, which would otherwise wait for a runner
   * that may be gone. Whether this call ended it.
   */
  async endStored(keyId: string, id: string): Promise<boolean> {
    const { store } = this.#options;
    const run = await runWithEnd(store, keyId, id);
    if (!hasStoredEnd(run)) return false;
    return recordStoredEnd(this.#orphanDeps(), keyId, id, run, { owner: `ender-${randomUUID()}`, until: this.#options.clock() + this.#leaseMs });
  }

  /**
   * Ends, `cancelled`, the run of `id` that still goes when its response is to be deleted (its owner did not stop it
   * within the DELETE's wait: slow to look, or paused), as whoever finds a run nobody's ends it: taken over, audited
   * (409: its client's later request ended it) and counted in the Usage view here, once. Its owner then finds its run
   * no longer its own and counts nothing: were the row deleted with the run going, nobody could tell afterwards
   * whether that run had been ended and counted (by whoever found its lease lapsed) or not. A run whose end is being
   * written (its claim's lease not lapsed) is not taken over: that write is waited for, and the end it stores (the
   * runner's answer) is kept and audited. Whether none is left going.
   */
  async endBeforeDelete(keyId: string, id: string): Promise<boolean> {
    const { store, clock } = this.#options;
    const ender = `ender-${randomUUID()}`;
    // A take-over fails only when the run changed since it was read (its lease renewed, its end stored): read again.
    for (let tries = 0, waits = 0; tries < 3; ) {
      const [run] = await store.orphans({ keyId, id }, 1);
      if (!run) return true;
      // Claimed by a writer of its end (`settle`: no owner, a lease) that is still within that lease: the answer it
      // holds (or the end another ender writes) is stored in a moment. Taken over now, the run would end `cancelled`
      // without it, audited 409 with no tokens. Its write is waited for; a writer gone midway is taken over once its
      // lease lapses, as whoever finds it lapsed would.
      if (run.owner === null && clock() < run.lease && waits < MAX_WRITE_WAITS) {
        waits += 1;
        await this.#untilWritten(keyId, id, run);
        continue;
      }
      tries += 1;
      await endOrphan(this.#orphanDeps(), run, ender, (running) => ({ ...running, status: 'cancelled' }));
    }
    return (await store.runOf(keyId, id)) === undefined;
  }

  /** Until the writer of `found`'s end is done (its run changed: ended, or its end stored for its audit) or its lease lapsed. */
  async #untilWritten(keyId: string, id: string, found: Pick<Orphan, 'owner' | 'lease'>): Promise<void> {
    const { store, clock } = this.#options;
    for (;;) {
      const run = await store.runOf(keyId, id);
      if (!run || run.owner !== found.owner || run.lease !== found.lease || clock() >= found.lease) return;
      await delay(WRITE_READ_MS);
    }
  }

  /**
   * The graceful stop: no more looks; the runs still going after `graceMs` are cut (each stored `failed`, saying the
   * server stopped) and waited for.
   */
  async stop(graceMs: number): Promise<void> {
    this.#stopped = true;
    this.#stopping.abort();
    clearTimeout(this.#timer);
    await this.#looking;
    if (this.#runs.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const all = () => Promise.all([...this.#runs.values()].map((run) => run.done));
    await Promise.race([all(), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    for (const run of this.#runs.values()) run.abort.abort(new ServerStopping());
    await all();
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#looking = this.#look()
        .catch((err: unknown) => this.#options.logger.warn({ err }, 'background responses: the look for cancels and lapsed leases failed; trying again'))
        .then(() => this.#schedule());
    }, this.#pollMs);
    // The looks alone never keep a process alive.
    this.#timer.unref();
  }

  #orphanDeps(): OrphanDeps {
    const { store, audit, keys, deliveries, clock, logger } = this.#options;
    return { responses: store, audit, keys, deliveries, clock, logger, leaseMs: this.#leaseMs };
  }

  async #look(): Promise<void> {
    const { store, clock } = this.#options;
    const now = clock();
    if (this.#runs.size > 0) {
      for (const id of await store.cancelsAsked(this.owner, [...this.#runs.keys()])) this.#runs.get(id)?.abort.abort(new CancelRequested());
      if (now - this.#lastRenewAt >= this.#leaseMs / 4) {
        await store.renewLeases(this.owner, [...this.#runs.keys()], now + this.#leaseMs);
        this.#lastRenewAt = now;
      }
    }
    if (now - this.#lastSweepAt >= this.#leaseMs / 4) {
      this.#lastSweepAt = now;
      await endOrphans(this.#orphanDeps(), { lapsedBefore: now }, LAPSED);
    }
  }
}

export const PREVIOUS_RUN =
  'svc stopped before this background response finished (the server was restarted); send the request again.';
const LAPSED =
  'The svc instance running this background response stopped answering for it (it stopped or lost its database) before it finished; send the request again.';
export const DEAD_PROCESS =
  'The svc server process running this background response died before it finished; send the request again.';

export interface OrphanDeps extends OrphanAuditDeps {
  logger: Logger;
  /** How long the ender vouches for the orphans it took over (default BACKGROUND_LEASE_MS). */
  leaseMs?: number;
}

/**
 * Ends as `failed`, with `message` as its error, each background response that no process runs any more (see
 * `ResponsesStore.orphans`), and records its audit (`recordOrphanAudit`); returns how many. Each is first taken
 * over (`takeOver`) under a lease of this call's own: another instance ending the same ones at once ends each it
 * did not take, and one whose ender stopped midway is found again once that lease lapses (its audit, should it
 * have been recorded, is not recorded twice). One whose runner stored its end but stopped before ending its run
 * keeps that end: only its audit is recorded, with the outcome stored beside it (not a second one, should the runner
 * have recorded it).
 *
 * @example
 * await endOrphans({ responses: store.responses, audit, keys: store.keys, clock: Date.now, logger }, { owner: deadWorkerId }, DEAD_PROCESS);
 */
export async function endOrphans(deps: OrphanDeps, which: Parameters<ResponsesStore['orphans']>[0], message: string): Promise<number> {
  const { responses: store, logger } = deps;
  const ender = `ender-${randomUUID()}`;
  let ended = 0;
  let audited = 0;
  for (;;) {
    const orphans = await store.orphans(which, ORPHANS_BATCH);
    let endedNow = 0;
    let auditedNow = 0;
    for (const orphan of orphans) {
      const outcome = await endOrphan(deps, orphan, ender, (running) => ({ ...running, status: 'failed', error: { code: 'server_error', message } }));
      if (outcome === 'ended') endedNow += 1;
      else if (outcome === 'audited') auditedNow += 1;
    }
    ended += endedNow;
    audited += auditedNow;
    // A batch of which none could be ended (each taken meanwhile) would be found again: stop there.
    if (orphans.length < ORPHANS_BATCH || endedNow + auditedNow === 0) break;
  }
  if (ended > 0) logger.warn({ ended }, `background responses ended as failed: ${message}`);
  if (audited > 0) logger.warn({ audited }, 'background responses whose runner stopped after storing their end: their audit is recorded now (once)');
  return ended;
}

/**
 * Ends one background response that no process runs (`ResponsesStore.orphans`) as `endOrphans` ends each, taken over
 * by `ender`: one whose end is stored keeps it, its audit recorded (`recordStoredEnd`); another is stored as `ending`
 * makes it of its running state, and audited and counted so. `ended` when this call ended it, `audited` when it
 * recorded a stored end's audit, undefined when another took it first.
 */
async function endOrphan(deps: OrphanDeps, orphan: Orphan, ender: string, ending: (running: ResponseObject) => ResponseObject): Promise<'ended' | 'audited' | undefined> {
  const { responses: store, clock, logger } = deps;
  const until = clock() + (deps.leaseMs ?? BACKGROUND_LEASE_MS);
  // An audit that cannot be read beside an ended response is that end's: the end is kept, and audited with what it says.
  const stored = orphan.auditUnreadable ? rebuiltStoredEnd(orphan, await readStoredResponse(orphan.json, orphan.id)) : hasStoredEnd(orphan) ? orphan : undefined;
  if (orphan.auditUnreadable) {
    logger.error(
      { response_id: orphan.id },
      stored
        ? 'background response: its stored audit is not JSON; its stored end is kept and audited with what it says'
        : 'background response: its stored audit is not JSON; it is ended and audited with what its response says',
    );
  }
  if (stored) {
    // Its final state is stored; its runner stopped before ending the run, perhaps before recording its audit.
    return (await recordStoredEnd(deps, orphan.keyId, orphan.id, stored, { owner: ender, until }, orphan)) ? 'audited' : undefined;
  }
  if (!(await store.takeOver(orphan.keyId, orphan.id, orphan, ender, until))) return undefined;
  const read = await readStoredResponse(orphan.json, orphan.id);
  if (!read) logger.error({ response_id: orphan.id }, 'background response: its stored response cannot be read back (a write of its end stopped midway); it is ended and audited with what is left of it');
  const ended = ending(read ?? standInResponse(orphan.id, orphan.createdAt, orphan.previousResponseId));
  // Audited before its end is written: an ender that stops between the two leaves it to be found again, audited.
  const request = await recordOrphanAudit(deps, orphan.keyId, ended, orphan.audit);
  if ((await store.settle(orphan.keyId, ended, { owner: ender, until })) === undefined) return undefined;
  // Counted by the one that ended it: an ender that stopped before would have recorded it, uncounted.
  if (request) deps.audit.countUsage?.(request);
  return 'ended';
}
