import { StringDecoder } from 'node:string_decoder';
import type { Dispatcher } from 'undici';
import {
  ChatCompletionChunkSchema,
  ChoiceSchema,
  ChunkChoiceSchema,
  FinishReasonSchema,
  type ChatCompletionChunk,
  type FinishReason,
  type Usage,
} from '@svc/protocol';
import { request } from '../http/undici-dispatchers.js';
import { jsonShapeProblem, MAX_JSON_DEPTH, MAX_JSON_MEMBERS, type JsonShapeProblem } from '../json-depth.js';
import { SseLimitError, SseParser, type SseEvent } from './sse.js';
import { TextFrames } from './text-frames.js';
import { opensThinkInPrompt, splitThink, ThinkTags } from './think-tags.js';
import { TokenLimits } from './token-limit.js';
import { developerAsSystem } from './developer-role.js';
import { contentParts } from './content-parts.js';
import { errorFields, errorObject, upstreamHttpError, withoutKeys } from './upstream-errors.js';
import { sentOnce } from './sent-once.js';
import { ChoiceIndexes, ChoiceNumbers, ToolCallingChoices } from '../choice-indexes.js';
import { newToolCallId, ToolCallIndexes } from './tool-call-indexes.js';
import { createUpstreamPool, type UpstreamHttp2 } from './upstream-pool.js';
import { isRecord } from '../is-record.js';
import { Cancellation, UpstreamError, type BatchHandler, type CallSignal, type ChunkStream, type Upstream, type UpstreamBody, type UpstreamCompletion, type UpstreamRequest } from './upstream.js';

export interface OpenAICompatibleUpstreamOptions {
  /** Base URL of an OpenAI-compatible API, e.g. `https://api.openai.com/v1`; requests go to `{baseUrl}/chat/completions`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>` when set; never appears in error messages. */
  apiKey?: string;
  /** Whole request, streamed body included (SVC_UPSTREAM_TIMEOUT_MS). */
  timeoutMs: number;
  /** Until a stream's response headers arrive. Default 60 000 (capped at `timeoutMs`). */
  firstByteTimeoutMs?: number;
  /** Dispatcher to send through (a `MockAgent`, an `Agent`); default: an own keep-alive `Pool`. */
  dispatcher?: Dispatcher;
  /**
   * Connections of the own pool: requests past it wait in the pool, unseen. Default unbounded; the server
   * passes SVC_MAX_IN_FLIGHT, which its chat route enforces with an immediate 429.
   */
  connections?: number;
  /** HTTP/2 to an https upstream that offers it (SVC_UPSTREAM_HTTP2, upstream-pool.ts). Default `off`. */
  http2?: UpstreamHttp2;
  /** PEM certificates the own pool trusts instead of Node's default ones (which NODE_EXTRA_CA_CERTS extends). */
  ca?: string;
}

/** Resends of one request after a refused field (token-limit.ts): the limit's form and each droppable field once. */
const MAX_ADAPTATIONS = 6;
/** Bytes of a non-2xx body read for its error message. */
const ERROR_BODY_LIMIT = 64 * 1024;
/**
 * Frames held while a stream's choice numbers wait for the upstream's first index (ChunkReader.numbered): past
 * it the lowest index so far is taken as the first, rather than holding an answer back whole.
 */
const MAX_HELD_FRAMES = 1024;
/** The same in bytes of the upstream's body: frames may be megabytes each (up to the parser's MAX_EVENT_CHARS). */
const MAX_HELD_BYTES = 1024 * 1024;
/** Bytes after `[DONE]` read to keep the connection; a server that sends more loses it. */
const DRAIN_LIMIT = 64 * 1024;
/** How long `close()` waits for in-flight requests before destroying the pool. */
const CLOSE_GRACE_MS = 5_000;
const CONNECT_FAILURE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  // HTTP/2: the upstream reset the stream or ended the session.
  'ERR_HTTP2_STREAM_ERROR',
  'ERR_HTTP2_SESSION_ERROR',
  'ERR_HTTP2_GOAWAY_SESSION',
]);
/**
 * undici's InformationalError (UND_ERR_INFO) covers an HTTP/2 stream the upstream reset or closed before the
 * response was complete and an HTTP/1.1 socket it reset: its code alone tells a reader nothing.
 */
const ENDED_EARLY = 'the upstream ended the stream or connection early';

/**
 * An `Upstream` for any OpenAI-compatible chat-completions API (OpenAI, vLLM, Ollama, llama.cpp server, …).
 *
 * Failures become `UpstreamError`s with the 502 codes of design §4:
 * - no connection (refused, DNS, reset before headers) → `upstream_unavailable`;
 * - a stream's headers not within `firstByteTimeoutMs`, or the whole exchange over `timeoutMs` → `upstream_timeout`
 *   (a non-streamed answer's headers come with the whole answer, so only `timeoutMs` bounds them);
 * - non-2xx → `upstreamHttpError` (upstream-errors.ts): a 4xx about the request → 400 with the upstream's
 *   message, code and param; 429 → 429 `upstream_rate_limited`; anything else `upstream_error` (`retry-after` carried);
 * - a 2xx body that is not JSON / not a completion → `upstream_invalid_response`.
 * While iterating a stream: an `{"error":…}` frame → `upstream_error`; a reset → `upstream_unavailable`; a
 * non-JSON or malformed frame, or an end without `[DONE]` before every choice finished → `upstream_invalid_response`;
 * the total timeout → `upstream_timeout`. When the caller's `signal` aborts, the upstream request is
 * closed at once and the pending call rejects with `signal.reason`, like `fetch` does.
 *
 * @example
 * const upstream = createOpenAICompatibleUpstream({ baseUrl: 'https://api.openai.com/v1', apiKey, timeoutMs: 120_000 });
 * const completion = await upstream.complete({ body: { model: 'gpt-4o-mini', messages }, signal, thinking: false });
 */
