import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { z } from 'zod';
import {
  ResponseCreateRequestOuterSchema,
  ResponseCreateWireRequestSchema,
  ResponseRequestItemSchema,
  type ChatCompletionRequest,
  type ItemReference,
  type ResponseCreateRequest,
  type ResponseCreateWireRequest,
  type ResponseInputItem,
  type ResponseRequestItem,
  type ResponseObject,
} from '@svc/protocol';
import { pooledRandom } from '../crypto/random-pool.js';
import { ApiError, quoted } from '../http/errors.js';
import { JSON_BODY_LIMIT, readJsonBody } from '../http/json-body.js';
import { toApiError } from '../http/to-api-error.js';
import type { KeyedRoute } from '../pipeline/pipeline.js';
import { ConversationTooLongError, MAX_CONVERSATION_CHARS, type Conversation, type ResponsesStore, type StoredItem } from '../storage/responses-store.js';
import { chatContext, completedRequest, NO_USAGE, record, recordFailure, statusFor, type ChatContext, type ChatDeps, type Outcome } from '../chat/chat-context.js';
import { complete, completionOutcome, recordCompletion, sendSerialised } from '../chat/completion.js';
import type { SseWriter } from '../chat/sse-writer.js';
import { parseRequestBodyInTurns, requireSvcModel, toUpstreamBody, type ListedRequest } from '../chat/request.js';
import { relayStream, type StreamOutput } from '../chat/stream-relay.js';
import { ResponseEvents } from './stream-events.js';
import { EscapedString, LONG_STRING_CHARS, stringifyInTurns } from '../json-in-turns.js';
import { pace, turns } from '../turns.js';
import { completedResponse, inputItems, pendingResponse, toChatRequest, type ResponseBase } from './translate.js';
import { Cancellation } from '../upstream/upstream.js';
import { CancelRequested, stoppedError, type BackgroundResponses } from './background.js';
import { backgroundDeliveryId } from './background-audit.js';
import type { EventLogs, StreamEventLog } from './event-log.js';
import type { ResponseEventsStore } from '../storage/response-events-store.js';
import type { Config } from '../config.js';

export interface ResponsesDeps extends ChatDeps {
  responses: ResponsesStore;
  /** The kept events of background streams. */
  responseEvents: ResponseEventsStore;
  config: ChatDeps['config'] & Pick<Config, 'responseStreamMaxBytes'>;
  /** The background responses this process runs. */
  background: BackgroundResponses;
}

/** An id in OpenAI's form for a response or an item: `resp_…`, `msg_…`, `fc_…`. */
export function newId(prefix: string): string {
  return `${prefix}_${pooledRandom(24, 'hex')}`;
}

/**
 * This process's responses still being streamed and not yet stored (not background), by id, with the key that
 * created each. The client holds a response's id from `response.created` on, and a cancel of it meanwhile is told
 * why it cannot be honoured rather than that there is no such response.
 */
export type StreamingResponses = Map<string, { keyId: string }>;

/**
 * `POST /v1/responses`: the request becomes a chat request (its conversation read back through
 * `previous_response_id`), runs as chat completions do (upstream, grounding, audit), and is answered, and
 * stored unless `store: false`, as a response object or as the Responses API's stream of events; a stream's
 * response is listed in `streaming` until it ends.
 */
