import type { ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { ApiError } from './errors.js';

/** Called by the error handler before it answers, so a failed request is still audited (set by the chat route). */
export type OnRequestFailed = (error: ApiError) => Promise<void>;

interface BodyParserError extends Error {
  type?: string;
  status?: number;
}

/** Turns anything thrown into design §4's error body. Never a stack trace or an internal message. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const type = (err as BodyParserError | null)?.type;
  switch (type) {
    case 'entity.parse.failed':
      return new ApiError(
        'invalid_json',
        "We could not parse the JSON body of your request. Send valid JSON with 'Content-Type: application/json'.",
      );
    case 'entity.too.large':
      return new ApiError('request_too_large', 'The request body is larger than the 10 MiB limit.');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new ApiError('invalid_request', 'The request body must be UTF-8 encoded JSON.');
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return new ApiError('invalid_request', 'The request body could not be read completely.');
    default: {
      const status = clientErrorStatus(err);
      if (status === 404) return new ApiError('not_found', 'Not found. Please check the URL.');
      if (err instanceof URIError || status !== undefined) {
        // Express's router and `send` fail this way on a path, parameter or cookie with malformed percent-encoding.
        return new ApiError('invalid_request', "The request URL is malformed: every '%' must start a valid percent-encoded UTF-8 sequence.");
      }
      return new ApiError('internal_error', 'The server had an error while processing your request. Please retry.', {
        cause: err,
      });
    }
  }
}

/**
 * The 4xx status of an error that Express, its router or `send` / `serve-static` made for a client's mistake
 * (http-errors style `status`/`statusCode`), else undefined: those are answered as such, not as a 500.
 */
function clientErrorStatus(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { status, statusCode } = err as { status?: unknown; statusCode?: unknown };
  const code = typeof status === 'number' ? status : statusCode;
  return typeof code === 'number' && code >= 400 && code < 500 ? code : undefined;
}

/**
 * Answers a failed request in the error shape of design §4 (never a stack trace or an internal message):
 * logs what is a server fault, lets the route audit the failure first, and only ends a response whose
 * headers already went out.
 */
export async function answerError(
  res: ServerResponse,
  err: unknown,
  context: { logger: Logger; requestId: string | undefined; path: string; onFailed?: OnRequestFailed },
): Promise<void> {
  const apiError = toApiError(err);
  // A client that went away (the chat route aborts its upstream call then) is not a server fault: 499 in the request log.
  const clientGone = res.destroyed && !res.writableFinished;
  if (apiError.code === 'internal_error' && !clientGone) {
    context.logger.error({ err: apiError.cause ?? err, request_id: context.requestId, path: context.path }, 'unhandled error');
  }
  if (context.onFailed) {
    try {
      await context.onFailed(apiError);
    } catch (auditErr) {
      context.logger.error({ err: auditErr, request_id: context.requestId }, 'could not record the failed request');
    }
  }
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify(apiError.toBody());
  for (const [name, value] of Object.entries(apiError.headers)) res.setHeader(name, value);
  res.writeHead(apiError.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Express's error handler: `answerError` with what the middleware chain left in `res.locals`. */
export function errorHandler(logger: Logger) {
  return async (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const onFailed = res.locals.onRequestFailed as OnRequestFailed | undefined;
    res.locals.onRequestFailed = undefined;
    await answerError(res, err, { logger, requestId: res.locals.requestId as string | undefined, path: req.path, onFailed });
  };
}