export function createOpenAICompatibleUpstream(options: OpenAICompatibleUpstreamOptions): Upstream {
  const url = parseBaseUrl(options.baseUrl);
  if (!(Number.isFinite(options.timeoutMs) && options.timeoutMs > 0)) throw new TypeError('timeoutMs must be a positive number');
  const timeoutMs = options.timeoutMs;
  const firstByteTimeoutMs = Math.min(options.firstByteTimeoutMs ?? 60_000, timeoutMs);
  const origin = url.origin;
  const path = `${url.pathname.replace(/\/+$/, '')}/chat/completions${url.search}`;
  const ownPool = options.dispatcher
    ? null
    : createUpstreamPool(origin, { connections: options.connections ?? null, http2: options.http2 ?? 'auto', connectTimeoutMs: Math.min(10_000, firstByteTimeoutMs), ca: options.ca });
  const dispatcher: Dispatcher = options.dispatcher ?? ownPool!;
  let closing: Promise<void> | null = null;
  const redact = (text: string): string => (options.apiKey ? text.split(options.apiKey).join('[redacted]') : text);

  async function send(body: Record<string, unknown>, stream: boolean, signal: CallSignal): Promise<{ response: Dispatcher.ResponseData; exchange: Exchange }> {
    // OpenAI, vLLM and Ollama send a non-streamed answer's headers with its body, once it is generated: a first-byte
    // limit there cut off every answer that took longer to write or think (a reasoning model's minute and more).
    const headsWithin = stream ? firstByteTimeoutMs : timeoutMs;
    const exchange = new Exchange(signal, timeoutMs, headsWithin);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
      'user-agent': 'svc-server',
    };
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
    const json = JSON.stringify(body);
    headers['content-length'] = String(Buffer.byteLength(json));
    try {
      const response = await request(dispatcher, {
        origin,
        path,
        method: 'POST',
        headers,
        // undici documents iterable bodies (Dispatcher.dispatch), its types leave them out.
        body: sentOnce(json) as unknown as Dispatcher.DispatchOptions['body'],
        // undici listens to any object with addEventListener ('abort') and reads `aborted` / `reason`.
        signal: exchange as unknown as AbortSignal,
        headersTimeout: headsWithin,
        bodyTimeout: timeoutMs,
      });
      exchange.headersReceived();
      if (response.statusCode < 200 || response.statusCode >= 300) {
        const text = await readText(response.body, ERROR_BODY_LIMIT);
        throw upstreamHttpError(response.statusCode, response.headers, text, redact);
      }
      return { response, exchange };
    } catch (error) {
      exchange.release();
      throw exchange.fail(error);
    }
  }

  const tokenLimits = new TokenLimits();
  /**
   * `send` with the token limit in the form the model takes and no temperature where it takes none
   * (token-limit.ts); sent again when the upstream refuses one of them (at most MAX_ADAPTATIONS times: one lesson each).
   */
  async function sendAdapted(body: UpstreamBody, stream: boolean, signal: CallSignal): ReturnType<typeof send> {
    let sent = tokenLimits.adapt(developerAsSystem(body));
    for (let retries = 0; ; retries++) {
      try {
        return await send(sent, stream, signal);
      } catch (error) {
        const retry = signal.aborted || retries === MAX_ADAPTATIONS ? null : tokenLimits.retryAfter(sent, error);
        if (retry === null) throw error;
        sent = retry;
      }
    }
  }

  return {
    async complete({ body, signal }: UpstreamRequest): Promise<UpstreamCompletion> {
      signal.throwIfAborted();
      const { stream: _stream, stream_options: _streamOptions, ...rest } = body;
      const { response, exchange } = await sendAdapted(rest, false, signal);
      try {
        const text = await readText(response.body, MAX_COMPLETION_BYTES, 'fail');
        return parseCompletion(text, redact, opensThinkInPrompt(rest.model));
      } catch (error) {
        throw exchange.fail(error);
      } finally {
        exchange.release();
      }
    },

    async stream({ body, signal }: UpstreamRequest): Promise<ChunkStream> {
      signal.throwIfAborted();
      const { response, exchange } = await sendAdapted({ ...body, stream: true }, true, signal);
      const contentType = String(response.headers['content-type'] ?? '');
      if (contentType && !contentType.includes('text/event-stream')) {
        // A server that ignored `stream: true` or put an error in a 200: still before the first byte, so a plain 502.
        try {
          const text = await readText(response.body, ERROR_BODY_LIMIT);
          const error = embeddedError(tryJson(text), redact);
          if (error !== null) throw new UpstreamError('upstream_error', `Upstream failed: ${error}`, { upstreamStatus: response.statusCode });
          throw new UpstreamError('upstream_invalid_response', `Upstream answered a streamed request with content-type ${contentType.split(';')[0]}, not text/event-stream.`, { upstreamStatus: response.statusCode });
        } catch (error) {
          throw exchange.fail(error);
        } finally {
          exchange.release();
        }
      }
      return chunkStream(response.body, exchange, body, redact);
    },

    close(): Promise<void> {
      closing ??= closePool(ownPool);
      return closing;
    },
  };
}

