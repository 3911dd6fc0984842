import type { Request, Response } from 'express';
import {
  SVC_MODEL,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionRequest,
  type SvcResult,
  type Usage,
} from '@svc/protocol';
import type { AppDeps } from '../app.js';
import { apiKeyOf } from '../auth/bearer-auth.js';
import type { ApiError } from '../http/errors.js';
import { toApiError, type OnRequestFailed } from '../http/error-handler.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { CompletedRequest } from './audit.js';
import { countUsage } from './prompt.js';
import { parseChatRequest, toUpstreamBody } from './request.js';

/** nginx's "client closed request": recorded in the audit when the client went away before the end. */
export const CLIENT_CLOSED_STATUS = 499;

type HandlerDeps = Pick<AppDeps, 'config' | 'upstream' | 'audit' | 'grounder' | 'clock' | 'metrics'>;

interface RequestContext {
  deps: HandlerDeps;
  req: Request;
  res: Response;
  key: ApiKeyRecord;
  requestId: string;
  startedAt: number;
  /** Aborted when the client disconnects before the response finished. */
  abort: AbortController;
  /** The upstream exchange (for the request log); streams end with the upstream's last frame. */
  upstreamStartedAt?: number;
  upstreamFinishedAt?: number;
}

/** `POST /v1/chat/completions` (spec §4.1, design §3). */
export function chatCompletionsHandler(deps: HandlerDeps) {
  return async (req: Request, res: Response) => {
    const ctx: RequestContext = {
      deps,
      req,
      res,
      key: apiKeyOf(res),
      requestId: res.locals.requestId as string,
      startedAt: res.locals.startedAt as number,
      abort: new AbortController(),
    };
    res.on('close', () => {
      if (!res.writableFinished) ctx.abort.abort(new Error('client closed the connection'));
    });
    const raw = req.body as Record<string, unknown> | undefined;
    const requestedStreaming = raw?.stream === true;

    // Failures before the response started (400, 502) are audited by the error handler through this hook.
    const onFailed: OnRequestFailed = (error: ApiError) =>
      audit(ctx, {
        statusCode: ctx.abort.signal.aborted ? CLIENT_CLOSED_STATUS : error.status,
        streaming: requestedStreaming,
        messages: raw?.messages,
        responseText: '',
        svc: null,
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      });
    res.locals.onRequestFailed = onFailed;

    const request = parseChatRequest(raw);
    const upstream = toUpstreamBody(request, deps.config.upstream);
    ctx.upstreamStartedAt = deps.clock();
    if (upstream.streaming) {
      const chunks = await deps.upstream.stream({ body: upstream.body, signal: ctx.abort.signal, thinking: upstream.thinking });
      res.locals.onRequestFailed = undefined;
      await streamCompletion(ctx, request, chunks);
      return;
    }
    const completion = await deps.upstream.complete({ body: upstream.body, signal: ctx.abort.signal, thinking: upstream.thinking });
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
      ...(completion.system_fingerprint !== undefined ? { system_fingerprint: completion.system_fingerprint } : {}),
      svc,
    };
    res.locals.onRequestFailed = undefined;
    await audit(ctx, { statusCode: 200, streaming: false, messages: request.messages, responseText: answer, svc, usage });
    // What res.json does for a 200 to a POST, without its content negotiation and freshness checks.
    const json = JSON.stringify(body);
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(json));
    res.end(json);
  };
}

function dehallucinateRequested(request: ChatCompletionRequest): boolean {
  return request.svc?.dehallucinate ?? true;
}

async function audit(ctx: RequestContext, input: Omit<CompletedRequest, 'requestId' | 'key' | 'startedAt' | 'finishedAt'>) {
  const upstreamLatency =
    ctx.upstreamStartedAt === undefined ? {} : { upstream_latency_ms: (ctx.upstreamFinishedAt ?? ctx.deps.clock()) - ctx.upstreamStartedAt };
  ctx.res.locals.logFields = { tokens: input.usage.total_tokens, ...upstreamLatency };
  await ctx.deps.audit.record({
    ...input,
    requestId: ctx.requestId,
    key: ctx.key,
    startedAt: ctx.startedAt,
    finishedAt: ctx.deps.clock(),
  });
}

/**
 * Relays upstream chunks in OpenAI's SSE format under our id and model; the chunk that finishes the first
 * choice also carries `svc` (the full text is known then). Usage from upstream is held back and sent as a
 * `choices: []` chunk only when the client asked for it.
 */
