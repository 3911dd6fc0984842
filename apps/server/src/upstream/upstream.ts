import type { ChatCompletionChunk, FinishReason, ResponseMessage, Usage } from '@svc/protocol';
import { ApiError } from '../http/errors.js';

/**
 * What the gateway sends upstream: the client's body with defaults applied, `model` already mapped to the
 * upstream model, `svc` removed, and `stream` / `stream_options` set by the gateway.
 */
export type UpstreamBody = Record<string, unknown> & {
  model: string;
  messages: unknown[];
  max_tokens?: number;
  temperature?: number;
};

/** A non-streamed upstream answer, normalised. `usage` is null when upstream gave none. */
export interface UpstreamCompletion {
  id?: string;
  created?: number;
  choices: Array<{
    index: number;
    /** The upstream's message; fields beside the schema's (`annotations`, `audio`, …) are kept. */
    message: ResponseMessage;
    finish_reason: FinishReason | null;
    logprobs?: unknown;
  }>;
  usage: Usage | null;
  service_tier?: string | null;
  system_fingerprint?: string | null;
}

/**
 * What an upstream call needs of its caller's cancellation — the part of `AbortSignal` it uses, so an
 * `AbortSignal` is one; the chat route passes a `Cancellation`.
 */
export interface CallSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  throwIfAborted(): void;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * A `CallSignal` that can be aborted: `AbortController` and its signal in one small object. Node's
 * `AbortSignal` is an `EventTarget` built per request whose objects outlive young-generation collections, so
 * every request would pay for promoting and later collecting them; this is a flag, a reason and a
 * listener list. Listeners run once, at the first `abort()`; one added after that never runs (as with
 * `AbortSignal`). undici takes it as a request's `signal` (it accepts any object with `addEventListener`).
 */
export class Cancellation implements CallSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: Array<() => void> | null = null;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = null;
    if (listeners) for (const listener of listeners) listener();
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.aborted) (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const listeners = this.listeners;
    const i = listeners ? listeners.indexOf(listener) : -1;
    if (i !== -1) listeners!.splice(i, 1);
  }
}

export interface UpstreamRequest {
  body: UpstreamBody;
  /** Aborted when the client goes away or the gateway gives up. */
  signal: CallSignal;
  /** `svc.thinking` was requested (real upstreams see it through the model, the temperature and a hybrid's switch). */
  thinking: boolean;
}

/**
 * What a stream's consumer does with one batch. It returns a promise only when it must wait (for its client to
 * drain, for the grounding check): the stream holds the next batch back until that settles.
 */
export type BatchHandler = (batch: ChatCompletionChunk[]) => Promise<void> | undefined;

/**
 * A streamed answer, pushed: `each(handler)` hands every batch of chunks (what arrived together, one network
 * read upstream), in order, to `handler`, called from the read itself. A stream at a model's pace is one read
 * per token: a pull (async iterator) would cost a chain of promises per token, the push costs none. It
 * resolves once the stream ended; it rejects with the upstream's failure, or with the handler's own error
 * (thrown or rejected), having closed the upstream exchange either way. Called once, or `cancel()` instead.
 *
 * @example
 * await chunks.each((batch) => sse.write(framesOf(batch)));
 */
export interface ChunkStream {
  each(handler: BatchHandler): Promise<void>;
  /**
   * Gives up a stream `each` will not be called on: frees the upstream exchange (timers, abort listener) and
   * discards the body. Idempotent; does nothing once `each` was called.
   */
  cancel(): void;
}

/**
 * An OpenAI-compatible model. Both methods reject with `UpstreamError` before anything was produced;
 * `stream` resolves once upstream accepted the request (status 200 received), so a failure before the first
 * byte becomes a plain 502 and a failure while iterating becomes an SSE error event.
 * Streamed chunks carry `reasoning_content` (never `reasoning`) and may carry `usage` on a final chunk.
 */
export interface Upstream {
  complete(request: UpstreamRequest): Promise<UpstreamCompletion>;
  stream(request: UpstreamRequest): Promise<ChunkStream>;
  close(): Promise<void>;
}

export type UpstreamErrorCode =
  | 'upstream_error'
  | 'upstream_timeout'
  | 'upstream_unavailable'
  | 'upstream_invalid_response'
  | 'upstream_rate_limited'
  | 'upstream_invalid_request';

/**
 * An upstream failure, mapped onto design §4: a 502 code, or — for an upstream's 4xx about the request's
 * content and its 429 — the 400 / 429 the client should see, with the upstream's own `code` and `param`.
 */
export class UpstreamError extends ApiError {
  readonly upstreamStatus: number | null;
  /** The upstream's own error code (`unsupported_parameter`, …), when it named one. */
  readonly upstreamCode: string | null;

  constructor(
    code: UpstreamErrorCode,
    message: string,
    options: {
      upstreamStatus?: number | null;
      retryAfter?: string | null;
      headers?: Record<string, string>;
      upstreamCode?: string | null;
      param?: string | null;
      cause?: unknown;
    } = {},
  ) {
    super(code, message, {
      cause: options.cause,
      param: options.param ?? null,
      wireCode: code === 'upstream_invalid_request' ? options.upstreamCode : null,
      headers: options.headers ?? (options.retryAfter ? { 'retry-after': options.retryAfter } : {}),
    });
    this.name = 'UpstreamError';
    this.upstreamStatus = options.upstreamStatus ?? null;
    this.upstreamCode = options.upstreamCode ?? null;
  }
}