async function closePool(pool: Dispatcher | null): Promise<void> {
  if (!pool) return;
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), CLOSE_GRACE_MS);
  });
  try {
    if ((await Promise.race([pool.close(), grace])) === 'timeout') await pool.destroy();
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One upstream exchange's lifetime, and the signal undici's request gets: the caller's signal and the
 * timers abort it, which closes the upstream request (socket) wherever it is; `release()` frees the timers
 * and the listener.
 */
class Exchange extends Cancellation {
  private timedOut: 'first-byte' | 'total' | null = null;
  private readonly timer: NodeJS.Timeout;
  /** undici's own headersTimeout ticks coarsely (fast timers); this one fires on time. */
  private firstByteTimer: NodeJS.Timeout | undefined;
  private readonly onAbort = (): void => {
    this.release();
    this.abort(this.signal.reason);
  };

  constructor(
    private readonly signal: CallSignal,
    private readonly timeoutMs: number,
    private readonly firstByteTimeoutMs: number,
  ) {
    super();
    this.timer = setTimeout(() => this.timeOut('total'), timeoutMs);
    if (firstByteTimeoutMs < timeoutMs) this.firstByteTimer = setTimeout(() => this.timeOut('first-byte'), firstByteTimeoutMs);
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /** Response headers arrived: only the total timeout applies from now on. */
  headersReceived(): void {
    clearTimeout(this.firstByteTimer);
    // Not kept for the rest of a stream that may stay open for minutes.
    this.firstByteTimer = undefined;
  }

  release(): void {
    clearTimeout(this.timer);
    clearTimeout(this.firstByteTimer);
    this.signal.removeEventListener('abort', this.onAbort);
  }

  private timeOut(which: 'first-byte' | 'total'): void {
    this.timedOut = which;
    this.release();
    this.abort(this.timeoutError());
  }

  private timeoutError(cause?: unknown): UpstreamError {
    return this.timedOut === 'first-byte'
      ? new UpstreamError('upstream_timeout', `Upstream sent no response within ${this.firstByteTimeoutMs} ms.`, { cause })
      : new UpstreamError('upstream_timeout', `Upstream did not complete within ${this.timeoutMs} ms.`, { cause });
  }

  /** Maps whatever broke the exchange onto an `UpstreamError`, or the caller's abort reason when the caller aborted. */
  fail(error: unknown): unknown {
    if (this.signal.aborted) return this.signal.reason ?? error;
    if (this.timedOut) return this.timeoutError(error);
    if (error instanceof UpstreamError) return error;
    const code = errorCode(error);
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      this.timedOut = code === 'UND_ERR_HEADERS_TIMEOUT' ? 'first-byte' : 'total';
      return this.timeoutError(error);
    }
    if (code?.startsWith('HPE_') || code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH') {
      return new UpstreamError('upstream_invalid_response', 'Upstream sent a malformed HTTP response.', { cause: error });
    }
    // The upstream answered, with more header bytes than are read: its answer is at fault, not the connection.
    if (code === 'UND_ERR_HEADERS_OVERFLOW') {
      return new UpstreamError('upstream_invalid_response', 'Upstream sent response headers larger than svc reads.', { cause: error });
    }
    const detail = code === 'UND_ERR_INFO' ? ` (${ENDED_EARLY})` : code && CONNECT_FAILURE_CODES.has(code) ? ` (${code})` : '';
    return new UpstreamError('upstream_unavailable', `Could not reach the upstream or the connection was lost${detail}.`, { cause: error });
  }
}

function chunkStream(
  body: Dispatcher.ResponseData['body'],
  exchange: Exchange,
  request: UpstreamBody,
  redact: (text: string) => string,
): ChunkStream {
  // Until `each` listens, a destroy by the total timeout or an abort would be an uncaught 'error'.
  body.on('error', ignore);
  let taken = false;
  return {
    each: (handler) => {
      taken = true;
      return new Promise<void>((resolve, reject) => {
        new ChunkReader(body, exchange, request, redact, handler, resolve, reject).start();
      });
    },
    cancel: () => {
      if (taken) return;
      taken = true;
      exchange.release();
      discard(body);
    },
  };
}

/** Upstream stream bytes read in a row before the body rests for a turn of the event loop (ChunkReader). */
export const RELAY_BYTES_PER_TURN = 64 * 1024;

/**
 * Reads an upstream stream's body as it arrives ('data' events): each read is decoded, parsed and handed to the
 * handler in the same call, one batch per read (the frames it completed), never an empty one. While the
 * handler waits, the body is paused (undici then stops reading the socket once its buffer is full), and the
 * end or a failure of the body waits for it too, so that the handler never runs twice at once.
 */
class ChunkReader {
  private readonly parser = new SseParser();
  private readonly decoder = new Utf8Text();
  private readonly started = new ChoiceIndexes();
  private readonly finished = new ChoiceIndexes();
  /**
   * Choices that streamed a tool call: Gemini's OpenAI-compatible API ends a streamed tool call with `stop` (its
   * non-streamed answer, and OpenAI's, say `tool_calls`).
   */
  private readonly calling = new ToolCallingChoices();
  private readonly textFrames = new TextFrames();
  private readonly toolCalls = new ToolCallIndexes();
  private readonly thinkTags: ThinkTags;
  private readonly fallback: { id: string; created: number; model: string };
  /**
   * The client's number of each upstream choice index (choice-indexes.ts). Some servers number from 1; the
   * openai SDK's stream helper then fails ("missing role for choice 0") and svc would check an empty first choice.
   * The reader tracks choices (`started`, `finished`, …) by the upstream's index; the numbers are given as the
   * frames go out (`numbered`).
   */
  private readonly numbers: ChoiceNumbers;
  /**
   * Frames read while the numbers wait for the upstream's first index (with n > 1 only: a server numbering
   * from 1 that opens choice 1 first, or a 0-based one that opens choice 1 before choice 0).
   */
  private held: ChatCompletionChunk[] = [];
  /** Bytes of the body read while the choice numbers were not settled: what `held` was parsed from, at most. */
  private heldBytes = 0;
  /** `[DONE]` came: the frames after it are dropped. */
  private done = false;
  /** The body ended (its end was read). */
  private ended = false;
  /** The handler's promise is pending: the body is paused. */
  private waiting = false;
  /** Paused until the next turn of the event loop, after RELAY_BYTES_PER_TURN read in a row. */
  private resting = false;
  /** Bytes read since the body last rested. */
  private unrested = 0;
  /** Bytes of the body read in all. */
  private bytes = 0;
  private settled = false;
  /** A bad frame's or the body's error, thrown once the good frames before it went out. */
  private failure: { error: unknown } | null = null;
  private readonly onData = (part: Buffer): void => {
    // A streamed answer may be as long as a plain one, no longer: its text is kept for the check and the audit
    // payload, which receivers take up to 64 MiB (prompt and answer), and an endless stream would otherwise be
    // relayed, kept and counted until the upstream timeout.
    this.bytes += part.length;
    if (this.bytes > MAX_COMPLETION_BYTES) {
      this.failure ??= { error: new UpstreamError('upstream_invalid_response', `Upstream streamed more than ${MAX_COMPLETION_BYTES} bytes.`) };
      if (!this.waiting) this.pass(this.numbered([]));
      return;
    }
    if (!this.numbers.settled) this.heldBytes += part.length;
    this.pass(this.numbered(this.batchOf(this.parse(() => this.parser.push(this.decoder.write(part))))));
    this.unrested += part.length;
    // An upstream that sends megabytes at once (tiny frames, written as fast as the socket takes them) is read
    // by undici in one go, read after read, without the event loop turning: every other request waited for
    // all of it (300,000 one-character frames held the loop 150–300 ms). Past RELAY_BYTES_PER_TURN the body
    // rests until the next turn.
    if (this.unrested >= RELAY_BYTES_PER_TURN && !this.settled) {
      this.unrested = 0;
      this.resting = true;
      this.body.pause();
      setImmediate(this.wake);
    }
  };
  private readonly wake = (): void => {
    this.resting = false;
    if (!this.settled && !this.waiting) this.body.resume();
  };
  private readonly onEnd = (): void => {
    this.ended = true;
    if (this.done) return;
    const batch = this.batchOf(this.parse(() => [...this.parser.push(this.decoder.end()), ...this.parser.end()]));
    // No [DONE]: what the think tags held back goes out before the end (or the error of an unfinished stream).
    if (!this.done) this.flushHeld(batch);
    this.pass(this.numbered(batch));
  };
  private readonly onError = (error: unknown): void => {
    this.failure ??= { error };
    // Frames held for their choice numbers go out before the failure (an empty batch goes straight on to it).
    if (!this.waiting) this.pass(this.numbered([]));
  };

  constructor(
    private readonly body: Dispatcher.ResponseData['body'],
    private readonly exchange: Exchange,
    request: UpstreamBody,
    private readonly redact: (text: string) => string,
    private readonly handler: BatchHandler,
    private readonly resolve: () => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.fallback = { id: `chatcmpl-upstream-${Date.now().toString(36)}`, created: Math.floor(Date.now() / 1000), model: request.model };
    this.numbers = new ChoiceNumbers(requestedChoices(request));
    this.thinkTags = new ThinkTags(opensThinkInPrompt(request.model));
  }

  start(): void {
    this.body.on('error', this.onError).on('end', this.onEnd).on('data', this.onData);
  }

  /** Hands `batch` to the handler, then goes on (at once, or when the handler's promise settles). */
  private pass(batch: ChatCompletionChunk[]): void {
    if (this.settled) return;
    if (batch.length > 0) {
      let behind: Promise<void> | undefined;
      try {
        behind = this.handler(batch);
      } catch (error) {
        this.stop(error);
        return;
      }
      if (behind) {
        this.waiting = true;
        this.body.pause();
        behind.then(
          () => {
            this.waiting = false;
            this.next();
            if (!this.settled && !this.resting) this.body.resume();
          },
          (error: unknown) => this.stop(error),
        );
        return;
      }
    }
    this.next();
  }

  /** After a batch: the end of the stream, when it came. */
  private next(): void {
    if (this.settled) return;
    if (this.failure) this.fail(this.failure.error);
    else if (this.done) this.settle(null);
    else if (this.ended) {
      // Some servers omit [DONE]; an end after every choice finished is still a complete answer.
      if (this.started.size === 0 || this.finished.size < this.started.size) {
        this.fail(new UpstreamError('upstream_invalid_response', 'The upstream stream ended before it was complete (no [DONE]).'));
      } else this.settle(null);
    }
  }

  /** The handler failed: the stream ends with its error as it is. */
  private stop(error: unknown): void {
    if (!this.settled) this.settle({ error });
  }

  /** The upstream failed: the stream ends with that failure as an `UpstreamError` (or the caller's abort reason). */
  private fail(error: unknown): void {
    this.settle({ error: this.exchange.fail(error) });
  }

  private settle(failure: { error: unknown } | null): void {
    this.settled = true;
    this.exchange.release();
    const { body } = this;
    body.off('data', this.onData).off('end', this.onEnd).off('error', this.onError);
    if (!body.readableEnded) {
      // After [DONE], read what is left (the chunked terminator) so the connection is reused; destroying the
      // body would close it, and a new connection per streamed request costs more than the request itself.
      if (this.done) body.dump({ limit: DRAIN_LIMIT }).catch(ignore);
      else discard(body);
    }
    if (failure) this.reject(failure.error);
    else this.resolve();
  }

  /** The events `read` completes; none, and the stream's failure set, when a frame is past the parser's limit. */
  private parse(read: () => SseEvent[]): SseEvent[] {
    try {
      return read();
    } catch (error) {
      this.failure ??= { error: error instanceof SseLimitError ? new UpstreamError('upstream_invalid_response', error.message) : error };
      return [];
    }
  }

  /** The chunks of `events` up to a [DONE] or a bad frame. */
  private batchOf(events: SseEvent[]): ChatCompletionChunk[] {
    // Sized by its first chunk, as the parser's events are (a read is nearly always one frame).
    let batch: ChatCompletionChunk[] = [];
    if (this.done || this.failure) return batch;
    try {
      for (const event of events) {
        const chunk = this.chunkOf(event);
        if (this.done) {
          this.flushHeld(batch);
          break;
        }
        if (!chunk) continue;
        if (batch.length === 0) batch = [chunk];
        else batch.push(chunk);
      }
    } catch (error) {
      this.failure = { error };
    }
    return batch;
  }

  /**
   * The characters the think tags held back (a possible partial tag), as one last chunk of `batch`: a stream
   * that ends without a choice's finish_reason (`[DONE]` right after its text) would otherwise lose them.
   */
  private flushHeld(batch: ChatCompletionChunk[]): void {
    const choices = this.thinkTags.flush();
    if (choices.length === 0) return;
    const { id, created, model } = this.fallback;
    batch.push({ id, object: 'chat.completion.chunk', created, model, choices });
  }

  /**
   * `batch` with the client's choice numbers, or nothing while they wait for the upstream's first index (the
   * frames are held, in order, for the next batch); at the stream's end, a failure or past MAX_HELD_FRAMES or
   * MAX_HELD_BYTES, the lowest index seen is the first.
   */
  private numbered(batch: ChatCompletionChunk[]): ChatCompletionChunk[] {
    const { numbers } = this;
    if (!numbers.settled) {
      for (const chunk of batch) for (const choice of chunk.choices) numbers.see(choice.index);
      if (!numbers.settled) {
        const last =
          this.done || this.ended || this.failure !== null || this.held.length + batch.length > MAX_HELD_FRAMES || this.heldBytes > MAX_HELD_BYTES;
        if (!last) {
          this.held.push(...batch);
          return [];
        }
        numbers.settle();
      }
      if (this.held.length > 0) {
        batch = [...this.held, ...batch];
        this.held = [];
      }
    }
    // The choices are their frame's own objects (parsed for it): renumbered in place, not copied on every frame.
    for (const chunk of batch) for (const choice of chunk.choices) choice.index = numbers.of(choice.index);
    return batch;
  }

  private chunkOf(event: SseEvent): ChatCompletionChunk | null {
    const data = event.data;
    if (data === '[DONE]' || (data.length < 16 && data.trim() === '[DONE]')) {
      this.done = true;
      return null;
    }
    if (data === '' || data.trim() === '') return null;
    // Most frames are one text delta under the head of the frames before: read without parsing.
    const text = event.event === 'message' ? this.textFrames.read(data) : undefined;
    if (text) {
      this.started.add(0);
      this.thinkTags.apply(text);
      return text;
    }
    // Nesting deeper than MAX_JSON_DEPTH takes at least twice as many characters.
    const problem = data.length > 2 * MAX_JSON_DEPTH ? jsonShapeProblem(data) : undefined;
    if (problem !== undefined) {
      throw new UpstreamError('upstream_invalid_response', `Upstream sent a stream frame ${shapeProblemText(problem.kind)}.`);
    }
    const json = tryJson(data);
    if (json === undefined) throw new UpstreamError('upstream_invalid_response', 'Upstream sent a stream frame that is not JSON.');
    const error = embeddedError(json, this.redact);
    if (error !== null || event.event === 'error') {
      // A named `error` event may carry its message bare (`{"message": …}`).
      throw new UpstreamError('upstream_error', `Upstream failed mid-stream: ${error ?? embeddedError({ error: json }, this.redact) ?? 'unknown error'}`);
    }
    const chunk = normalizeChunk(json, this.fallback, this.toolCalls);
    if (chunk === json) this.textFrames.learn(data, chunk);
    for (const choice of chunk.choices) {
      this.started.add(choice.index);
      this.calling.see(choice);
      if (!choice.finish_reason) continue;
      this.finished.add(choice.index);
      choice.finish_reason = this.calling.finish(choice.index, choice.finish_reason);
    }
    this.thinkTags.apply(chunk);
    return chunk;
  }
}

/**
 * A stream's bytes as text, for the SSE parser: UTF-8 with a character split across reads joined, invalid
 * bytes as U+FFFD and a leading byte order mark dropped — what a streaming `TextDecoder` gives. It runs on every
 * read of every stream, and node's `StringDecoder` does the same work for a fraction of `TextDecoder`'s cost.
 */
class Utf8Text {
  private readonly decoder = new StringDecoder('utf8');
  private started = false;

  write(part: Buffer): string {
    const text = this.decoder.write(part);
    return this.started ? text : this.first(text);
  }

  end(): string {
    const text = this.decoder.end();
    return this.started ? text : this.first(text);
  }

  private first(text: string): string {
    if (text === '') return text;
    this.started = true;
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  }
}

/**
 * Closes a body that will not be read on. undici's body emits an abort error when destroyed before its end,
 * and no reader is listening any more: without a listener that error would be an uncaught exception.
 */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', ignore).destroy();
}