async function streamCompletion(ctx: RequestContext, request: ChatCompletionRequest, chunks: AsyncIterable<ChatCompletionChunk>) {
  const { res } = ctx;
  const created = Math.floor(ctx.startedAt / 1000);
  const includeUsage = request.stream_options?.include_usage === true;
  const requested = dehallucinateRequested(request);
  const texts: string[] = [];
  const started = new Set<number>();
  let usage: Usage | null = null;
  let svc: SvcResult | null = null;
  /** Finish chunks of other choices that arrive before the first choice finished wait for its `svc`. */
  const held: ChatCompletionChunk[] = [];
  let firstToken = false;

  res.status(200);
  res.setHeader('content-type', 'text/event-stream; charset=utf-8');
  res.setHeader('cache-control', 'no-cache');
  res.setHeader('connection', 'keep-alive');
  res.setHeader('x-accel-buffering', 'no');
  res.flushHeaders();

  const write = async (data: string) => {
    if (res.destroyed || res.writableEnded) return;
    if (!res.write(`data: ${data}\n\n`)) {
      // Backpressure: wait until the client has read, or is gone. Both listeners go once either fires:
      // `once()` in a race would leave a 'close' and an 'error' listener behind on every drain.
      await new Promise<void>((resolve) => {
        const done = (): void => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  };
  const frame = (choices: ChatCompletionChunk['choices'], extra: Partial<ChatCompletionChunk> = {}): ChatCompletionChunk => ({
    id: ctx.requestId,
    object: 'chat.completion.chunk',
    created,
    model: SVC_MODEL,
    choices,
    ...extra,
  });
  const computeSvc = async () =>
    ctx.deps.grounder.check({ messages: request.messages, answer: texts[0] ?? '', requested });

  try {
    for await (const chunk of chunks) {
      if (chunk.usage) usage = chunk.usage;
      if (!chunk.choices || chunk.choices.length === 0) continue;
      const choices = chunk.choices.map((choice) => {
        const delta = { ...choice.delta };
        if (!started.has(choice.index)) {
          started.add(choice.index);
          if (delta.role === undefined) delta.role = 'assistant';
        }
        if (typeof delta.content === 'string') texts[choice.index] = (texts[choice.index] ?? '') + delta.content;
        if (!firstToken && (delta.content || delta.reasoning_content || delta.tool_calls?.length)) {
          firstToken = true;
          ctx.deps.metrics?.firstToken((ctx.deps.clock() - ctx.startedAt) / 1000);
        }
        return { ...choice, delta, logprobs: choice.logprobs ?? null };
      });
      const out = frame(choices, chunk.system_fingerprint !== undefined ? { system_fingerprint: chunk.system_fingerprint } : {});
      const finishesFirst = choices.some((c) => c.index === 0 && c.finish_reason !== null);
      const finishesOther = choices.some((c) => c.index !== 0 && c.finish_reason !== null);
      if (finishesFirst) {
        svc = await computeSvc();
        out.svc = svc;
        await write(JSON.stringify(out));
        for (const h of held.splice(0)) await write(JSON.stringify({ ...h, svc }));
      } else if (finishesOther && svc === null) {
        held.push(out);
      } else {
        if (finishesOther && svc) out.svc = svc;
        await write(JSON.stringify(out));
      }
    }
    ctx.upstreamFinishedAt = ctx.deps.clock();
    if (svc === null) {
      // Upstream ended cleanly without a finish_reason for the first choice: close it ourselves.
      svc = await computeSvc();
      await write(JSON.stringify(frame([{ index: 0, delta: {}, finish_reason: 'stop', logprobs: null }], { svc })));
      for (const h of held.splice(0)) await write(JSON.stringify({ ...h, svc }));
    }
    usage ??= await countUsage(request.messages, texts);
    if (includeUsage) await write(JSON.stringify(frame([], { usage })));
    await audit(ctx, {
      statusCode: ctx.abort.signal.aborted ? CLIENT_CLOSED_STATUS : 200,
      streaming: true,
      messages: request.messages,
      responseText: texts[0] ?? '',
      svc,
      usage,
    });
    await write('[DONE]');
  } catch (err) {
    const error = toApiError(err);
    const clientGone = ctx.abort.signal.aborted;
    await audit(ctx, {
      statusCode: clientGone ? CLIENT_CLOSED_STATUS : error.status,
      streaming: true,
      messages: request.messages,
      responseText: texts[0] ?? '',
      svc,
      usage: usage ?? (await countUsage(request.messages, texts)),
    });
    if (!clientGone) await write(JSON.stringify(error.toBody()));
  } finally {
    res.end();
  }
}