export function createResponse(deps: ResponsesDeps, logs: EventLogs, streaming: StreamingResponses = new Map()): KeyedRoute {
  const handle: KeyedRoute = async (exchange, key) => {
    const ctx = chatContext(deps, exchange, key);
    deps.inFlight.admit(exchange.res);
    const raw = (await readJsonBody(exchange.req, JSON_BODY_LIMIT, deps.bodyBudget, key.id)) as Record<string, unknown> | undefined;
    let chat: ChatCompletionRequest | undefined;
    try {
      // One clock for the request's passes over its input (validate, read the history, translate, number,
      // store, serialise): 20,000 items or 9 MiB of instructions take a turn of the event loop per pass, three
      // such requests at once would otherwise take one turn of about 150 ms together, and a small request none.
      const turn = turns();
      const sent = await parseRequestBodyInTurns(RESPONSES_REQUEST, raw, turn);
      requireSvcModel(sent.model);
      requireStoreForBackground(sent);
      const request = await withReferencesResolved(deps, key.id, sent, turn);
      await pace(turn);
      const history = await conversation(deps, key.id, request.previous_response_id);
      await pace(turn);
      chat = await toChatRequest(request, history.items, turn);
      await pace(turn);
      const base: ResponseBase = { id: newId('resp'), createdAt: Math.floor(exchange.startedAt / 1000), request };
      const input = await withIds(inputItems(request), turn);
      const upstream = toUpstreamBody(chat, deps.config.upstream);
      if (request.background === true) {
        await runInBackground(deps, logs, ctx, { base, chat, upstream, input, historyChars: history.chars }, turn);
        return;
      }
      /** The response's JSON when it was stored (the same bytes the client gets), else undefined. */
      const store = async (response: ResponseObject): Promise<string | undefined> =>
        request.store !== false ? deps.responses.save(key.id, response, input, history.chars, turn) : undefined;
      ctx.upstreamStartedAt = deps.clock();
      if (!upstream.streaming) {
        const completion = await complete(ctx, chat, upstream);
        const response = completedResponse(base, completion, Math.floor(deps.clock() / 1000), newId);
        const stored = await store(response);
        ctx.responseId = base.id;
        await recordCompletion(ctx, chat.messages, completion);
        // The response echoes `instructions`: megabytes of them make serialising the answer (when the store did
        // not) a long step of its own, and writing it another; neither should share a turn with the audit's
        // insert or with each other.
        await pace(turn);
        const json = stored ?? (await stringifyInTurns(response, turn));
        await pace(turn);
        await sendSerialised(ctx, json, response.svc, turn);
        return;
      }
      deps.inFlight.streaming(exchange.res);
      // Echoed in three events: megabytes of instructions are escaped once, here, in this request's turns.
      const instructions = request.instructions && request.instructions.length >= LONG_STRING_CHARS ? await EscapedString.of(request.instructions, turn) : undefined;
      const chunks = await deps.upstream.stream({ body: upstream.body, signal: ctx.abort, thinking: upstream.thinking });
      streaming.set(base.id, { keyId: key.id });
      try {
        await relayStream(ctx, chat, chunks, (sse) => {
          // From `response.created` on the client holds this id: whatever the stream's end, its audit names it.
          ctx.responseId = base.id;
          return responseEvents(deps, base, sse, store, instructions);
        });
      } finally {
        streaming.delete(base.id);
      }
    } catch (err) {
      const error = toApiError(err);
      await recordFailure(ctx, {
        statusCode: statusFor(ctx, error.status),
        streaming: raw?.stream === true,
        messages: chat?.messages ?? raw?.input,
        responseText: '',
        svc: null,
        usage: NO_USAGE,
      });
      throw error;
    }
  };
  // Held until its audit is recorded: a graceful stop waits for it (InFlightLimit.track).
  return (exchange, key) => deps.inFlight.track(handle(exchange, key));
}

/** A background request, validated and translated: what its run needs. */
interface BackgroundRequest {
  base: ResponseBase;
  chat: ChatCompletionRequest;
  upstream: ReturnType<typeof toUpstreamBody>;
  input: ResponseInputItem[];
  historyChars: number;
}

/**
 * `background: true`, OpenAI's background mode: the response is stored `in_progress` (with this process's lease)
 * and the POST answered with it at once; the upstream call goes on in this process, not tied to the client's
 * connection, holding its SVC_MAX_IN_FLIGHT slot until it ends. Its final state (`completed`, `incomplete`,
 * `failed`, or `cancelled` by POST /v1/responses/{id}/cancel from any instance) is written over the stored one,
 * then audited once. Streamed (`stream: true` too), the events go to this request as they come, and no further once
 * its client left (the response runs on); they are also kept (`EventLogs`), so that the client reads them again from
 * any instance: GET /v1/responses/{id}?stream=true&starting_after=N (resume.ts).
 */
