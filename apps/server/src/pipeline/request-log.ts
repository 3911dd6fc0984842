import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';
import { routeLabel } from '../metrics/route-label.js';
import { CLIENT_CLOSED_STATUS, pathOf, type Exchange } from './exchange.js';

/**
 * One log line per request, when its response closes: id, key prefix, status, latency, and what the route
 * added (tokens, upstream latency); the same moment counts it in the metrics. Never keys, prompts or
 * answers. 'close', not 'finish': a client that went away mid-stream is logged and counted too, as 499.
 *
 * @example
 * logOnClose(exchange, { logger, clock, metrics });
 */
export function logOnClose(exchange: Exchange, deps: { logger: Logger; clock: () => number; metrics?: Metrics }): void {
  const { req, res } = exchange;
  res.on('close', () => {
    const latencyMs = deps.clock() - exchange.startedAt;
    const status = res.writableFinished ? res.statusCode : CLIENT_CLOSED_STATUS;
    const method = req.method ?? 'GET';
    const path = pathOf(exchange.url);
    deps.metrics?.request(method, routeLabel(path), status, latencyMs / 1000);
    deps.logger.info(
      {
        request_id: exchange.requestId,
        method,
        path,
        status,
        latency_ms: latencyMs,
        key_prefix: exchange.key?.prefix,
        ...exchange.logFields,
      },
      'request',
    );
  });
}
