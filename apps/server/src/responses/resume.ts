import type { ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import { ApiError, quoted } from '../http/errors.js';
import { SseWriter } from '../chat/sse-writer.js';
import type { EventBatch, ResponseEventsStore, StreamState } from '../storage/response-events-store.js';
import type { ResponsesStore } from '../storage/responses-store.js';
import type { EventLogs } from './event-log.js';

/** How often a reader looks for new events of a response that runs elsewhere (this process's writes wake it at once). */
export const RESUME_POLL_MS = 250;
/** Batches read at a time: a reader far behind catches up in reads of bounded size. */
const READ_BATCHES = 64;

/** The events that end a stream (`ResponseEvents.finish` and `fail`). */
const FINAL_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

export interface ResumeDeps {
  responseEvents: ResponseEventsStore;
  responses: ResponsesStore;
  logs: EventLogs;
  /** Fires when the server begins its graceful stop: the reader ends, and its client resumes elsewhere. */
  stopping: AbortSignal;
  config: { streamKeepAliveMs: number; responseStreamMaxBytes: number; upstream: { timeoutMs: number } };
  logger: Logger;
}

/**
 * `GET /v1/responses/{id}?stream=true[&starting_after=N]`, OpenAI's way back into a background stream whose connection
 * dropped: the events numbered after N (all of them without N) as they were sent, then the rest live as they are kept,
 * until the stream's last event; a stream that already ended is replayed and closed. It reads the kept events
 * (`response_events`), so the response may run on any instance. Only a response created with `background` and
 * `stream` has its events kept; another one, or one whose events passed SVC_RESPONSE_STREAM_MAX_BYTES, is a 400
 * saying so. Another key's response is not found (404).
 *
 * @example
 * await resumeStream(deps, res, key.id, 'resp_…', 41);
 */
export async function resumeStream(deps: ResumeDeps, res: ServerResponse, keyId: string, id: string, startingAfter: number | undefined): Promise<void> {
  const state = await deps.responseEvents.state(keyId, id);
  if (!state) throw new ApiError('not_found', `Response with id '${quoted(id)}' not found.`, { param: 'response_id' });
  if (state.events === null) {
    throw new ApiError(
      'invalid_value',
      `Response '${quoted(id)}' was not created with background=true and stream=true: only the events of such a response are kept, to be streamed again (resumed with 'starting_after'). Read it with GET /v1/responses/${id} without 'stream'.`,
      { param: 'stream' },
    );
  }
  if (state.events === 'cut') throw notKept(deps, id);

  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const sse = new SseWriter(res, { keepAliveMs: deps.config.streamKeepAliveMs, stallMs: deps.config.upstream.timeoutMs });
  const gone = new AbortController();
  const leave = () => gone.abort();
  res.once('close', leave);
  deps.stopping.addEventListener('abort', leave, { once: true });
  // The client may have left while the pipeline authorized the request or the state was read (its 'close' has fired),
  // and the stop may have begun meanwhile (a request on a connection kept alive): neither event comes again.
  if (res.destroyed || deps.stopping.aborted) leave();
  try {
    await follow(deps, sse, keyId, id, startingAfter ?? -1, gone.signal);
  } catch (err) {
    // The status went out with the first byte: the client is told in the stream, as OpenAI tells a stream's error.
    deps.logger.error({ err, response_id: id }, 'resumed stream: could not read the kept events');
    if (!gone.signal.aborted) sse.writeEvents(errorEvent('server_error', 'svc could not read the events of this response just now; resume again with starting_after.', null));
  } finally {
    res.off('close', leave);
    deps.stopping.removeEventListener('abort', leave);
    sse.end();
  }
}

/** Sends the kept events after `cursor` as they come, until the stream's last one, the response's end, or `signal`. */
async function follow(deps: ResumeDeps, sse: SseWriter, keyId: string, id: string, cursor: number, signal: AbortSignal): Promise<void> {
  for (;;) {
    // The state is read before the events: once the response is seen ended, the read after it holds all of them (its
    // runner writes its last events before its end).
    const state: StreamState | undefined = await deps.responseEvents.state(keyId, id);
    if (!state || signal.aborted) return;
    const batches = await deps.responseEvents.after(id, cursor, READ_BATCHES);
    for (const batch of batches) {
      for (const event of eventsOf(batch)) {
        if (event.seq <= cursor) continue;
        cursor = event.seq;
        const behind = sse.writeEvents(event.text);
        if (behind) await behind;
        if (signal.aborted) return;
        if (FINAL_EVENTS.has(event.type)) return;
      }
    }
    if (batches.length === READ_BATCHES) continue;
    if (state.events === 'cut') {
      sse.writeEvents(notKeptEvent(deps, id));
      return;
    }
    if (!state.running) {
      // Ended without its last event kept (cancelled, refused by the upstream, its runner died): the response as it
      // ended, when that is a stream's end, so that the client learns it as from a stream.
      const final = await finalEvent(deps, keyId, id, cursor);
      if (final) sse.writeEvents(final);
      return;
    }
    await nextWrite(deps, id, signal);
    if (signal.aborted) return;
  }
}

/** Until this process writes events of `id`, RESUME_POLL_MS passed, or `signal` fired; what waited is then let go. */
async function nextWrite(deps: ResumeDeps, id: string, signal: AbortSignal): Promise<void> {
  const round = new AbortController();
  const stop = () => round.abort();
  signal.addEventListener('abort', stop, { once: true });
  try {
    await Promise.race([deps.logs.written(id, round.signal), delay(RESUME_POLL_MS, undefined, { signal: round.signal }).catch(() => undefined)]);
  } finally {
    round.abort();
    signal.removeEventListener('abort', stop);
  }
}

/** One kept event: its number, its type and its text as sent. */
interface KeptEvent {
  seq: number;
  type: string;
  text: string;
}

/** A batch's events, in order: each is `event:` and `data:` lines and a blank line (JSON text holds no raw line break). */
function eventsOf(batch: EventBatch): KeptEvent[] {
  const events: KeptEvent[] = [];
  let at = 0;
  for (let seq = batch.seq; at < batch.text.length; seq++) {
    const end = batch.text.indexOf('\n\n', at);
    const stop = end === -1 ? batch.text.length : end + 2;
    const text = batch.text.slice(at, stop);
    const type = /^event: ([^\n]+)\n/.exec(text)?.[1] ?? '';
    events.push({ seq, type, text });
    at = stop;
  }
  return events;
}

/**
 * The last event of a stream that ended without its last event kept, numbered after every event the client may hold:
 * `response.completed`, `.incomplete` or `.failed` with the stored response; undefined for a cancelled one (its
 * stream ended without an event, as it did for the client that created it).
 */
async function finalEvent(deps: ResumeDeps, keyId: string, id: string, cursor: number): Promise<string | undefined> {
  const last = await deps.responseEvents.lastSeq(id);
  const [tail] = await deps.responseEvents.after(id, last - 1, 1);
  if (tail && FINAL_EVENTS.has(eventsOf(tail).at(-1)?.type ?? '')) return undefined;
  const json = await deps.responses.responseJson(keyId, id);
  if (json === undefined) return undefined;
  const status = statusOf(json);
  if (status !== 'completed' && status !== 'incomplete' && status !== 'failed') return undefined;
  const type = `response.${status}`;
  return `event: ${type}\ndata: {"type":"${type}","sequence_number":${Math.max(last, cursor) + 1},"response":${json}}\n\n`;
}

/** A stored response's `status`, read off the head svc writes first (translate.ts), else parsed. */
function statusOf(json: string): unknown {
  const head = /^\{"id":"[\w-]+","object":"response","created_at":\d+,"status":"(\w+)"/.exec(json);
  return head ? head[1] : (JSON.parse(json) as { status?: unknown }).status;
}

function notKeptMessage(deps: ResumeDeps, id: string): string {
  return `The stream of response '${quoted(id)}' can no longer be resumed: its events passed the ${deps.config.responseStreamMaxBytes} bytes svc keeps per response (SVC_RESPONSE_STREAM_MAX_BYTES), or could not be written, and are not kept. The response runs on: poll GET /v1/responses/${id} without 'stream' until its status is no longer 'queued' or 'in_progress'.`;
}

function notKept(deps: ResumeDeps, id: string): ApiError {
  return new ApiError('invalid_value', notKeptMessage(deps, id), { param: 'stream' });
}

/** The events were given up while a reader followed them: it is told so in the stream, which then ends. */
function notKeptEvent(deps: ResumeDeps, id: string): string {
  return errorEvent('invalid_value', notKeptMessage(deps, id), 'stream');
}

/**
 * An `error` event: OpenAI's fields (`code`, `message`, `param`) and the error object, which the openai SDKs throw as
 * an APIError rather than hand on as one more event. It is no event of the response: it has no `sequence_number`.
 */
function errorEvent(code: 'invalid_value' | 'server_error', message: string, param: string | null): string {
  const type = code === 'server_error' ? 'server_error' : 'invalid_request_error';
  return `event: error\ndata: ${JSON.stringify({ type: 'error', code, message, param, error: { message, type, code, param } })}\n\n`;
}
