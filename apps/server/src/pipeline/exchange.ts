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
  /** `chatcmpl-…`: the `x-request-id` header, the chat completion's `id`, the webhook's `request_id`. */
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

/** `chatcmpl-` + 24 random base64url characters. */
export function newRequestId(): string {
  return `chatcmpl-${pooledRandom(18, 'base64url')}`;
}

/** The path of a request URL, without its query string. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}
