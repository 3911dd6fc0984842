import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { SecretBox } from '../crypto/secret-box.js';
import type { KeysStore } from '../storage/keys-store.js';
import { NOTHING_LEFT_OUT, type ClaimedDelivery, type LeftOut, type Lease, type OutboxStore, type SendableDelivery } from '../storage/outbox-store.js';
import { DeliveryAttempts, type AttemptOptions, type AttemptsDeps } from './attempt.js';
import { AttemptLog } from './attempt-log.js';
import { Receivers } from './receivers.js';
import { PayloadReads } from './payload-reads.js';
import type { AttemptOutcome, Sender } from './sender.js';
import { SigningSecrets } from './signing-secrets.js';
import { WakeTimer } from './wake-timer.js';

/** Even with nothing due, look again this often: another instance may have left rows with lapsed leases. */
const MAX_IDLE_MS = 30_000;
/** While attempts are in flight, the next-due timer is re-armed at most this often. */
const ARM_INTERVAL_MS = 100;

export interface WorkerOptions {
  deliveries: OutboxStore;
  keys: KeysStore;
  sender: Sender;
  secretBox: SecretBox;
  logger: Logger;
  clock: () => number;
  timeoutMs: number;
  retryScheduleMs: number[];
  /** Attempts in flight at most. Default 256: under load an attempt waits for the busy event loop, so throughput is concurrency / latency. */
  concurrency?: number;
  /** Attempts in flight to one receiver (URL origin) at most, default 64 (see `Receivers`). */
  perReceiver?: number;
  /** Random in [0, 1) for the retry jitter; tests may fix it. */
  random?: () => number;
  onAttempt?: AttemptsDeps['onAttempt'];
  /**
   * Release every lease at start. Only for a database this process alone works on (embedded SQLite): rows
   * leased by a killed predecessor are then retried at once instead of after their lease.
   */
  releaseLeasesOnStart?: boolean;
}

/**
 * Schedules the outbox's deliveries and holds their leases; each attempt is `DeliveryAttempts`', each
 * receiver's share `Receivers`'. New rows arrive already leased (`reserve`/`adopt`) and are sent at once; the
 * outbox is queried only when rows may be waiting: after `wake()` (rows beyond the free slots, a redeliver)
 * and when the timer fires (a retry's due time, a lapsing lease, the periodic look). Each claim
 * is a lease longer than an attempt can take, so a crashed worker's rows come back on their own.
 *
 * @example
 * const worker = new DeliveryWorker({ deliveries, keys, sender, … }); worker.start(); … await worker.stop();
 */
export class DeliveryWorker {
  /** `leased_by` of this worker's claims: the pid tells the processes of one machine apart, the random part their runs. */
  readonly id = `worker-${process.pid}-${randomBytes(6).toString('hex')}`;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly attempts: DeliveryAttempts;
  private readonly payloads: PayloadReads;
  private readonly inFlight = new Set<Promise<unknown>>();
  private running = false;
  private pumping = false;
  /** The pump running now (claiming, or arming the timer): `stop` waits for it. */
  private pumpRun: Promise<void> | undefined;
  private pumpAgain = false;
  /** The `now` of the latest claim: the next-due look-up starts there, not at its own later `now`. */
  private lastClaimAt = 0;
  private wakeScheduled = false;
  /**
   * Rows may be due that nobody has claimed. Set by every `wake()` (start, the outbox's unleased rows, a
   * redeliver, the timer: retries, lapsing leases, the periodic look) and by a failed record; cleared by a
   * claim that found fewer rows than it could take with no wake meanwhile. While false, a finished attempt
   * makes no query at all: new deliveries arrive leased through `adopt`.
   */
  private claimable = true;
  private wakes = 0;
  private readonly timer: WakeTimer;
  private lastArmAt = 0;
  /** Slots promised to deliveries being inserted already leased to this worker (see `reserve`). */
  private reserved = 0;
  private readonly perReceiver: number;
  private readonly receivers: Receivers;
  private releases: Array<{ id: string; origin: string }> = [];
  /**
   * The last claim that left receivers or users out and found nothing, with the wake count then. Until the next
   * wake nothing else can have fallen due, so a claim leaving out as much or more would find nothing again; it
   * is skipped. Each such claim reads every due row of the receivers it leaves out: one receiver's backlog of
   * 100,000, at its share and claimed again at every turn of its slots, held SQLite's event loop 100–200 ms each time.
   */
  private foundNothing: { leftOut: LeftOut; wakes: number } | undefined;

