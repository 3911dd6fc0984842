import type { Usage } from '@svc/protocol';
import type { BodyBudget } from '../http/json-body.js';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { InFlightLimit } from '../http/in-flight.js';
import type { Metrics } from '../metrics/metrics.js';
import { CLIENT_CLOSED_STATUS, type Exchange } from '../pipeline/exchange.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import { Cancellation, type Upstream } from '../upstream/upstream.js';
import type { AuditSink, CompletedRequest } from '../audit/audit-sink.js';
import type { Grounder } from './grounder.js';

export interface ChatDeps {
  config: Pick<Config, 'upstream' | 'streamKeepAliveMs'>;
  upstream: Upstream;
  grounder: Grounder;
  /** Told about every finished request (usage counters, the webhook's outbox). */
  audit: AuditSink;
  /** The chat requests in flight and their maximum (SVC_MAX_IN_FLIGHT). */
  inFlight: InFlightLimit;
  /** The request-body bytes being read, over chat completions and the Responses API (SVC_MAX_BODY_BYTES_IN_FLIGHT). */
  bodyBudget: BodyBudget;
  logger: Logger;
  clock: () => number;
  /** Time to first token. */
  metrics?: Metrics;
}

/**
 * One chat request in the route: the pipeline's exchange and key, the cancellation its upstream call
 * listens to, and the upstream timing the log line reports.
 */
export interface ChatContext {
  readonly deps: ChatDeps;
  readonly exchange: Exchange;
  readonly key: ApiKeyRecord;
  /** Aborted when the client disconnects before the response finished. */
  readonly abort: Cancellation;
  /** The upstream exchange (for the request log); streams end with the upstream's last frame. */
  upstreamStartedAt: number | undefined;
  upstreamFinishedAt: number | undefined;
  /** `/v1/responses`: the response id, once the client has been (or is about to be) given it; the audit names it. */
  responseId?: string;
  /** A background response's one audit delivery (`CompletedRequest.deliveryId`). */
  deliveryId?: string;
  /** The request's audit is recorded already: a failure reported after it records no second one. */
  audited?: boolean;
}

/** What the audit of one request says beside what its context knows (id, key, times). */
export type Outcome = Omit<CompletedRequest, 'requestId' | 'responseId' | 'key' | 'startedAt' | 'finishedAt'>;

export const NO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

/**
 * The context of an authorized chat request; its `abort` fires when the client leaves before the end.
 *
 * @example
 * const ctx = chatContext(deps, exchange, key);
 * await deps.upstream.complete({ body, signal: ctx.abort, thinking: false });
 */
export function chatContext(deps: ChatDeps, exchange: Exchange, key: ApiKeyRecord): ChatContext {
  const ctx: ChatContext = { deps, exchange, key, abort: new Cancellation(), upstreamStartedAt: undefined, upstreamFinishedAt: undefined };
  const { res } = exchange;
  const closed = () => {
    if (!res.writableFinished) ctx.abort.abort(new Error('client closed the connection'));
  };
  // The client may have left while the pipeline authorized the request: its 'close' has fired already.
  if (res.destroyed) closed();
  else res.on('close', closed);
  return ctx;
}

/**
 * `status`, or, when the request was stopped first, the status its stop names (`auditStatus` on the abort's reason:
 * a background response's cancel, the server's stop), else 499: the client went away.
 */
export function statusFor(ctx: ChatContext, status: number): number {
  if (!ctx.abort.aborted) return status;
  const named = (ctx.abort.reason as { auditStatus?: unknown } | undefined)?.auditStatus;
  return typeof named === 'number' ? named : CLIENT_CLOSED_STATUS;
}

/**
 * Records a finished request: its tokens and upstream latency on the request's log line, and the audit.
 * Resolves once the delivery is durably recorded, so the response's last byte goes out after it.
 *
 * @example
 * await record(ctx, { statusCode: 200, streaming: false, messages, responseText: answer, svc, usage });
 */
export function record(ctx: ChatContext, outcome: Outcome, finishedAt = ctx.deps.clock()): Promise<void> {
  const { deps, exchange } = ctx;
  const fields: Record<string, unknown> = { ...exchange.logFields, tokens: outcome.usage.total_tokens };
  if (ctx.upstreamStartedAt !== undefined) fields.upstream_latency_ms = (ctx.upstreamFinishedAt ?? deps.clock()) - ctx.upstreamStartedAt;
  exchange.logFields = fields;
  return deps.audit.record(completedRequest(ctx, outcome, finishedAt));
}

/**
 * What `record` records of a finished request. One with a delivery id of its own (a background response's) is left
 * out of the Usage view (`usageOnEnd`): whoever ends its run counts it, once.
 */
export function completedRequest(ctx: ChatContext, outcome: Outcome, finishedAt: number): CompletedRequest {
  return {
    requestId: ctx.exchange.requestId,
    ...(ctx.responseId !== undefined && { responseId: ctx.responseId }),
    ...(ctx.deliveryId !== undefined && { deliveryId: ctx.deliveryId, usageOnEnd: true }),
    key: ctx.key,
    startedAt: ctx.exchange.startedAt,
    finishedAt,
    statusCode: outcome.statusCode,
    streaming: outcome.streaming,
    messages: outcome.messages,
    responseText: outcome.responseText,
    ...(outcome.refusal !== undefined && { refusal: outcome.refusal }),
    svc: outcome.svc,
    usage: outcome.usage,
  };
}

/** `record` for a request that failed: the client gets its error whether or not the record could be written. */
export async function recordFailure(ctx: ChatContext, outcome: Outcome): Promise<void> {
  if (ctx.audited) return;
  try {
    await record(ctx, outcome);
  } catch (err) {
    ctx.deps.logger.error({ err, request_id: ctx.exchange.requestId }, 'could not record the failed request');
  }
}