function ignore(): void {}

/** The request's `n`: how many choices the upstream was asked for. */
function requestedChoices(body: UpstreamBody): number {
  return typeof body.n === 'number' ? body.n : 1;
}

/** An upstream's JSON that svc does not parse (`jsonShapeProblem`), for its error message. */
function shapeProblemText(problem: JsonShapeProblem['kind']): string {
  if (problem === 'depth') return `nested more than ${MAX_JSON_DEPTH} levels deep`;
  // Arrays are not limited in what an upstream sends (`jsonShapeProblem`'s default): 'items' is not met here.
  return problem === 'members' ? `with an object of more than ${MAX_JSON_MEMBERS.toLocaleString('en-US')} keys` : 'with an array of too many items';
}

/** `opened`: the model's template opens `<think>` in the prompt (`opensThinkInPrompt`). */
function parseCompletion(text: string, redact: (text: string) => string, opened: boolean): UpstreamCompletion {
  const problem = jsonShapeProblem(text);
  if (problem?.kind === 'depth') throw invalid(`the body nests more than ${MAX_JSON_DEPTH} levels deep`);
  if (problem?.kind === 'members') throw invalid(`the body has an object of more than ${MAX_JSON_MEMBERS.toLocaleString('en-US')} keys`);
  const json = tryJson(text);
  if (json === undefined) throw new UpstreamError('upstream_invalid_response', 'Upstream answered with a body that is not JSON.', { upstreamStatus: 200 });
  if (!isRecord(json) || !Array.isArray(json.choices)) {
    const error = embeddedError(json, redact);
    if (error !== null) throw new UpstreamError('upstream_error', `Upstream failed: ${error}`, { upstreamStatus: 200 });
    throw invalid('the body has no choices array');
  }
  const choices = json.choices.map((raw, position): UpstreamCompletion['choices'][number] => {
    if (!isRecord(raw) || !isRecord(raw.message)) throw invalid(`choices[${position}] has no message`);
    const message: Record<string, unknown> = { ...raw.message, role: 'assistant' };
    if (Array.isArray(message.content)) {
      const { text, reasoning } = contentParts(message.content, '\n');
      message.content = text;
      if (reasoning !== '' && message.reasoning_content == null && message.reasoning == null) message.reasoning_content = reasoning;
    }
    if (message.content === undefined) message.content = null;
    if (message.tool_calls === null) delete message.tool_calls;
    // Some servers (vLLM, Ollama builds) leave a call's `type` out or null; function is the only type there is.
    if (Array.isArray(message.tool_calls)) {
      // A call without an id (Gemini's older models send `"id": ""`) gets one: clients match a tool's result to its call by it.
      message.tool_calls = message.tool_calls.map((call: unknown) => {
        if (!isRecord(call)) return call;
        let out = call.type == null ? { ...call, type: 'function' } : call;
        if (isRecord(call.function) && !isArgumentsText(call.function.arguments)) out = { ...out, function: withArgumentsText(call.function) };
        return typeof call.id === 'string' && call.id !== '' ? out : { ...out, id: newToolCallId() };
      });
    }
    // The server's own reasoning (its parser separated it): the content is the answer, whatever the template opened.
    const ownReasoning = isText(message.reasoning_content) || isText(message.reasoning);
    normalizeReasoning(message);
    // A leading <think> block in the text (Ollama, vLLM without a reasoning parser) is reasoning, not the answer;
    // so is the text before `</think>` of a model whose template opened the block in the prompt.
    const think = typeof message.content === 'string' ? splitThink(message.content, opened && !ownReasoning, normalizeFinishReason(raw.finish_reason)) : null;
    if (think) {
      message.content = think.content;
      message.reasoning_content = typeof message.reasoning_content === 'string' ? message.reasoning_content + think.reasoning : think.reasoning;
    }
    const index = typeof raw.index === 'number' ? raw.index : position;
    const finish_reason = normalizeFinishReason(raw.finish_reason);
    let m = message as UpstreamCompletion['choices'][number]['message'];
    let logprobs = raw.logprobs;
    // A text answer (what nearly every response is) is checked by hand; the schema checks the rest.
    if (!isChoiceIndex(index) || !isPlainText(message)) {
      const parsed = ChoiceSchema.safeParse({ ...raw, index, message, finish_reason });
      if (!parsed.success) throw invalid(`choices[${position}]: ${firstIssue(parsed.error)}`);
      m = parsed.data.message;
      logprobs = parsed.data.logprobs;
    }
    const out: UpstreamCompletion['choices'][number]['message'] = { role: 'assistant', content: m.content };
    let finish = finish_reason;
    if (m.tool_calls && m.tool_calls.length > 0) {
      out.tool_calls = m.tool_calls;
      // As in a stream (ChunkReader's `calling`): Gemini's earlier models said `stop` for a tool call.
      if (finish === 'stop') finish = 'tool_calls';
    }
    if (m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
    if (m.refusal !== undefined) out.refusal = m.refusal;
    // The message's other fields (`annotations`, `audio`, `function_call`, …) go to the client as they came,
    // as they do in a stream's deltas; an empty `tool_calls` stays out, as OpenAI leaves it out.
    for (const key in m) if (!(key in out) && key !== 'tool_calls') out[key] = m[key];
    return { index, message: out, finish_reason: finish, ...(logprobs !== undefined ? { logprobs } : {}) };
  });
  // Every index is known here, unlike in a stream (ChoiceNumbers): the choices in their indexes' order, numbered
  // 0, 1, 2, … So 0-based indexes keep theirs, a server numbering from 1 (or sparsely) keeps its order shifted
  // down, and the first is the one svc checks. (Sorting is stable: two choices of one index stay two.)
  if (choices.some((choice, i) => i > 0 && choice.index < choices[i - 1]!.index)) choices.sort((a, b) => a.index - b.index);
  choices.forEach((choice, i) => (choice.index = i));
  const completion: UpstreamCompletion = { choices, usage: normalizeUsage(json.usage) };
  if (typeof json.id === 'string') completion.id = json.id;
  if (typeof json.created === 'number') completion.created = json.created;
  if (typeof json.service_tier === 'string' || json.service_tier === null) completion.service_tier = json.service_tier;
  if (typeof json.system_fingerprint === 'string' || json.system_fingerprint === null) completion.system_fingerprint = json.system_fingerprint;
  return completion;
}

function isText(value: unknown): boolean {
  return typeof value === 'string' && value !== '';
}

/** A choice's `index` as the schema accepts it. */
function isChoiceIndex(index: unknown): index is number {
  return typeof index === 'number' && Number.isInteger(index) && index >= 0;
}

/**
 * A message or delta with text fields only, each of a type the schema accepts as it is: `content` and
 * `refusal` a string or null, `reasoning_content` a string, no `tool_calls` (each may be absent).
 */
function isPlainText(fields: Record<string, unknown>): boolean {
  const { content, refusal, reasoning_content: reasoning } = fields;
  return (
    fields.tool_calls === undefined &&
    (content === undefined || content === null || typeof content === 'string') &&
    (refusal === undefined || refusal === null || typeof refusal === 'string') &&
    (reasoning === undefined || typeof reasoning === 'string')
  );
}

function normalizeChunk(json: unknown, fallback: { id: string; created: number; model: string }, toolCalls: ToolCallIndexes): ChatCompletionChunk {
  if (!isRecord(json) || !Array.isArray(json.choices)) throw invalid('a stream frame has no choices array');
  // Groq streams its token counts in `x_groq.usage` (on the finish frame), beside or instead of `usage`.
  const usage = json.usage ?? (isRecord(json.x_groq) ? json.x_groq.usage : undefined);
  // A frame that needs no normalising (what OpenAI-compatible servers send for text) is taken as it is.
  const direct = usage === undefined ? plainChunk(json) : undefined;
  if (direct) return direct;
  const choices = json.choices.map((raw, position) => {
    if (!isRecord(raw)) throw invalid(`a stream frame's choices[${position}] is not an object`);
    const delta: Record<string, unknown> = isRecord(raw.delta) ? { ...raw.delta } : {};
    if (delta.role !== undefined && delta.role !== 'assistant') delete delta.role;
    if (delta.tool_calls === null) delete delta.tool_calls;
    // TGI streams each fragment's call as an object, not in an array.
    if (isRecord(delta.tool_calls)) delta.tool_calls = [delta.tool_calls];
    if (Array.isArray(delta.content)) {
      const { text, reasoning } = contentParts(delta.content, '');
      // A delta of reasoning alone carries no content, as other reasoning servers send it.
      if (text === '' && reasoning !== '') delete delta.content;
      else delta.content = text;
      if (reasoning !== '' && delta.reasoning_content == null && delta.reasoning == null) delta.reasoning_content = reasoning;
    }
    if (Array.isArray(delta.tool_calls)) {
      const choice = typeof raw.index === 'number' ? raw.index : position;
      const calls = delta.tool_calls.length;
      delta.tool_calls = delta.tool_calls.map((call: unknown, i: number) => {
        if (!isRecord(call)) return call;
        const index = toolCalls.of(choice, call, i, calls);
        const out = toolCallDelta(call, index);
        const id = toolCalls.idOf(choice, index, call.id);
        if (id === undefined) delete out.id;
        else out.id = id;
        return out;
      });
    }
    normalizeReasoning(delta);
    return { ...raw, index: typeof raw.index === 'number' ? raw.index : position, delta, finish_reason: normalizeFinishReason(raw.finish_reason) };
  });
  const chunk: Record<string, unknown> = {
    ...json,
    id: typeof json.id === 'string' ? json.id : fallback.id,
    object: 'chat.completion.chunk',
    created: Number.isInteger(json.created) ? json.created : fallback.created,
    model: typeof json.model === 'string' ? json.model : fallback.model,
    choices,
  };
  if (usage !== undefined) chunk.usage = normalizeUsage(usage);
  delete chunk.svc;
  // The common frame (text deltas, no tool calls, no usage) is checked by hand: it is nearly every frame of
  // every stream, and a schema parse per frame would cost more than relaying it. Anything else goes through
  // the schema.
  const plain = plainChunk(chunk);
  if (plain) return plain;
  const parsed = ChatCompletionChunkSchema.safeParse(chunk);
  if (!parsed.success) throw invalid(`a stream frame: ${firstIssue(parsed.error)}`);
  return parsed.data;
}

/**
 * A tool-call delta with its `index`, without the nulls some servers (and OpenAI's reasoning models at times)
 * send for what a fragment does not carry (`"id": null`, `"type": null`, `"function": null`, `"name": null`):
 * OpenAI leaves those out, and the schema takes them as absent or not at all.
 */
function toolCallDelta(call: Record<string, unknown>, index: number): Record<string, unknown> {
  const out = withoutNulls(call);
  out.index = index;
  if (isRecord(call.function)) out.function = withArgumentsText(withoutNulls(call.function));
  return out;
}

/** A call's arguments as OpenAI sends them, or absent (a fragment without any); what the schema takes as they are. */
function isArgumentsText(value: unknown): boolean {
  return value === undefined || typeof value === 'string';
}

/**
 * `fn` with its `arguments` as JSON text: TGI (and llama.cpp builds of early 2026) send them as the object itself,
 * which OpenAI's clients cannot take (they parse the text; the schema refuses anything else).
 */
function withArgumentsText(fn: Record<string, unknown>): Record<string, unknown> {
  const args = fn.arguments;
  if (isArgumentsText(args) || args === null) return fn;
  return { ...fn, arguments: JSON.stringify(args) };
}

function withoutNulls(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key in value) if (value[key] !== null) out[key] = value[key];
  return out;
}

