import type { Logger } from 'pino';
import type { EventBatch, ResponseEventsStore } from '../storage/response-events-store.js';

/**
 * How long events wait in memory before they are written: a model-paced stream (tens of events a second) costs a
 * few writes a second, and a reader on another instance is this much (and its poll) behind the live stream.
 */
export const EVENTS_FLUSH_MS = 200;
/** Pending events of this many bytes are written at once rather than at the next flush (a fast upstream). */
const EVENTS_FLUSH_BYTES = 64 * 1024;

export interface EventLogsOptions {
  store: ResponseEventsStore;
  /** The most one response's kept events may hold, in bytes (SVC_RESPONSE_STREAM_MAX_BYTES). */
  maxBytes: number;
  logger: Logger;
  flushMs?: number;
}

/**
 * The kept streams of this process's background responses: opens each one's log (`open`), and wakes this process's
 * readers of a response when a batch of its events was written (`written`), so that they read it at once rather than
 * at their next poll. Readers on other processes and instances poll the database.
 *
 * @example
 * const logs = new EventLogs({ store: store.responseEvents, maxBytes: config.responseStreamMaxBytes, logger });
 * const log = logs.open(response.id);
 * log.append(events.start(), events.emitted);
 * await log.close();
 */
export class EventLogs {
  readonly #options: EventLogsOptions;
  readonly #waiting = new Map<string, Set<() => void>>();

  constructor(options: EventLogsOptions) {
    this.#options = options;
  }

  /** The log of a background stream whose row keeps its events (`save` with `keepsEvents`). */
  open(responseId: string): StreamEventLog {
    return new StreamEventLog(responseId, this.#options, () => this.#wake(responseId));
  }

  /** Resolves at the next write (or giving up) of `responseId`'s events in this process, or when `signal` fires. */
  written(responseId: string, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        const set = this.#waiting.get(responseId);
        set?.delete(done);
        if (set?.size === 0) this.#waiting.delete(responseId);
        resolve();
      };
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', done, { once: true });
      let set = this.#waiting.get(responseId);
      if (!set) this.#waiting.set(responseId, (set = new Set()));
      set.add(done);
    });
  }

  #wake(responseId: string): void {
    for (const done of [...(this.#waiting.get(responseId) ?? [])]) done();
  }
}

/**
 * One background stream's events on their way to the database: `append` (synchronous: the stream it tees is never
 * held up) gathers them, and they are written a batch at a time, every EVENTS_FLUSH_MS or sooner when many, one write
 * at a time. A write that fails is tried again with the next batch. Past the limit the response's events are given up
 * (`ResponseEventsStore.cut`): a bounded copy, not a growing one. `close` writes what is left; the caller stores the
 * response's end after it, so that a reader that finds the response ended has read all its events.
 */
export class StreamEventLog {
  #pending: EventBatch | undefined;
  /** Events seen so far (the next event's `sequence_number`). */
  #emitted = 0;
  #bytes = 0;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  #cut = false;
  #inFlight = false;
  #closed = false;

  constructor(
    private readonly responseId: string,
    private readonly options: EventLogsOptions,
    private readonly wake: () => void,
  ) {}

  /**
   * Adds the events in `text` (SSE text, possibly empty), the ones numbered up to `emitted - 1`: `emitted` is the
   * count of events the stream has made so far (`ResponseEvents.emitted`).
   */
  append(text: string, emitted: number): void {
    const first = this.#emitted;
    this.#emitted = emitted;
    if (this.#cut || text === '' || emitted === first) return;
    this.#bytes += Buffer.byteLength(text);
    if (this.#bytes > this.options.maxBytes) {
      this.#giveUp(`its events passed SVC_RESPONSE_STREAM_MAX_BYTES (${this.options.maxBytes} bytes)`);
      return;
    }
    if (this.#pending) {
      this.#pending.text += text;
      this.#pending.lastSeq = emitted - 1;
    } else {
      this.#pending = { seq: first, lastSeq: emitted - 1, text };
    }
    if (this.#pending.text.length >= EVENTS_FLUSH_BYTES && !this.#inFlight) this.#flush();
    else this.#schedule();
  }

  /** Writes what is pending and resolves once every write is done. Never rejects: a batch that cannot be written gives the events up. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#writing;
    // What is pending, then once more should that write fail: a batch lost would leave a gap, so past that they are given up.
    for (let tries = 0; tries < 2 && this.#pending; tries++) {
      this.#flush();
      await this.#writing;
    }
    if (this.#pending) this.#giveUp('a batch of its events could not be written');
    await this.#writing;
  }

  /** Writes what is pending, unless a write is under way (what comes meanwhile goes at the next flush, in order). */
  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#pending;
    if (!batch || this.#cut || this.#inFlight) return;
    this.#pending = undefined;
    this.#inFlight = true;
    this.#writing = (async () => {
      try {
        await this.options.store.append(this.responseId, batch);
        this.wake();
      } catch (err) {
        this.options.logger.warn({ err, response_id: this.responseId }, 'background stream: a batch of its events could not be written; it is tried again with the next');
        // Back in front of what came meanwhile, so the events stay in order.
        const later = this.#pending;
        if (!this.#cut) this.#pending = later ? { seq: batch.seq, lastSeq: later.lastSeq, text: batch.text + later.text } : batch;
      } finally {
        this.#inFlight = false;
      }
      this.#schedule();
    })();
  }

  #schedule(): void {
    if (this.#timer || this.#closed || this.#cut || !this.#pending) return;
    this.#timer = setTimeout(() => this.#flush(), this.options.flushMs ?? EVENTS_FLUSH_MS);
    this.#timer.unref();
  }

  #giveUp(why: string): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#cut = true;
    this.#pending = undefined;
    this.options.logger.warn({ response_id: this.responseId }, `background stream: its events are no longer kept (${why}); it can no longer be read again with stream=true`);
    this.#writing = this.#writing.then(async () => {
      try {
        await this.options.store.cut(this.responseId);
      } catch (err) {
        this.options.logger.error({ err, response_id: this.responseId }, 'background stream: could not mark its kept events as given up');
      }
      this.wake();
    });
  }
}