async function runInBackground(deps: ResponsesDeps, logs: EventLogs, ctx: ChatContext, request: BackgroundRequest, turn: () => boolean): Promise<void> {
  const { base, chat, upstream, input } = request;
  const { key, exchange } = ctx;
  // Taken over before anything is stored: past SVC_MAX_IN_FLIGHT the request is refused, never left running unbounded.
  const release = deps.inFlight.keep(exchange.res);
  let json: string;
  const audit = { requestId: exchange.requestId, startedAt: exchange.startedAt, streaming: upstream.streaming };
  try {
    json = await deps.responses.save(key.id, pendingResponse(base), input, request.historyChars, turn, { ...deps.background.lease(), audit, keepsEvents: upstream.streaming });
  } catch (err) {
    release();
    throw err;
  }
  ctx.responseId = base.id;
  // One audit whoever records it: this process at its end, or whoever ends it should nobody run it any more.
  ctx.deliveryId = backgroundDeliveryId(base.id, exchange.startedAt);
  // Its own cancellation, which a cancel and the server's stop fire, not the client's leaving: the client that created
  // it may leave at once (or close its stream), and the work goes on.
  const abort = new Cancellation();
  const work: ChatContext = { ...ctx, abort };
  /**
   * Ends the run: the final state and the audit to record are written in one statement (`settle` with an audit),
   * then the audit is recorded, then the run is ended. A process that dies between the first and the last leaves the
   * run, its end stored, to whoever finds it nobody's (`endOrphans`), who records that audit; once, whoever records it
   * (the delivery id is the response's). Stored before its audit: a receiver that reads the response on the webhook
   * finds it final. Rejects when the end could not be stored; a failed record (perhaps after its commit) is logged and
   * left to that finder, without a second record here over a response stored otherwise.
   */
  const end = async (response: ResponseObject, outcome: Outcome): Promise<void> => {
    const finishedAt = deps.clock();
    const { messages: _messages, streaming: _streaming, ...told } = outcome;
    const lease = deps.background.lease();
    const stored = await deps.responses.settle(key.id, response, lease, turn, { ...audit, outcome: { ...told, finishedAt }, countsOnEnd: true });
    // Its run ended by another (whoever found its lease lapsed, a DELETE it did not stop in time): that one records the
    // audit and counts it. Recorded here too, this audit could win the race for the response's one delivery id, and the
    // webhook would say 200 where the stored response and the Usage view say otherwise.
    if (stored === undefined) return;
    try {
      await record(work, outcome, finishedAt);
      if (await deps.responses.auditRecorded(key.id, base.id, lease.owner)) deps.audit.countUsage?.(completedRequest(work, outcome, finishedAt));
    } catch (err) {
      deps.logger.error({ err, response_id: base.id }, 'could not record the audit of a background response; it is tried once more, else whoever ends its run once its lease lapses records it');
      // Once more at once, as whoever finds its end stored would (once, should the first record have committed).
      await deps.background.endStored(key.id, base.id).catch(() => false);
    }
  };
  /** The audit of a run that ended without an answer. */
  const failure = (error: ApiError, streaming: boolean): Outcome => ({
    statusCode: statusFor(work, error.status),
    streaming,
    messages: chat.messages,
    responseText: '',
    svc: null,
    usage: NO_USAGE,
  });
  /** `end` for a run's last word (failed, cancelled, abandoned): one whose end could not be stored is audited all the same. */
  const endLast = (response: ResponseObject, outcome: Outcome): Promise<void> =>
    end(response, outcome).catch(async (storeErr: unknown) => {
      deps.logger.error({ err: storeErr, response_id: base.id }, 'could not store the end of a background response; it ends failed when its lease lapses');
      // Under the response's one delivery id, as whoever ends it failed will.
      await recordFailure(work, outcome);
    });
  if (upstream.streaming) {
    // The events go to this request as they come, to nobody once its client left, and to the log that keeps them.
    const log = logs.open(base.id);
    let refused: unknown;
    await deps.background.run(base.id, abort, async () => {
      try {
        deps.inFlight.streaming(exchange.res);
        let instructions: EscapedString | undefined;
        let chunks: Awaited<ReturnType<typeof deps.upstream.stream>>;
        try {
          const long = base.request.instructions && base.request.instructions.length >= LONG_STRING_CHARS;
          instructions = long ? await EscapedString.of(base.request.instructions!, turn) : undefined;
          work.upstreamStartedAt = deps.clock();
          chunks = await deps.upstream.stream({ body: upstream.body, signal: abort, thinking: upstream.thinking });
        } catch (err) {
          // Refused before the stream started (the upstream's own error): the response ends failed, audited here, and
          // the caller answers the error. Only here: once the relay wrote its first event, it ends the stream itself.
          refused = err;
          const error = toApiError(err);
          // The refusal is this POST's answer: audited with the status its client gets, 499 once it left (as any
          // stream's client that left before its answer), unless the run was cancelled or stopped first.
          const outcome = { ...failure(error, true), statusCode: statusFor(abort.aborted ? work : ctx, error.status) };
          await endLast(endedResponse(base, abort, error), outcome);
          ctx.audited = true;
          return;
        }
        await relayStream(work, chat, chunks, (sse) => responseEvents(deps, base, sse, end, instructions, { abort, storeLast: endLast, log }));
      } finally {
        release();
      }
    });
    if (refused !== undefined) throw refused;
    return;
  }
  /** The run ended without an answer (or with one that could not be stored): stored so, and audited so. */
  const endFailed = (err: unknown) => {
    const error = toApiError(err);
    return endLast(endedResponse(base, abort, error), failure(error, false));
  };
  deps.background.run(base.id, abort, async () => {
    try {
      work.upstreamStartedAt = deps.clock();
      let completion: Awaited<ReturnType<typeof complete>>;
      try {
        completion = await complete(work, chat, upstream);
      } catch (err) {
        return await endFailed(err);
      }
      const response = completedResponse(base, completion, Math.floor(deps.clock() / 1000), newId);
      // Audited whatever the store says (the response deleted meanwhile, or ended by another instance that found its
      // lease lapsed, under the same delivery id): the upstream call was made, once.
      try {
        await end(response, completionOutcome(chat.messages, completion));
      } catch (err) {
        return await endFailed(err);
      }
    } finally {
      release();
    }
  });
  await sendSerialised(ctx, json, undefined, turn);
}

