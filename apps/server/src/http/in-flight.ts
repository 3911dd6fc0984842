import type { ServerResponse } from 'node:http';
import { ApiError } from './errors.js';
import { retryAfterHeaders } from './retry-after.js';

/** What a client is told to wait when every slot is taken: streams free slots every moment under load. */
const RETRY_AFTER_MS = 1_000;

/**
 * The maximum of chat requests in flight in this process (SVC_MAX_IN_FLIGHT). A request past it is refused at
 * once with 429 `too_many_requests_in_flight` and `retry-after`, never queued: a queue hidden in a connection
 * pool makes clients time out with nothing in any log, while a 429 is retried by every OpenAI SDK.
 *
 * A slot is held from admission until the response closes (finished, failed or abandoned by the client), or, for
 * work that goes on after its response (a background response), until that work ends (`keep`).
 *
 * @example
 * const inFlight = new InFlightLimit(4096);
 * inFlight.admit(res); // throws ApiError('too_many_requests_in_flight') when all 4096 are taken
 * inFlight.streaming(res); // once the response is known to be a stream
 */
export class InFlightLimit {
  readonly max: number;
  #requests = 0;
  #streams = 0;
  #rejections = 0;
  #working = 0;
  readonly #idle: Array<() => void> = [];
  /** Each admitted response's slot: `kept` once `keep` took it over from the response's close. */
  readonly #slots = new WeakMap<ServerResponse, { kept: boolean }>();
  readonly #onReject: (() => void) | undefined;

  /** `onReject` is called on every refusal (metrics). */
  constructor(max: number, options: { onReject?: () => void } = {}) {
    if (!(Number.isInteger(max) && max >= 1)) throw new TypeError('max must be a positive integer');
    this.max = max;
    this.#onReject = options.onReject;
  }

  /** Chat requests admitted whose response has not closed. */
  get requests(): number {
    return this.#requests;
  }

  /** Of those, the streamed ones. */
  get streams(): number {
    return this.#streams;
  }

  /** Requests refused since start. */
  get rejections(): number {
    return this.#rejections;
  }

  /**
   * Takes a slot for `res` until it closes; throws a 429 `ApiError` (nothing taken) when all are taken. A
   * response already closed (the client left during auth) takes none: its 'close' would never come.
   */
  admit(res: ServerResponse): void {
    if (res.destroyed) return;
    this.#take();
    const slot = { kept: false };
    this.#slots.set(res, slot);
    res.once('close', () => {
      if (!slot.kept) this.#requests -= 1;
    });
  }

  /**
   * Keeps the slot `res` was admitted with after it closes, for work that goes on without it (a background response):
   * the returned function frees it, once. A response that took no slot (closed before admission) takes one now, and
   * is refused as `admit` refuses when all are taken.
   */
  keep(res: ServerResponse): () => void {
    const slot = this.#slots.get(res);
    if (slot && !slot.kept && !res.closed) slot.kept = true;
    else this.#take();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#requests -= 1;
    };
  }

  #take(): void {
    if (this.#requests >= this.max) {
      this.#rejections += 1;
      this.#onReject?.();
      throw new ApiError(
        'too_many_requests_in_flight',
        `This server is answering its maximum of ${this.max} requests at once. Retry after ${RETRY_AFTER_MS / 1000} s.`,
        { headers: retryAfterHeaders(RETRY_AFTER_MS) },
      );
    }
    this.#requests += 1;
  }

  /**
   * Holds `work` (a request's whole handling, its audit record included) until it settles: `settled()` waits
   * for every one, so a graceful stop does not close the store under a record still being written.
   */
  track(work: Promise<void>): Promise<void> {
    this.#working += 1;
    return work.finally(() => {
      this.#working -= 1;
      if (this.#working === 0) for (const resolve of this.#idle.splice(0)) resolve();
    });
  }

  /** Resolves once no tracked work is running. */
  settled(): Promise<void> {
    return this.#working === 0 ? Promise.resolve() : new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Counts an admitted `res` as an open stream until it closes. */
  streaming(res: ServerResponse): void {
    if (res.destroyed) return;
    this.#streams += 1;
    res.once('close', () => {
      this.#streams -= 1;
    });
  }
}
