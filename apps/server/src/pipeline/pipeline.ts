import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Authenticate } from '../auth/bearer-auth.js';
import type { Metrics } from '../metrics/metrics.js';
import type { ApplyRateLimit, RateLimitBucket } from '../rate-limit/apply-rate-limit.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import { answerError } from './error-answer.js';
import { newRequestId, type Exchange } from './exchange.js';
import { logOnClose } from './request-log.js';

export interface PipelineDeps {
  logger: Logger;
  clock: () => number;
  /** Requests are counted where they are logged. */
  metrics?: Metrics;
  authenticate: Authenticate;
  applyLimit: ApplyRateLimit;
}

/** A route behind an API key: runs once the pipeline authorized the request. */
export type KeyedRoute = (exchange: Exchange, key: ApiKeyRecord) => Promise<void>;

/**
 * The front door every request goes through, the chat route's fast path and the Express routes alike: the
 * request id, the log line, the API key and its rate limit, and the OpenAI error answer. Plain functions on
 * `node:http` objects, so the chat route runs them without a middleware chain; Express runs the same ones
 * (`pipeline/express.ts`).
 */
export interface Pipeline {
  /** Starts an exchange: a request id (also the `x-request-id` header) and a log line when the response closes. */
  open(req: IncomingMessage, res: ServerResponse): Exchange;
  /**
   * The request's `Authorization: Bearer` key, counted against its rate limit (`x-ratelimit-*` headers on
   * the response); rejects with 401 or 429. The key goes on the exchange, for the log line. `bucket`: which of
   * the key's limits it counts against (the chat limit by default).
   */
  authorize(exchange: Exchange, bucket?: RateLimitBucket): Promise<ApiKeyRecord>;
  /** Answers a failed request with the OpenAI error body. */
  fail(exchange: Exchange, err: unknown): void;
  /** `authorize`, then `route`; whatever either throws is answered by `fail`. */
  runWithKey(exchange: Exchange, route: KeyedRoute): Promise<void>;
}

/**
 * @example
 * const pipeline = createPipeline({ logger, clock, metrics, authenticate, applyLimit });
 * http.createServer((req, res) => pipeline.runWithKey(pipeline.open(req, res), chat));
 */
export function createPipeline(deps: PipelineDeps): Pipeline {
  const { logger, clock, authenticate, applyLimit } = deps;

  const open = (req: IncomingMessage, res: ServerResponse): Exchange => {
    const exchange: Exchange = { req, res, requestId: newRequestId(req.url ?? '/', req.method), startedAt: clock(), url: req.url ?? '/', key: undefined, logFields: undefined };
    res.setHeader('x-request-id', exchange.requestId);
    logOnClose(exchange, deps);
    return exchange;
  };

  const authorize = async (exchange: Exchange, bucket?: RateLimitBucket): Promise<ApiKeyRecord> => {
    // A cached key comes back without a promise: no extra turn for the common case.
    const found = authenticate(exchange.req.headers.authorization);
    const key = found instanceof Promise ? await found : found;
    exchange.key = key;
    await applyLimit(key, exchange.res, bucket);
    return key;
  };

  const fail = (exchange: Exchange, err: unknown): void => answerError(exchange, err, logger);

  const runWithKey = async (exchange: Exchange, route: KeyedRoute): Promise<void> => {
    try {
      await route(exchange, await authorize(exchange));
    } catch (err) {
      fail(exchange, err);
    }
  };

  return { open, authorize, fail, runWithKey };
}