/**
 * A background response that ended without an answer: `cancelled` when its cancel was asked, `failed` with the
 * server's reason when it stopped, else `failed` with `error`.
 */
function endedResponse(base: ResponseBase, abort: Cancellation, error: ApiError): ResponseObject {
  const pending = pendingResponse(base);
  if (abort.reason instanceof CancelRequested) return { ...pending, status: 'cancelled' };
  return { ...pending, status: 'failed', error: stoppedError(abort.reason) ?? { code: error.wireCode ?? error.code, message: error.message } };
}

export const RESPONSES_REQUEST: ListedRequest<ResponseCreateWireRequest> = {
  schema: ResponseCreateWireRequestSchema,
  outer: ResponseCreateRequestOuterSchema,
  lists: [{ key: 'input', items: z.array(ResponseRequestItemSchema) }],
};

/**
 * `background: true` with `store: false`, refused before the upstream is asked: a background response is there to
 * be polled (`GET /v1/responses/{id}`) and cancelled, and one svc keeps no copy of would answer both with a 404.
 */
function requireStoreForBackground(request: ResponseCreateWireRequest): void {
  if (request.background !== true || request.store !== false) return;
  throw new ApiError(
    'invalid_value',
    "background mode requires 'store' to be true: a background response is kept so that it can be polled with GET /v1/responses/{id} and cancelled. Leave 'store' out (it defaults to true), or leave 'background' out to get the answer in this response alone.",
    { param: 'background' },
  );
}

function isReference(item: ResponseRequestItem): item is ItemReference {
  return item.type === 'item_reference' || (item.type == null && !('role' in item));
}

/**
 * The request with each `item_reference` in `input` replaced by the stored output item it names (this key's
 * only), as OpenAI reads them; a reference to no such item is a 404 in OpenAI's words.
 */