/** The schema's key orders (OpenAI's on the wire). */
const CHOICE_KEYS = Object.keys(ChunkChoiceSchema.shape);
const DELTA_KEYS = Object.keys(ChunkChoiceSchema.shape.delta.shape);
const FINISH_REASONS: ReadonlySet<unknown> = new Set(FinishReasonSchema.options);

/**
 * `value` with `keys` first in that order (as the schema's parse returns it), then the other keys as they
 * came: `value` itself when it is in that order already (what OpenAI-compatible servers send), else a copy.
 */
function inSchemaOrder(value: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  if (inOrder(value, keys)) return value;
  const out: Record<string, unknown> = {};
  for (const k of keys) if (k in value) out[k] = value[k];
  for (const k in value) if (!(k in out)) out[k] = value[k];
  return out;
}

/** Do `value`'s own keys list those of `keys` it has in that order, before any other key? */
function inOrder(value: Record<string, unknown>, keys: readonly string[]): boolean {
  let next = 0;
  let other = false;
  for (const k in value) {
    const at = keys.indexOf(k);
    if (at === -1) other = true;
    else if (other || at < next) return false;
    else next = at + 1;
  }
  return true;
}

/**
 * `ChatCompletionChunkSchema.parse(chunk)` for frames that certainly pass it (every schema object is loose:
 * unknown keys are kept); undefined for anything else — including anything `normalizeChunk` would change, so
 * it can be tried on a frame as received. Choices, deltas and their keys come in the schema's order (the
 * client gets them as they are); the frame's own keys stay in the order received, as the relay builds its
 * own frame around the choices. A frame whose choices are in order already is returned itself, uncopied.
 */
