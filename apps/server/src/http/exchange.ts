import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { pooledRandom } from '../crypto/random-pool.js';
import type { Metrics } from '../metrics/metrics.js';
import { routeLabel } from '../metrics/route-label.js';

/** nginx's "client closed request": logged and audited when the client went away before the end. */
export const CLIENT_CLOSED_STATUS = 499;

/** `chatcmpl-` + 24 random base64url characters. */
export function newRequestId(): string {
  return `chatcmpl-${pooledRandom(18, 'base64url')}`;
}

/** What the request log line says about one request; routes add `key` and `fields` as they learn them. */
export interface LoggedRequest {
  requestId: string;
  startedAt: number;
  method: string;
  /** The URL as received (the query string is cut off when logged). */
  url: string;
  key?: { prefix?: string };
  fields?: Record<string, unknown>;
}

/**
 * One log line per request, when its response closes: id, key prefix, status, latency, and what the route
 * added (tokens, upstream latency); the same moment counts it in the metrics. Never keys, prompts or
 * answers. 'close', not 'finish': a client that went away mid-stream is logged and counted too, as 499.
 */
export function logOnClose(res: ServerResponse, request: LoggedRequest, logger: Logger, clock: () => number, metrics: Metrics | undefined): void {
  res.on('close', () => {
    const latencyMs = clock() - request.startedAt;
    const status = res.writableFinished ? res.statusCode : CLIENT_CLOSED_STATUS;
    const q = request.url.indexOf('?');
    const path = q === -1 ? request.url : request.url.slice(0, q);
    metrics?.request(request.method, routeLabel(path), status, latencyMs / 1000);
    logger.info(
      {
        request_id: request.requestId,
        method: request.method,
        path,
        status,
        latency_ms: latencyMs,
        key_prefix: request.key?.prefix,
        ...request.fields,
      },
      'request',
    );
  });
}
