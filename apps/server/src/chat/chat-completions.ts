import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  SVC_MODEL,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionRequest,
  type SvcResult,
  type Usage,
} from '@svc/protocol';
import type { AppDeps } from '../app.js';
import type { Authenticate } from '../auth/bearer-auth.js';
import type { ApiError } from '../http/errors.js';
import { answerError, toApiError, type OnRequestFailed } from '../http/error-handler.js';
import { CLIENT_CLOSED_STATUS, logOnClose, newRequestId, type LoggedRequest } from '../http/exchange.js';
import type { InFlightLimit } from '../http/in-flight.js';
import { BodyBudget, JSON_BODY_LIMIT, readJsonBody } from '../http/json-body.js';
import type { ApplyRateLimit } from '../rate-limit/rate-limit-middleware.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import { Cancellation, type ChunkStream } from '../upstream/upstream.js';
import type { CompletedRequest } from '../audit/audit-sink.js';
import { FrameJson } from './frame-json.js';
import { countUsage } from './prompt.js';
import { parseChatRequest, toUpstreamBody } from './request.js';

export type ChatRouteDeps = Pick<AppDeps, 'config' | 'upstream' | 'audit' | 'grounder' | 'clock' | 'metrics' | 'logger'> & {
  authenticate: Authenticate;
  applyLimit: ApplyRateLimit;
  inFlight: InFlightLimit;
};

interface RequestContext {
  deps: ChatRouteDeps;
  req: IncomingMessage;
  res: ServerResponse;
  /** What the request log line says (key and fields filled in as they are known). */
  log: LoggedRequest;
  key: ApiKeyRecord;
  requestId: string;
  startedAt: number;
  /** Aborted when the client disconnects before the response finished. */
  abort: Cancellation;
  /**
   * Set once the body is read, cleared once the response starts: a failure in between (400, 502) is audited
   * with it before the error is sent. Data, not a closure over `complete`'s scope: a closure stored here
   * kept each request's objects alive across young-generation collections (measured: ~1.3 MB promoted per
   * collection, ~25 % of a plain request's CPU in GC).
   */
  failure?: { streaming: boolean; messages: unknown };
  /** The upstream exchange (for the request log); streams end with the upstream's last frame. */
  upstreamStartedAt?: number;
  upstreamFinishedAt?: number;
  /** Request-body bytes in flight over all of this route's requests (SVC_MAX_BODY_BYTES_IN_FLIGHT). */
  bodyBudget: BodyBudget;
}

/**
 * `POST /v1/chat/completions` (spec §4.1, design §3) on plain `node:http` objects: request id, request log,
 * bearer auth, rate limit, the JSON body and the completion itself, without a middleware chain (this is the
 * hot path of the gateway). The server's listener sends the exact path here before Express; Express routes
 * the path's other spellings (trailing slash, case) to the same handler.
 *
 * @example
 * const chat = chatRoute({ ...deps, authenticate, applyLimit });
 * http.createServer((req, res) => (isChatRequest(req) ? chat(req, res) : app(req, res)));
 */
export function chatRoute(deps: ChatRouteDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const bodyBudget = new BodyBudget(deps.config.maxBodyBytesInFlight);
  return (req, res) => {
    const startedAt = deps.clock();
    const requestId = newRequestId();
    res.setHeader('x-request-id', requestId);
    const log: LoggedRequest = { requestId, startedAt, method: req.method ?? 'POST', url: req.url ?? '/' };
    logOnClose(res, log, deps.logger, deps.clock, deps.metrics);
    const ctx = { deps, req, res, log, requestId, startedAt, abort: new Cancellation(), bodyBudget } as RequestContext;
    res.on('close', () => {
      if (!res.writableFinished) ctx.abort.abort(new Error('client closed the connection'));
    });
    complete(ctx).catch((err: unknown) => {
      const failure = ctx.failure;
      ctx.failure = undefined;
      const onFailed: OnRequestFailed | undefined = failure && ((error) => auditFailure(ctx, failure, error));
      return answerError(res, err, { logger: deps.logger, requestId, path: pathOf(log.url), onFailed });
    });
  };
}