export function plainChunk(chunk: Record<string, unknown>): ChatCompletionChunk | undefined {
  if (typeof chunk.id !== 'string' || chunk.object !== 'chat.completion.chunk' || !Number.isInteger(chunk.created) || typeof chunk.model !== 'string') return undefined;
  if (chunk.usage !== undefined || chunk.svc !== undefined) return undefined;
  const fingerprint = chunk.system_fingerprint;
  if (fingerprint !== undefined && fingerprint !== null && typeof fingerprint !== 'string') return undefined;
  const choices = chunk.choices as unknown[];
  let out: Array<Record<string, unknown>> | undefined;
  for (let i = 0; i < choices.length; i++) {
    const choice = choices[i];
    if (!isRecord(choice)) return undefined;
    if (!isChoiceIndex(choice.index)) return undefined;
    if (choice.finish_reason !== null && !FINISH_REASONS.has(choice.finish_reason)) return undefined;
    const delta = choice.delta;
    if (!isRecord(delta) || 'reasoning' in delta) return undefined;
    if ((delta.role !== undefined && delta.role !== 'assistant') || !isPlainText(delta)) return undefined;
    const orderedDelta = inSchemaOrder(delta, DELTA_KEYS);
    const ordered = orderedDelta === delta ? inSchemaOrder(choice, CHOICE_KEYS) : inSchemaOrder({ ...choice, delta: orderedDelta }, CHOICE_KEYS);
    if (ordered !== choice) out ??= choices.slice(0, i) as Array<Record<string, unknown>>;
    out?.push(ordered);
  }
  return (out === undefined ? chunk : { ...chunk, choices: out }) as ChatCompletionChunk;
}

