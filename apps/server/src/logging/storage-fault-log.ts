import { storageFault } from '../storage/storage-fault.js';

/** While the database is unavailable, how often one line says how many lines of a known fault were left out. */
export const FAULT_SUMMARY_MS = 60_000;
/** While the database is unavailable, how often `probe` asks whether it is back. */
export const RECOVERY_PROBE_MS = 5_000;

type Level = 'info' | 'warn';
type Emit = (level: Level, fields: Record<string, unknown>, msg: string) => void;

interface Outage {
  since: number;
  /** The fault (what to do about it) of each kind seen, by kind. */
  faults: Map<string, string>;
  /** The kind and message of each line logged in this outage. */
  logged: Set<string>;
  /** Lines left out since the last summary, by message. */
  leftOut: Map<string, number>;
  /** Lines of a fault in this outage, logged or not, by message. */
  total: Map<string, number>;
  lastFaultAt: number;
  summaryTimer: NodeJS.Timeout;
  probeTimer: NodeJS.Timeout | undefined;
}

/**
 * The fault a log line reports — its `fault` field, or a database fault of its surroundings in its `err` (a full
 * disk, a lock, Postgres down: `storageFault`) — or undefined for any other line.
 */
export function faultOf(fields: unknown): string | undefined {
  if (typeof fields !== 'object' || fields === null) return undefined;
  const { fault, err } = fields as { fault?: unknown; err?: unknown };
  if (typeof fault === 'string') return fault;
  return err === undefined ? undefined : storageFault(err);
}

/** A fault's kind: its opening words ('SQLITE_FULL', 'Postgres 55P03', 'ECONNREFUSED', …), without the details. */
function kindOf(fault: string): string {
  return fault.split(/: | \(/, 1)[0]!;
}

/**
 * Log lines of a database outage, rate-limited. During an outage every request failed with a line of its own and
 * the delivery worker added one per retry each second: thousands of identical lines, in which a different fault
 * was lost. Here the first line of each kind of fault from each place (its message) is logged as it comes; later
 * ones are counted, and every FAULT_SUMMARY_MS one line ('database still unavailable') gives the counts by
 * message. Once `probe` finds the database answering again (asked every RECOVERY_PROBE_MS), one line
 * ('database available again') says how long it was down and how many lines of it there were. Without a probe,
 * an outage ends after FAULT_SUMMARY_MS without a fault.
 *
 * @example
 * const faults = new StorageFaultLog((level, fields, msg) => logger[level](fields, msg));
 * if (faults.admit(fields, msg)) logger.error(fields, msg);
 */
export class StorageFaultLog {
  private outage: Outage | undefined;
  private probe: (() => Promise<string | null>) | undefined;

  constructor(
    private readonly emit: Emit,
    private readonly now: () => number = Date.now,
  ) {}

  /** Asks `probe` (null: the database takes writes) whether an outage is over. */
  watch(probe: () => Promise<string | null>): void {
    this.probe = probe;
  }

  /**
   * Whether a line with `fields` and `msg` is to be written: any line that reports no fault; the first with its
   * fault's kind and its message in an outage. Lines left out are counted.
   */
  admit(fields: unknown, msg: string): boolean {
    const fault = faultOf(fields);
    if (fault === undefined) return true;
    const outage = (this.outage ??= this.begin());
    const kind = kindOf(fault);
    outage.lastFaultAt = this.now();
    outage.total.set(msg, (outage.total.get(msg) ?? 0) + 1);
    if (!outage.faults.has(kind)) outage.faults.set(kind, fault);
    // The first line of each fault from each place (a request's 503, the delivery worker's claim…): each says
    // what it stops.
    const seen = `${kind}\n${msg}`;
    if (!outage.logged.has(seen)) {
      outage.logged.add(seen);
      return true;
    }
    outage.leftOut.set(msg, (outage.leftOut.get(msg) ?? 0) + 1);
    return false;
  }

  /** Ends the summaries and probes (the server is stopping). */
  close(): void {
    if (!this.outage) return;
    clearInterval(this.outage.summaryTimer);
    clearTimeout(this.outage.probeTimer);
    this.outage = undefined;
  }

  private begin(): Outage {
    const outage: Outage = {
      since: this.now(),
      faults: new Map(),
      logged: new Set(),
      leftOut: new Map(),
      total: new Map(),
      lastFaultAt: this.now(),
      summaryTimer: setInterval(() => this.summarise(), FAULT_SUMMARY_MS).unref(),
      probeTimer: undefined,
    };
    if (this.probe) this.scheduleProbe(outage);
    return outage;
  }

  private scheduleProbe(outage: Outage): void {
    outage.probeTimer = setTimeout(() => {
      const probe = this.probe!;
      probe().then(
        (problem) => {
          if (this.outage !== outage) return;
          if (problem === null) this.end();
          else this.scheduleProbe(outage);
        },
        () => {
          if (this.outage === outage) this.scheduleProbe(outage);
        },
      );
    }, RECOVERY_PROBE_MS).unref();
  }

  private summarise(): void {
    const outage = this.outage;
    if (!outage) return;
    if (!this.probe && this.now() - outage.lastFaultAt >= FAULT_SUMMARY_MS) return this.end();
    if (outage.leftOut.size === 0) return;
    this.emit(
      'warn',
      {
        faults: [...outage.faults.values()],
        down_since: new Date(outage.since).toISOString(),
        left_out: Object.fromEntries(outage.leftOut),
        every_s: FAULT_SUMMARY_MS / 1000,
      },
      'database still unavailable: lines of the faults above left out since the last summary, by message',
    );
    outage.leftOut.clear();
  }

  private end(): void {
    const outage = this.outage!;
    this.close();
    this.emit(
      'info',
      {
        down_since: new Date(outage.since).toISOString(),
        down_s: Math.round((this.now() - outage.since) / 1000),
        kinds: [...outage.faults.keys()],
        lines: Object.fromEntries(outage.total),
      },
      'database available again',
    );
  }
}