/** True for `POST /v1/chat/completions` exactly (query string allowed): the listener's fast dispatch. */
export function isChatRequest(req: IncomingMessage): boolean {
  if (req.method !== 'POST') return false;
  const url = req.url ?? '';
  return url === CHAT_PATH || (url.startsWith(CHAT_PATH) && url.charCodeAt(CHAT_PATH.length) === 63 /* ? */);
}
const CHAT_PATH = '/v1/chat/completions';

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

async function complete(ctx: RequestContext): Promise<void> {
  const { deps, req, res } = ctx;
  const authenticated = deps.authenticate(req.headers.authorization);
  ctx.key = authenticated instanceof Promise ? await authenticated : authenticated;
  ctx.log.key = ctx.key;
  await deps.applyLimit(ctx.key, res);
  // Before the body is read: a refused request costs no memory and is answered at once.
  deps.inFlight.admit(res);
  // Parsed as JSON whatever the content type: curl -d sends form encoding by default.
  const raw = (await readJsonBody(req, JSON_BODY_LIMIT, ctx.bodyBudget)) as Record<string, unknown> | undefined;
  ctx.failure = { streaming: raw?.stream === true, messages: raw?.messages };

  const request = parseChatRequest(raw);
  const upstream = toUpstreamBody(request, deps.config.upstream);
  ctx.upstreamStartedAt = deps.clock();
  if (upstream.streaming) {
    deps.inFlight.streaming(res);
    const chunks = await deps.upstream.stream({ body: upstream.body, signal: ctx.abort, thinking: upstream.thinking });
    ctx.failure = undefined;
    await streamCompletion(ctx, request, chunks);
    return;
  }
  const completion = await deps.upstream.complete({ body: upstream.body, signal: ctx.abort, thinking: upstream.thinking });
  ctx.upstreamFinishedAt = deps.clock();
  const answer = completion.choices[0]?.message.content ?? '';
  const svc = await deps.grounder.check({ messages: request.messages, answer, requested: dehallucinateRequested(request) });
  const usage =
    completion.usage ??
    (await countUsage(request.messages, completion.choices.map((c) => c.message.content ?? '')));
  const body: ChatCompletion = {
    id: ctx.requestId,
    object: 'chat.completion',
    created: completion.created ?? Math.floor(ctx.startedAt / 1000),
    model: SVC_MODEL,
    choices: completion.choices.map((c) => ({
      index: c.index,
      message: c.message,
      logprobs: c.logprobs ?? null,
      finish_reason: c.finish_reason,
    })),
    usage,
    ...(completion.service_tier !== undefined ? { service_tier: completion.service_tier } : {}),
    ...(completion.system_fingerprint !== undefined ? { system_fingerprint: completion.system_fingerprint } : {}),
    svc,
  };
  ctx.failure = undefined;
  await audit(ctx, { statusCode: 200, streaming: false, messages: request.messages, responseText: answer, svc, usage });
  const json = JSON.stringify(body);
  res.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
    // For clients that hide unknown body fields (design §3).
    'x-svc-checked': String(svc.checked),
    'x-svc-grounded': String(svc.grounded),
    'x-svc-score': String(svc.score),
  });
  res.end(json);
}

/** The audit of a request that failed before its response started. */
function auditFailure(ctx: RequestContext, failure: NonNullable<RequestContext['failure']>, error: ApiError): Promise<void> {
  return audit(ctx, {
    statusCode: ctx.abort.aborted ? CLIENT_CLOSED_STATUS : error.status,
    streaming: failure.streaming,
    messages: failure.messages,
    responseText: '',
    svc: null,
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  });
}

function dehallucinateRequested(request: ChatCompletionRequest): boolean {
  return request.svc?.dehallucinate ?? true;
}