/** `reasoning` (vLLM, Ollama, OpenRouter) → `reasoning_content`; nulls dropped. */
function normalizeReasoning(target: Record<string, unknown>): void {
  if (typeof target.reasoning_content !== 'string') {
    delete target.reasoning_content;
    if (typeof target.reasoning === 'string') target.reasoning_content = target.reasoning;
  }
  delete target.reasoning;
}

/**
 * Other servers' finish reasons (lower-cased) in OpenAI's set: Anthropic's, TGI's, and Gemini's native ones
 * (`MAX_TOKENS`, `SAFETY`, …), which some proxies pass on as they are. Anything else is `stop`.
 */
const FINISH_REASON_ALIASES: Record<string, FinishReason> = {
  max_tokens: 'length',
  model_length: 'length',
  tool_use: 'tool_calls',
  end_turn: 'stop',
  stop_sequence: 'stop',
  eos: 'stop',
  eos_token: 'stop',
  safety: 'content_filter',
  recitation: 'content_filter',
  blocklist: 'content_filter',
  prohibited_content: 'content_filter',
  spii: 'content_filter',
  image_safety: 'content_filter',
  refusal: 'content_filter',
};

function normalizeFinishReason(value: unknown): FinishReason | null {
  if (typeof value !== 'string' || value === '') return null;
  if (FINISH_REASONS.has(value)) return value as FinishReason;
  const lower = value.toLowerCase();
  if (FINISH_REASONS.has(lower)) return lower as FinishReason;
  return FINISH_REASON_ALIASES[lower] ?? 'stop';
}