  constructor(private readonly options: WorkerOptions) {
    this.concurrency = options.concurrency ?? 256;
    this.perReceiver = options.perReceiver ?? 64;
    this.receivers = new Receivers(this.perReceiver);
    this.timer = new WakeTimer(options.clock, () => this.wake(), MAX_IDLE_MS);
    // An attempt ends by its timeout, after waiting at most one attempt for its receiver's slot; the margin
    // covers the database write that follows it.
    this.leaseMs = 2 * options.timeoutMs + 15_000;
    this.payloads = new PayloadReads((id) => options.deliveries.payloadOf(id));
    this.attempts = new DeliveryAttempts({
      sender: options.sender,
      secrets: new SigningSecrets(options.secretBox),
      log: new AttemptLog(options.deliveries, options.keys),
      policy: { scheduleMs: options.retryScheduleMs, random: options.random ?? Math.random },
      logger: options.logger,
      clock: options.clock,
      onAttempt: options.onAttempt,
    });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    if (!this.options.releaseLeasesOnStart) return this.wake();
    this.options.deliveries.releaseLeases(this.options.clock()).then(
      (released) => {
        if (released > 0) this.options.logger.info({ released }, 'resuming webhook deliveries left in flight by the previous run');
        this.wake();
      },
      (err: unknown) => {
        this.options.logger.error({ err }, 'could not release stale webhook leases');
        this.wake();
      },
    );
  }

  /** Look for due deliveries now (coalesced: many wakes in one tick make one claim). */
  wake(): void {
    this.claimable = true;
    this.wakes += 1;
    this.schedulePump();
  }

