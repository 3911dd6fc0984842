import type { Logger } from 'pino';
import { toApiError } from '../http/to-api-error.js';
import { storageFault } from '../storage/storage-fault.js';
import { pathOf, type Exchange } from './exchange.js';

/**
 * Answers a failed request in the error shape of design §4 (never a stack trace or an internal message) and
 * logs what is a server fault. A response whose headers already went out can only be ended.
 *
 * @example
 * answerError(exchange, new ApiError('not_found', 'Unknown request URL.'), logger);
 */
export function answerError(exchange: Exchange, err: unknown, logger: Logger): void {
  const { res } = exchange;
  const error = toApiError(err);
  // A client that went away (the chat route aborts its upstream call then) is not a server fault: 499 in the request log.
  const clientGone = res.destroyed && !res.writableFinished;
  // The request's log line names the error: during an incident "status":502 alone does not say what failed.
  exchange.logFields = { ...exchange.logFields, error: error.wireCode ?? error.code };
  if (error.code === 'internal_error' && !clientGone) {
    logger.error({ err: error.cause ?? err, request_id: exchange.requestId, path: pathOf(exchange.url) }, 'unhandled error');
  }
  if (error.code === 'database_unavailable') {
    // An expected fault with a cause outside svc: what to do about it, not a stack trace.
    logger.error({ fault: storageFault(error.cause), request_id: exchange.requestId, path: pathOf(exchange.url) }, 'database unavailable: request answered 503');
  }
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify(error.toBody());
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  res.writeHead(error.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