function normalizeUsage(value: unknown): Usage | null {
  if (!isRecord(value)) return null;
  const prompt = value.prompt_tokens;
  const completion = value.completion_tokens;
  // Counts that no answer has (negative, past 2^53, 1e308) are no usage at all: svc counts the tokens itself, as
  // when none came, rather than pass them to the client, the usage view and the webhook payload, whose schema
  // (and every receiver's `constructEvent`) refuses them.
  if (!isTokenCount(prompt) || !isTokenCount(completion)) return null;
  const total = isTokenCount(value.total_tokens) ? value.total_tokens : prompt + completion;
  if (!isTokenCount(total)) return null;
  const usage: Record<string, unknown> = { ...value, prompt_tokens: prompt, completion_tokens: completion, total_tokens: total };
  // The breakdowns (`prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`, …) reach the
  // client and the stored response as they are: only their counts are kept, each a count an answer can have.
  for (const [name, details] of Object.entries(value)) {
    if (!name.endsWith('_tokens_details')) continue;
    if (isRecord(details)) usage[name] = Object.fromEntries(Object.entries(details).filter(([, count]) => isTokenCount(count)));
    else delete usage[name];
  }
  return usage as Usage;
}

/** A token count an answer can have: a non-negative safe integer (not -5, 1e308, "12" or 2^53). */
export function isTokenCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/**
 * The message of an error body (every shape `readErrorBody` reads), without svc's upstream key (`withoutKeys`,
 * before the cut), shortened; null when the body is no error.
 */
function embeddedError(json: unknown, redact: (text: string) => string): string | null {
  const error = errorObject(json);
  if (error === null) return null;
  const message = withoutKeys(errorFields(error).message ?? 'unknown error', redact);
  const oneLine = message.replace(/\s+/g, ' ').trim();
  return oneLine.length > 500 ? `${oneLine.slice(0, 500)}…` : oneLine;
}

/**
 * Bytes of an answer read at most, plain or streamed: a completion is kilobytes (a long one, with tool calls, a few
 * megabytes); hundreds of them would be held, then parsed in one turn, for one request.
 */
export const MAX_COMPLETION_BYTES = 32 * 1024 * 1024;

/** The body as text, up to `limit` bytes: past it the rest is left unread (`truncate`) or the answer refused (`fail`). */
async function readText(body: Dispatcher.ResponseData['body'], limit: number, past: 'truncate' | 'fail' = 'truncate'): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body as AsyncIterable<Buffer>) {
    parts.push(part);
    size += part.length;
    if (size > limit && past === 'fail') throw new UpstreamError('upstream_invalid_response', `Upstream answered with more than ${limit} bytes.`, { upstreamStatus: 200 });
    if (size >= limit) break;
  }
  return Buffer.concat(parts).toString('utf8');
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function invalid(detail: string): UpstreamError {
  return new UpstreamError('upstream_invalid_response', `Upstream sent an invalid completion: ${detail}.`);
}

function firstIssue(error: { issues: Array<{ path: PropertyKey[]; message: string }> }): string {
  const issue = error.issues[0];
  return issue ? `${issue.path.map(String).join('.') || 'body'}: ${issue.message}` : 'invalid';
}

function errorCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (typeof current !== 'object') return undefined;
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const nested = (current as { errors?: unknown }).errors;
    if (Array.isArray(nested) && nested.length > 0) current = nested[0];
    else current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function parseBaseUrl(baseUrl: string): URL {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`baseUrl is not a URL: ${baseUrl}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('baseUrl must be http(s)');
  return url;
}
