import { SVC_MODEL, type ChatCompletion, type ChatCompletionRequest, type SvcResult } from '@svc/protocol';
import type { UpstreamBody } from '../upstream/upstream.js';
import { record, type ChatContext, type Outcome } from './chat-context.js';
import { countUsage } from './prompt.js';
import { waitForDrain } from './sse-writer.js';
import { answerSchema, dehallucinateRequested } from './request.js';
import { slices } from '../json-in-turns.js';
import { pace, turns } from '../turns.js';
import { answerText, refusalText } from './answer-text.js';

/**
 * The non-streamed answer (spec §4.1): the upstream's completion under our id and model, with the `svc`
 * grounding result, and usage counted here when upstream gave none.
 *
 * @example
 * const body = await complete(ctx, request, toUpstreamBody(request, config.upstream));
 * await sendCompletion(ctx, request, body);
 */
export async function complete(
  ctx: ChatContext,
  request: ChatCompletionRequest,
  upstream: { body: UpstreamBody; thinking: boolean },
): Promise<ChatCompletion> {
  const { deps, exchange } = ctx;
  const completion = await deps.upstream.complete({ body: upstream.body, signal: ctx.abort, thinking: upstream.thinking });
  ctx.upstreamFinishedAt = deps.clock();
  const answer = answerText(completion.choices[0]?.message);
  const svc = await deps.grounder.check({ messages: request.messages, answer, requested: dehallucinateRequested(request), schema: answerSchema(request) });
  const usage =
    completion.usage ??
    // An answer given only as audio is counted by its transcript; a refusal by what the model said.
    (await countUsage(request.messages, completion.choices.flatMap((c) => [answerText(c.message), c.message.reasoning_content ?? '', refusalText(c.message) ?? ''])));
  return {
    id: exchange.requestId,
    object: 'chat.completion',
    created: completion.created ?? Math.floor(exchange.startedAt / 1000),
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
}

/** Records the completion (its delivery is durable before the client has the answer), then sends it. */
export async function sendCompletion(ctx: ChatContext, request: ChatCompletionRequest, body: ChatCompletion): Promise<void> {
  await recordCompletion(ctx, request.messages, body);
  await sendAnswer(ctx, body, body.svc);
}

/** Records the audit of a non-streamed completion answering `messages` (chat, and the Responses API's both ways). */
export function recordCompletion(ctx: ChatContext, messages: Outcome['messages'], completion: ChatCompletion): Promise<void> {
  return record(ctx, completionOutcome(messages, completion));
}

/** What the audit of a non-streamed completion answering `messages` says. */
export function completionOutcome(messages: Outcome['messages'], completion: ChatCompletion): Outcome {
  const message = completion.choices[0]?.message;
  return {
    statusCode: 200,
    streaming: false,
    messages,
    responseText: answerText(message),
    refusal: refusalText(message),
    svc: completion.svc,
    usage: completion.usage,
  };
}

/** A 200 JSON answer with `svc`'s verdict also in headers, for clients that hide unknown body fields (design §3). */
export function sendAnswer(ctx: ChatContext, body: object, svc: SvcResult | undefined): Promise<void> {
  return sendSerialised(ctx, JSON.stringify(body), svc);
}

/** Bodies longer than this are written a slice per turn: encoding and writing 9 MB at once is one step of 10–20 ms. */
const SEND_SLICE_CHARS = 1024 * 1024;

/** `sendAnswer` of a body already serialised (a large one is serialised in turns of its own). */
export async function sendSerialised(ctx: ChatContext, json: string, svc: SvcResult | undefined, turn: () => boolean = turns()): Promise<void> {
  const { res } = ctx.exchange;
  res.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
    ...(svc && { 'x-svc-checked': String(svc.checked), 'x-svc-grounded': String(svc.grounded), 'x-svc-score': String(svc.score) }),
  });
  if (json.length <= SEND_SLICE_CHARS) return void res.end(json);
  for (const slice of slices(json, SEND_SLICE_CHARS)) {
    // A client that left is written no more; one that reads slowly is written as fast as it reads, and one
    // that reads nothing for as long as the whole upstream exchange may take is cut off.
    if (res.destroyed) return;
    if (!res.write(slice)) await waitForDrain(res, ctx.deps.config.upstream.timeoutMs);
    await pace(turn);
  }
  if (!res.destroyed) res.end();
}