async function withReferencesResolved(
  deps: ResponsesDeps,
  keyId: string,
  request: ResponseCreateWireRequest,
  turn: () => boolean,
): Promise<ResponseCreateRequest> {
  const { input } = request;
  if (typeof input !== 'object' || !input.some(isReference)) return request as ResponseCreateRequest;
  let stored: Map<string, StoredItem>;
  try {
    stored = await deps.responses.outputItems(keyId, input.filter(isReference).map((item) => item.id).filter(couldBeStored), turn);
  } catch (err) {
    if (err instanceof ConversationTooLongError) throw referencedTooLong(err.chars);
    throw err;
  }
  // Counted at each reference: one large item named a thousand times is sent upstream a thousand times.
  let chars = 0;
  const resolved = input.map((item, i): ResponseInputItem => {
    if (!isReference(item)) return item;
    const found = stored.get(item.id);
    if (found) {
      chars += found.chars;
      if (chars > MAX_CONVERSATION_CHARS) throw referencedTooLong(chars);
      return found.item;
    }
    throw new ApiError(
      'not_found',
      `Item with id '${quoted(item.id)}' not found. Items are not persisted when \`store\` is set to false. Try again with \`store\` set to true, or remove this item from your input.`,
      { param: `input[${i}]` },
    );
  });
  return { ...request, input: resolved };
}

function referencedTooLong(chars: number): ApiError {
  return new ApiError(
    'invalid_request',
    `The items named by item_reference hold ${chars} characters or more; at most ${MAX_CONVERSATION_CHARS} (the request body limit) are read back. Send fewer references, or the turns you need in 'input'.`,
    { param: 'input', wireCode: 'context_length_exceeded' },
  );
}

/** The conversation behind `previous_response_id`, read for this key only. */
async function conversation(deps: ResponsesDeps, keyId: string, previous: string | null | undefined): Promise<Conversation> {
  if (!previous) return { items: [], chars: 0 };
  let found: Conversation | undefined;
  try {
    found = couldBeStored(previous) ? await deps.responses.conversation(keyId, previous) : undefined;
  } catch (err) {
    if (!(err instanceof ConversationTooLongError)) throw err;
    // OpenAI's code for input past what the model reads, so SDKs and agents treat it as they already do.
    throw new ApiError(
      'invalid_request',
      `The conversation behind previous_response_id holds ${err.chars} characters; at most ${MAX_CONVERSATION_CHARS} (the request body limit) are read back. Start a new conversation, or send the turns you need in 'input'.`,
      { param: 'previous_response_id', wireCode: 'context_length_exceeded' },
    );
  }
  if (!found) throw new ApiError('not_found', `Previous response with id '${quoted(previous)}' not found.`, { param: 'previous_response_id' });
  return found;
}

/**
 * Whether an id the client sent could name something stored: svc makes no id with a NUL, and Postgres refuses NUL in
 * text, so one is not looked up: it gets the not-found answer of any other unknown id rather than an internal error.
 */
function couldBeStored(id: string): boolean {
  return !id.includes('\u0000');
}

/**
 * Input items as stored and listed: each with an id, a message's text as content parts. Numbered in the
 * request's turns of the event loop: 20,000 items at once took one turn of about 30 ms.
 */
async function withIds(items: readonly ResponseInputItem[], turn: () => boolean): Promise<ResponseInputItem[]> {
  const out: ResponseInputItem[] = [];
  for (const item of items) {
    out.push(withId(item));
    if (turn()) await yieldToEventLoop();
  }
  return out;
}

function withId(item: ResponseInputItem): ResponseInputItem {
  if (item.type === 'function_call') return { ...item, id: item.id ?? newId('fc') };
  if (item.type === 'function_call_output') return { ...item, id: item.id ?? newId('fco') };
  if (item.type === 'custom_tool_call') return { ...item, id: item.id ?? newId('ctc') };
  if (item.type === 'custom_tool_call_output') return { ...item, id: item.id ?? newId('ctco') };
  if (item.type === 'reasoning') return item;
  const text = item.role === 'assistant' ? 'output_text' : 'input_text';
  const content = typeof item.content === 'string' ? [{ type: text, text: item.content }] : item.content;
  return { ...item, type: 'message', id: item.id ?? newId('msg'), content } as ResponseInputItem;
}

