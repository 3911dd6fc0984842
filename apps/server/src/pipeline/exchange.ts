import type { IncomingMessage, ServerResponse } from 'node:http';
import { pooledRandom } from '../crypto/random-pool.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';

/**
 * One request on its way through the pipeline: what every route shares (the request id, the start time, the
 * key once authorized) and what the request's log line says when the response closes.
 */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /**
   * The `x-request-id` header and the webhook's `request_id`: `chatcmpl-…` on the chat route (it is also the chat
   * completion's `id`), `req_…` on every other route (OpenAI's own request ids' form).
   */
  readonly requestId: string;
  /** Epoch ms when the request arrived. */
  readonly startedAt: number;
  /** The URL as received: routers rewrite `req.url` while they route. */
  readonly url: string;
  /** The API key, once the pipeline authorized the request (the log line names its prefix). */
  key: ApiKeyRecord | undefined;
  /** Added to the log line by the route (tokens, upstream latency). */
  logFields: Record<string, unknown> | undefined;
}

/** nginx's "client closed request": logged and audited when the client went away before the end. */
export const CLIENT_CLOSED_STATUS = 499;

/**
 * A request's id for the route `url` names: `chatcmpl-` + 24 random base64url characters for a POST to the chat route,
 * whose completion carries it as its `id` (design §3); `req_` + 24 on any other (a GET there is answered 404), where `chatcmpl-` would name a chat
 * completion that does not exist (a Responses API request's own id is its `resp_…`).
 */
export function newRequestId(url: string, method = 'POST'): string {
  return `${method === 'POST' && isChatPath(url) ? 'chatcmpl-' : 'req_'}${pooledRandom(18, 'base64url')}`;
}

/** The chat route's path in any spelling Express routes there (upper case, a trailing slash). */
function isChatPath(url: string): boolean {
  const path = pathOf(url);
  const end = path.endsWith('/') ? path.length - 1 : path.length;
  return end === CHAT_PATH.length && path.slice(0, end).toLowerCase() === CHAT_PATH;
}
const CHAT_PATH = '/v1/chat/completions';

/** The path of a request URL, without its query string. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}