  private schedulePump(): void {
    if (!this.running || this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.runPump();
    });
  }

  private runPump(): void {
    // A pump already running pumps again (see `pump`); else this one is the one `stop` waits for.
    if (this.pumping) {
      void this.pump();
      return;
    }
    const run = this.pump();
    this.pumpRun = run;
    void run.finally(() => {
      if (this.pumpRun === run) this.pumpRun = undefined;
    });
  }

  /** Stops claiming; resolves when the attempts in flight have finished or timed out. */
  async stop(): Promise<void> {
    this.running = false;
    this.timer.clear();
    // Rows waiting for a receiver's slot go back to the outbox now rather than when their lease lapses.
    const waiting = this.receivers.drainWaiting();
    await this.options.deliveries.releaseClaims(waiting, this.id, this.options.clock()).catch(() => undefined);
    // A claim still in flight gives its rows back (see `pump`): its attempts would otherwise start after the
    // stop, on a store about to close, and their rows stay leased to a stopped worker until the lease lapses.
    await this.pumpRun?.catch(() => undefined);
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async pump(): Promise<void> {
    if (!this.running) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        const free = this.concurrency - this.inFlight.size - this.reserved;
        if (free <= 0) return; // A finishing attempt pumps again.
        // Receivers at their share are left out (a finishing attempt of theirs asks again), and one claim
        // takes at most two shares' worth, so one receiver's backlog is not claimed only to be given back.
        const full = this.receivers.leaveOut();
        if (this.knownEmpty(full)) {
          this.claimable = false;
          break;
        }
        const limit = Math.min(free, 2 * this.perReceiver);
        this.lastClaimAt = this.options.clock();
        const wakes = this.wakes;
        const rows = await this.options.deliveries.claimDue(this.lastClaimAt, limit, this.leaseMs, this.id, full);
        if (rows.length === 0 && (full.origins.length > 0 || full.users.length > 0)) this.foundNothing = { leftOut: full, wakes };
        // A Postgres store returns each lease's end on the database's clock, which may disagree with this
        // worker's: the worker holds it on its own (see `attempt`). From the answer, so never before the real end.
        const leaseUntil = this.options.clock() + this.leaseMs;
        for (const row of rows) row.lease_until = leaseUntil;
        if (!this.running) {
          if (rows.length > 0) await this.options.deliveries.releaseClaims(rows.map((r) => r.id), this.id, this.options.clock());
          return;
        }
        let progress = false;
        for (const row of rows) if (this.launch(row, full)) progress = true;
        if (rows.length === limit && progress) this.pumpAgain = true;
        else if (this.wakes === wakes) this.claimable = false;
      } while (this.pumpAgain && this.running);
      // While attempts are in flight the timer is re-armed at most every ARM_INTERVAL_MS, not after every
      // pump; but never left unset, or the periodic look (rows of other instances, lapsed leases) stops.
      if (!this.timer.armed || this.inFlight.size === 0 || this.options.clock() - this.lastArmAt >= ARM_INTERVAL_MS) {
        await this.armTimer();
      }
    } catch (err) {
      this.options.logger.error({ err }, 'webhook worker could not claim deliveries; retrying');
      this.arm(1000);
    } finally {
      this.pumping = false;
    }
  }

  /** A claim leaving out `leftOut` would find nothing: one leaving out no more found nothing, and no wake since. */
  private knownEmpty(leftOut: LeftOut): boolean {
    const last = this.foundNothing;
    if (last === undefined || last.wakes !== this.wakes) return false;
    return last.leftOut.origins.every((o) => leftOut.origins.includes(o)) && last.leftOut.users.every((u) => leftOut.users.includes(u));
  }

  /**
   * Hand-off of new deliveries (the outbox): reserves up to `count` attempt slots and returns the lease to
   * insert that many rows with. Once committed, `adopt` starts their attempts at once — no claim query for
   * a new delivery; `unreserve` gives the slots back when the insert failed. Rows beyond the free slots are
   * inserted unleased and claimed as usual. A leased row whose process dies is retried when its lease lapses
   * (or at once on the next start with `releaseLeasesOnStart`), like any claimed row.
   */
  reserve(count: number): { take: number; lease: Lease } {
    const free = this.running ? this.concurrency - this.inFlight.size - this.reserved : 0;
    const take = Math.max(0, Math.min(count, free));
    this.reserved += take;
    return { take, lease: { until: this.options.clock() + this.leaseMs, by: this.id } };
  }

  /** Starts the attempts of rows inserted with a lease from `reserve`. */
  adopt(rows: SendableDelivery[]): void {
    this.reserved = Math.max(0, this.reserved - rows.length);
    // Stopped meanwhile: the leases lapse and the rows are retried then (or on the next start).
    if (!this.running) return;
    for (const row of rows) this.launch(row, NOTHING_LEFT_OUT);
  }

  unreserve(count: number): void {
    this.reserved = Math.max(0, this.reserved - count);
  }

  /**
   * Starts a claimed row's attempt when its receiver has room, else lets it wait for the receiver's next free
   * slot, else gives it back to the outbox. True unless given back to a receiver that was not already left
   * out (`excluded`): then the next claim would return it again.
   */
  private launch(row: ClaimedDelivery, excluded: LeftOut): boolean {
    const { admission, origin } = this.receivers.admit(row);
    switch (admission) {
      case 'start':
        this.startAttempt(row, origin);
        return true;
      case 'wait':
        // Read again when its turn comes (see `attemptClaimed`): a receiver's waiting rows would hold theirs meanwhile.
        delete row.payload;
        return true;
      case 'held':
        return false;
      case 'give-back':
        this.release(row.id, origin);
        return !excluded.origins.includes(origin) && !excluded.users.includes(row.user_id);
    }
  }

  /**
   * Runs the attempt of a row whose receiver's slot is taken for it (see `attemptClaimed`: a row that waited in
   * memory for the slot is read again, as a claimed one is).
   */
  private startAttempt(row: ClaimedDelivery, origin: string): void {
    // Not `row` in the closure: it would keep the payload alive for the whole attempt (see `attempt`).
    const deliveryId = row.id;
    const task = this.attemptClaimed(row)
      .catch((err: unknown) => {
        this.options.logger.error({ err, delivery_id: deliveryId }, 'could not record a webhook attempt; it will be retried');
      })
      .finally(() => {
        this.inFlight.delete(task);
        const { next, roomAgain } = this.receivers.finish(deliveryId, origin, this.running);
        if (next) this.startAttempt(next, origin);
        if (roomAgain) this.claimable = true;
        // A slot is free: claim only if rows may be waiting for one. Nothing else can have fallen due: new
        // rows arrive leased (`adopt`) or wake the worker, and retries arm the timer for their time.
        if (this.running && this.claimable) this.schedulePump();
      });
    this.inFlight.add(task);
  }

  /**
   * The attempt of a claimed row: its payload read just before the send (a claim returns none; see `PayloadReads`),
   * held by the send alone. The read brings the row's status and URL as they are then, and the send goes only
   * where they still say: since the claim (and, for a row that waited for its receiver's slot, up to a timeout per
   * attempt ahead of it), the key's webhook URL may have been removed or changed, or the delivery cancelled — by
   * the dashboard, `svc-server keys update` or another instance — and its payload must not go to a receiver the
   * user has just taken away. Cancelled, moved on or gone (purged once cancelled): nothing is sent or recorded.
   * Retargeted: given back, to be claimed again for its new receiver with the key's current secret. A read that
   * failed leaves the row leased, to be tried again once the lease lapses, as a failed record does.
   */
  private attemptClaimed(row: ClaimedDelivery): Promise<unknown> {
    if (hasPayload(row)) return this.attempt(row);
    const leaseUntil = row.lease_until;
    return this.payloads.of(row.id, row.payload_bytes).then(
      (current) => {
        if (current === undefined || current.status !== 'pending') return undefined;
        if (current.url !== row.url) {
          // Given back as its new receiver's: asked for at once when that one has room, not when the old one's
          // attempts (which may be minutes of timeouts) free a slot.
          this.release(row.id, this.receivers.originOf(current.url));
          return undefined;
        }
        return this.attempt({ ...row, payload: current.payload });
      },
      (err: unknown) => {
        this.leaseKept(leaseUntil);
        throw err;
      },
    );
  }

  /** An attempt could not be made or recorded: its row stays leased and is due again when the lease lapses. */
  private leaseKept(leaseUntil: number | null): void {
    this.claimable = true;
    this.armBy(leaseUntil ?? this.options.clock());
  }

  /** Gives a claimed row back unattempted (`origin`: the receiver it now goes to); batched, one statement per tick. */
  private release(id: string, origin: string): void {
    this.releases.push({ id, origin });
    if (this.releases.length > 1) return;
    setImmediate(() => {
      const batch = this.releases;
      this.releases = [];
      const ids = batch.map((r) => r.id);
      this.options.deliveries.releaseClaims(ids, this.id, this.options.clock()).then(
        () => {
          // Rows are claimable again that a claim not leaving their receiver out may now find. A claim that did leave
          // it out still finds none of them: forgetting it would only make that claim, reading every due row of the
          // receivers it leaves out, again with no wake between.
          const last = this.foundNothing;
          if (last && batch.some((r) => !last.leftOut.origins.includes(r.origin))) this.foundNothing = undefined;
          // Claimable again. When their receiver emptied meanwhile, no attempt of its is left to ask for a
          // claim: ask now. (While it is still full, its finishing attempts will; asking now could only
          // return rows a claim leaves out by origin pattern and does not match, again and again.)
          if (batch.some((r) => !this.receivers.atShare(r.origin))) this.wake();
        },
        (err: unknown) => {
          // Their leases lapse instead; they are tried then.
          this.options.logger.warn({ err, deliveries: ids.length }, 'could not give webhook deliveries back to the outbox');
        },
      );
    });
  }

  private async armTimer(): Promise<void> {
    if (!this.running) return;
    const now = this.options.clock();
    this.lastArmAt = now;
    // A row that fell due between the claim and now was not claimed and is not "after now": looking from
    // the claim's time finds it (and wakes in 10 ms) instead of leaving it for MAX_IDLE_MS.
    const next = await this.options.deliveries.nextDueAfter(Math.min(now, this.lastClaimAt));
    this.arm(next === undefined ? MAX_IDLE_MS : next - now);
  }

  /** Makes sure the timer fires within `delayMs` (see `WakeTimer`). */
  private arm(delayMs: number): void {
    if (this.running) this.timer.within(delayMs);
  }

  /** Makes sure the timer fires by `at` (a retry just scheduled, a lease about to lapse). */
  private armBy(at: number): void {
    if (this.running) this.timer.by(at);
  }

  /**
   * One attempt of a delivery (claimed, handed over, or a test send's): see `DeliveryAttempts.run`. A retry
   * arms the timer for its time; a record that failed leaves the row leased, to be tried again once the lease
   * lapses (at least once, never lost). The row's `lease_until` is on this worker's clock: a claim's is
   * rewritten so (see `pump`), a hand-over's comes from `reserve`.
   */
  attempt(row: SendableDelivery, options: AttemptOptions = {}): Promise<AttemptOutcome> {
    // Not `row` in the callbacks: it would keep the payload alive for the whole attempt.
    const leaseUntil = row.lease_until;
    return this.attempts.run(row, options).then(
      ({ outcome, next }) => {
        if (next.status === 'pending') this.armBy(next.nextAttemptAt);
        return outcome;
      },
      (err: unknown) => {
        this.leaseKept(leaseUntil);
        throw err;
      },
    );
  }
}

function hasPayload(row: ClaimedDelivery): row is SendableDelivery {
  return row.payload !== undefined;
}