function audit(ctx: RequestContext, input: Omit<CompletedRequest, 'requestId' | 'key' | 'startedAt' | 'finishedAt'>): Promise<void> {
  const fields: Record<string, unknown> = { tokens: input.usage.total_tokens };
  if (ctx.upstreamStartedAt !== undefined) fields.upstream_latency_ms = (ctx.upstreamFinishedAt ?? ctx.deps.clock()) - ctx.upstreamStartedAt;
  ctx.log.fields = fields;
  return ctx.deps.audit.record({
    requestId: ctx.requestId,
    key: ctx.key,
    startedAt: ctx.startedAt,
    finishedAt: ctx.deps.clock(),
    statusCode: input.statusCode,
    streaming: input.streaming,
    messages: input.messages,
    responseText: input.responseText,
    svc: input.svc,
    usage: input.usage,
  });
}

/**
 * Relays upstream chunks in OpenAI's SSE format under our id and model; the chunk that finishes the first
 * choice also carries `svc` (the full text is known then). Usage from upstream is held back and sent as a
 * `choices: []` chunk only when the client asked for it.
 */
async function streamCompletion(ctx: RequestContext, request: ChatCompletionRequest, chunks: ChunkStream) {
  const { res } = ctx;
  const created = Math.floor(ctx.startedAt / 1000);
  const includeUsage = request.stream_options?.include_usage === true;
  const requested = dehallucinateRequested(request);
  const texts: string[] = [];
  const started = new Set<number>();
  let usage: Usage | null = null;
  let svc: SvcResult | null = null;
  /** Finish chunks of other choices that arrive before the first choice finished wait for its `svc`. */
  const held: Array<Pick<ChatCompletionChunk, 'choices' | 'system_fingerprint'>> = [];
  let firstToken = false;

  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const sse = new SseWriter(res);

  const write = (data: string): Promise<void> | undefined => sse.write(data);
  const computeSvc = async () =>
    ctx.deps.grounder.check({ messages: request.messages, answer: texts[0] ?? '', requested });

  const frames = new FrameJson(ctx.requestId, created, SVC_MODEL, { includeUsage });
  /** The upstream's last `system_fingerprint`, for the usage frame; whether its `service_tier` is known. */
  let lastFingerprint: string | null | undefined;
  let tierKnown = false;

  /** Adjusts an upstream chunk's choices (ours alone) in place for the client, and keeps the text. */
  const relay = (chunk: ChatCompletionChunk): void => {
    for (const choice of chunk.choices) {
      const delta = choice.delta;
      if (!started.has(choice.index)) {
        started.add(choice.index);
        if (delta.role === undefined) delta.role = 'assistant';
      }
      if (typeof delta.content === 'string') texts[choice.index] = keep(texts[choice.index] ?? '', delta.content);
      if (!firstToken && (delta.content || delta.reasoning_content || delta.tool_calls?.length)) {
        firstToken = true;
        ctx.deps.metrics?.firstToken((ctx.deps.clock() - ctx.startedAt) / 1000);
      }
      if (choice.logprobs === undefined) choice.logprobs = null;
    }
  };

  try {
    for await (const batch of chunks) {
      for (const chunk of batch) {
        if (chunk.system_fingerprint !== undefined) lastFingerprint = chunk.system_fingerprint;
        if (!tierKnown && typeof chunk.service_tier === 'string') {
          tierKnown = true;
          frames.serviceTier(chunk.service_tier);
        }
        if (chunk.usage) usage = chunk.usage;
        if (!chunk.choices || chunk.choices.length === 0) continue;
        relay(chunk);
        const { choices, system_fingerprint: fingerprint } = chunk;
        let finishesFirst = false;
        let finishesOther = false;
        for (const c of choices) {
          if (c.finish_reason === null) continue;
          if (c.index === 0) finishesFirst = true;
          else finishesOther = true;
        }
        if (finishesFirst) {
          svc = await computeSvc();
          await write(frames.of(choices, fingerprint, svc));
          for (const h of held.splice(0)) await write(frames.of(h.choices, h.system_fingerprint, svc));
        } else if (finishesOther && svc === null) {
          held.push({ choices, system_fingerprint: fingerprint });
        } else {
          const behind = write(frames.of(choices, fingerprint, finishesOther && svc ? svc : undefined));
          if (behind) await behind;
        }
      }
    }
    ctx.upstreamFinishedAt = ctx.deps.clock();
    // What is left are our own closing frames, the audit (one event-loop turn) and [DONE]: one write at the end.
    sse.hold();
    if (svc === null) {
      // Upstream ended cleanly without a finish_reason for the first choice: close it ourselves.
      svc = await computeSvc();
      await write(frames.of([{ index: 0, delta: {}, finish_reason: 'stop', logprobs: null }], undefined, svc));
      for (const h of held.splice(0)) await write(frames.of(h.choices, h.system_fingerprint, svc));
    }
    usage ??= await countUsage(request.messages, texts);
    if (includeUsage) await write(frames.usage(usage, lastFingerprint));
    await audit(ctx, {
      statusCode: ctx.abort.aborted ? CLIENT_CLOSED_STATUS : 200,
      streaming: true,
      messages: request.messages,
      responseText: texts[0] ?? '',
      svc,
      usage,
    });
    await write('[DONE]');
  } catch (err) {
    // Whatever failed (upstream, counting, the audit of a finished stream), the delivery is recorded and the
    // client gets an error frame: nothing in this path may throw past them.
    const error = toApiError(err);
    const clientGone = ctx.abort.aborted;
    sse.hold();
    if (!clientGone) await write(JSON.stringify(error.toBody()));
    try {
      await audit(ctx, {
        statusCode: clientGone ? CLIENT_CLOSED_STATUS : error.status,
        streaming: true,
        messages: request.messages,
        responseText: texts[0] ?? '',
        svc,
        usage: usage ?? (await countUsage(request.messages, texts).catch(() => NO_USAGE)),
      });
    } catch (auditError) {
      ctx.deps.logger.error({ err: auditError, request_id: ctx.requestId }, 'could not record the delivery of a failed stream');
    }
  } finally {
    sse.end();
  }
}