/**
 * A background response's stream: the cancellation its run listens to, how its last word (failed, cancelled, abandoned)
 * is stored, and the log that keeps its events (closed, its last events written, before its end is stored).
 */
interface BackgroundStream {
  abort: Cancellation;
  storeLast: (response: ResponseObject, outcome: Outcome) => Promise<unknown>;
  log: StreamEventLog;
}

/**
 * The relay's output as Responses API events; the response is stored before `response.completed` (or
 * `response.failed`) is sent.
 */
function responseEvents(
  deps: ResponsesDeps,
  base: ResponseBase,
  sse: SseWriter,
  store: (response: ResponseObject, outcome: Outcome) => Promise<unknown>,
  instructions: EscapedString | undefined,
  background?: BackgroundStream,
): StreamOutput {
  const events = new ResponseEvents(pendingResponse(base), newId, () => Math.floor(deps.clock() / 1000), instructions);
  const abort = background?.abort;
  const storeLast = background?.storeLast ?? store;
  const log = background?.log;
  /** The stream's events to its client and, a background one's, to its log (kept). */
  const write = (text: string) => {
    log?.append(text, events.emitted);
    return sse.writeEvents(text);
  };
  /**
   * A background stream's last events kept, before its end is stored: a reader that finds it ended has read them all
   * (`upTo`: the count of events `text` ends with, when not all made so far).
   */
  const keepLast = async (text: string, upTo = events.emitted) => {
    log?.append(text, upTo);
    await log?.close();
  };
  write(events.start());
  return {
    // A background response's end is stored with its audit, which `store` records.
    ...(background && { recordsAudit: true as const }),
    serviceTier: () => {},
    choices: (choices, _fingerprint, svc) => write(events.chunk({ choices, ...(svc && { svc }) })),
    usage: (usage) => write(events.chunk({ choices: [], usage })),
    end: async (outcome) => {
      const finished = events.finish();
      // `response.completed` (or `.incomplete`) is kept once the response is stored so: an end the database refused
      // goes on to `fail`, and a reader of the kept events would otherwise find the answer completed where the POST
      // got `response.failed` and the response ends failed. A reader that finds the run ended before that event is
      // kept (its runner died meanwhile) gets it made from the stored response, the same event.
      const before = finished.lastIndexOf('\n\nevent: ');
      const last = before === -1 ? 0 : before + 2;
      await keepLast(finished.slice(0, last), events.emitted - 1);
      await store(events.result, outcome);
      await keepLast(finished.slice(last));
      return sse.writeEvents(finished);
    },
    // As OpenAI keeps a response that failed: stored (unless `store: false`) with `status: "failed"` and its
    // error, before `response.failed` is sent, so the id the client holds reads back. A store that fails
    // here does not hide the stream's own error.
    fail: async (error, usage, outcome) => {
      const failed = events.fail({ code: error.wireCode ?? error.code, message: error.message }, usage);
      await keepLast(failed);
      await storeLast(events.result, outcome).catch(() => undefined);
      return sse.writeEvents(failed);
    },
    // A client that leaves mid-stream already holds the response's id (`response.created`): what was
    // generated is stored as an `incomplete` response, so that id reads back rather than 404.
    // A background stream cancelled (from any instance) or cut by the server's stop ends so, not as a client leaving.
    abandoned: async (usage, outcome) => {
      const abandoned = events.abandon(usage);
      await log?.close();
      const stopped = stoppedError(abort?.reason);
      if (abandoned.status === 'incomplete' && abort?.reason instanceof CancelRequested) await storeLast({ ...abandoned, status: 'cancelled', incomplete_details: null }, outcome);
      else if (abandoned.status === 'incomplete' && stopped) await storeLast({ ...abandoned, status: 'failed', error: stopped, incomplete_details: null }, outcome);
      else await storeLast(abandoned, outcome);
    },
  };
}
