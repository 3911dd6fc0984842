import type { ServerResponse } from 'node:http';
import type { Express, NextFunction, Request, Response } from 'express';
import { ApiError } from '../http/errors.js';
import type { RateLimitBucket } from '../rate-limit/apply-rate-limit.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { Exchange } from './exchange.js';
import type { Pipeline } from './pipeline.js';

/**
 * Express behind the pipeline: `expressRoute(app)` runs the app for an exchange the pipeline opened, whose
 * middleware and routes reach it with `exchangeOf(res)`; `authorized` is the pipeline's key check as
 * middleware, `answerErrors` its error answer as the app's last (error) middleware.
 *
 * @example
 * const app = express();
 * v1.use(authorized(pipeline));
 * app.use(answerErrors(pipeline));
 * const web = expressRoute(app);
 * http.createServer((req, res) => web(pipeline.open(req, res)));
 */
export function expressRoute(app: Express): (exchange: Exchange) => void {
  return (exchange) => {
    // Express keeps `res.locals` when it is already set.
    (exchange.res as ServerResponse & { locals?: Record<string, unknown> }).locals = { exchange };
    app(exchange.req, exchange.res);
  };
}

/** The exchange of a request that `expressRoute` handed to Express. */
export function exchangeOf(res: Response): Exchange {
  return res.locals.exchange as Exchange;
}

/** The key `authorized` found (the routes after it have one). */
export function apiKeyOf(res: Response): ApiKeyRecord {
  const key = res.locals.apiKey as ApiKeyRecord | undefined;
  if (!key) throw new ApiError('internal_error', 'The server could not process the request.');
  return key;
}

/** Middleware: `pipeline.authorize`; the key also goes to `res.locals.apiKey` for the routes after it. */
export function authorized(pipeline: Pipeline, bucket?: RateLimitBucket) {
  return async (_req: Request, res: Response, next: NextFunction) => {
    // Once per request, whichever router authorized first (a path the webhooks router does not know falls through).
    if (res.locals.apiKey === undefined) res.locals.apiKey = await pipeline.authorize(exchangeOf(res), bucket);
    next();
  };
}

/** Error middleware: `pipeline.fail`. */
export function answerErrors(pipeline: Pipeline) {
  return (err: unknown, _req: Request, res: Response, _next: NextFunction) => pipeline.fail(exchangeOf(res), err);
}
