import type { IncomingMessage } from 'node:http';
import type { ChatCompletion, ChatCompletionRequest } from '@svc/protocol';
import { JSON_BODY_LIMIT, readJsonBody } from '../http/json-body.js';
import { toApiError } from '../http/to-api-error.js';
import type { KeyedRoute } from '../pipeline/pipeline.js';
import type { ChunkStream } from '../upstream/upstream.js';
import { chatContext, NO_USAGE, recordFailure, statusFor, type ChatContext, type ChatDeps } from './chat-context.js';
import { complete, sendCompletion } from './completion.js';
import { parseChatRequest, toUpstreamBody } from './request.js';
import { relayStream } from './stream-relay.js';
import { pace, turns } from '../turns.js';

/** A request ready to be answered: upstream's stream to relay, or the finished completion to send. */
type Answer =
  | { request: ChatCompletionRequest; chunks: ChunkStream; completion?: never }
  | { request: ChatCompletionRequest; completion: ChatCompletion; chunks?: never };

/**
 * `POST /v1/chat/completions` (spec §4.1, design §3), behind the pipeline's key check and rate limit: the
 * in-flight limit, the JSON body, the upstream call, then the completion or the stream relay. The listener
 * sends the exact path here without Express; Express routes the path's other spellings (trailing slash,
 * case) to the same route.
 *
 * @example
 * const chat = chatCompletions({ config, upstream, grounder, audit, inFlight, logger, clock });
 * http.createServer((req, res) => pipeline.runWithKey(pipeline.open(req, res), chat));
 */
export function chatCompletions(deps: ChatDeps): KeyedRoute {
  const handle: KeyedRoute = async (exchange, key) => {
    const ctx = chatContext(deps, exchange, key);
    // Before the body is read: a refused request costs no memory and is answered at once.
    deps.inFlight.admit(exchange.res);
    const answer = await prepare(ctx);
    if (answer.chunks) await relayStream(ctx, answer.request, answer.chunks);
    else await sendCompletion(ctx, answer.request, answer.completion);
  };
  return (exchange, key) => deps.inFlight.track(handle(exchange, key));
}

/** True for `POST /v1/chat/completions` exactly (query string allowed): the listener's fast dispatch. */
export function isChatRequest(req: IncomingMessage): boolean {
  if (req.method !== 'POST') return false;
  const url = req.url ?? '';
  return url === CHAT_PATH || (url.startsWith(CHAT_PATH) && url.charCodeAt(CHAT_PATH.length) === 63 /* ? */);
}
const CHAT_PATH = '/v1/chat/completions';

/**
 * Reads and validates the request and asks upstream, up to where the response starts. A failure is recorded
 * (audited with the body as received, if it was read) before the pipeline answers it. The body stays in
 * this function's scope, so it is not kept alive while a stream is relayed.
 */
async function prepare(ctx: ChatContext): Promise<Answer> {
  const { deps, exchange } = ctx;
  let raw: Record<string, unknown> | undefined;
  try {
    // Parsed as JSON whatever the content type: curl -d sends form encoding by default.
    raw = (await readJsonBody(exchange.req, JSON_BODY_LIMIT, deps.bodyBudget, ctx.key.id)) as Record<string, unknown> | undefined;
    const turn = turns();
    const request = await parseChatRequest(raw, turn);
    // Serialising 100,000 messages or megabytes of text is a long step: a turn of its own.
    await pace(turn);
    const upstream = toUpstreamBody(request, deps.config.upstream);
    ctx.upstreamStartedAt = deps.clock();
    if (!upstream.streaming) return { request, completion: await complete(ctx, request, upstream) };
    deps.inFlight.streaming(exchange.res);
    return { request, chunks: await deps.upstream.stream({ body: upstream.body, signal: ctx.abort, thinking: upstream.thinking }) };
  } catch (err) {
    const error = toApiError(err);
    // A 429 is not audited (design §5: "401 and 429 excluded"), whether svc refused the body for room
    // (SVC_MAX_BODY_BYTES_IN_FLIGHT) or the upstream rate-limited it; a body that is not JSON (400 invalid_json) or
    // too large (413) is, as every other 400.
    if (error.status === 429) throw error;
    await recordFailure(ctx, {
      statusCode: statusFor(ctx, error.status),
      streaming: raw?.stream === true,
      messages: raw?.messages,
      responseText: '',
      svc: null,
      usage: NO_USAGE,
    });
    throw error;
  }
}