const NO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

/**
 * Characters of one choice's streamed text kept for the grounding check and the audit's `response_text`.
 * V8 strings end at 2^29 - 24 characters: an upstream that streams more would make the concatenation throw.
 * The text past this is relayed to the client but not kept (nor counted, when svc counts usage itself).
 */
export const MAX_KEPT_TEXT_CHARS = 2 ** 28;

function keep(text: string, more: string): string {
  if (text.length + more.length <= MAX_KEPT_TEXT_CHARS) return text + more;
  return text.length >= MAX_KEPT_TEXT_CHARS ? text : text + more.slice(0, MAX_KEPT_TEXT_CHARS - text.length);
}

/**
 * SSE frames to a response, coalesced: frames written in the same tick (one upstream read usually carries
 * many) go out in one socket write on the next tick, not a write each — on loopback or a VM a write costs
 * more than building the frames. The headers go out on that tick too, even with no frame yet. After
 * `hold()` frames wait for `end()`, which sends them with the end of the response in a single write. When
 * the socket's buffer is full, the next `write` waits for 'drain' (or close), so a slow reader holds at
 * most one tick's frames in memory.
 */
class SseWriter {
  private pending = '';
  private scheduled = false;
  private held = false;
  private drained: Promise<void> | null = null;
  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.held) return;
    const { res } = this;
    if (res.destroyed || res.writableEnded) {
      this.pending = '';
      return;
    }
    if (this.pending === '') {
      if (!res.headersSent) res.flushHeaders();
      return;
    }
    const out = this.pending;
    this.pending = '';
    if (!res.write(out)) this.drained = waitForDrain(res);
  };

  constructor(private readonly res: ServerResponse) {
    this.schedule();
  }

  /** Queues `data: …` for this tick's write; returns a promise only when the reader is behind. */
  write(data: string): Promise<void> | undefined {
    if (this.drained) {
      const drained = this.drained;
      this.drained = null;
      return drained.then(() => this.write(data));
    }
    this.pending += `data: ${data}\n\n`;
    this.schedule();
    return undefined;
  }

  /** From now on frames are sent by `end()` only (the last few frames of a response, moments apart). */
  hold(): void {
    this.held = true;
  }

  end(): void {
    const { res } = this;
    const out = this.pending;
    this.pending = '';
    if (res.writableEnded) return;
    if (out === '' || res.destroyed) res.end();
    else res.end(out);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(this.flush);
  }
}

/** Resolves when `res` can take more, or is gone. Both listeners go once either fires. */
function waitForDrain(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
