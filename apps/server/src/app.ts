import { randomFillSync } from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import { SVC_MODEL } from '@svc/protocol';
import type { Config } from './config.js';
import type { Store } from './storage/store.js';
import type { Upstream } from './upstream/upstream.js';
import type { AuditSink } from './chat/audit.js';
import type { RateLimiter } from './rate-limit/rate-limiter.js';
import type { KeyCache } from './auth/key-cache.js';
import { bearerAuth } from './auth/bearer-auth.js';
import { rateLimit } from './rate-limit/rate-limit-middleware.js';
import { ApiError } from './http/errors.js';
import { errorHandler } from './http/error-handler.js';
import { CLIENT_CLOSED_STATUS, chatCompletionsHandler } from './chat/chat-completions.js';
import type { Grounder } from './chat/grounder.js';
import type { Metrics } from './metrics/metrics.js';
import { routeLabel } from './metrics/route-label.js';

export interface AppDeps {
  config: Config;
  store: Store;
  upstream: Upstream;
  logger: Logger;
  clock: () => number;
  rateLimiter: RateLimiter;
  keyCache: KeyCache;
  audit: AuditSink;
  grounder: Grounder;
  /** Prometheus series; requests are counted where they are logged. */
  metrics?: Metrics;
  /** Mounted at /v1/webhooks, behind auth and rate limiting. */
  webhooksRouter?: Router;
  /** Mounted at /dashboard (static SPA + /dashboard/api). */
  dashboardRouter?: Router;
  /** Extra public routes mounted before auth (e.g. /v1/openapi.json, /metrics). */
  publicRouter?: Router;
}

const ID_BYTES = 18;
const idPool = Buffer.allocUnsafe(ID_BYTES * 256);
let idOffset = idPool.length;

/** `chatcmpl-` + 24 random base64url characters (drawn from a pool refilled 256 ids at a time). */
export function newRequestId(): string {
  if (idOffset + ID_BYTES > idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  const id = idPool.toString('base64url', idOffset, idOffset + ID_BYTES);
  idOffset += ID_BYTES;
  return `chatcmpl-${id}`;
}

/**
 * The HTTP application; `listen` lives elsewhere so tests can mount it on port 0.
 *
 * @example
 * const app = createApp(deps); const server = app.listen(0, '127.0.0.1');
 */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use((req: Request, res: Response, next: NextFunction) => {
    res.locals.startedAt = deps.clock();
    res.locals.requestId = newRequestId();
    res.setHeader('x-request-id', res.locals.requestId);
    next();
  });
  app.use(requestLog(deps.logger, deps.clock, deps.metrics));

  const auth = bearerAuth({
    keyCache: deps.keyCache,
    clock: deps.clock,
    touchLastUsed: (id, at) => deps.store.keys.touchLastUsed(id, at),
  });
  const limit = rateLimit({ limiter: deps.rateLimiter, defaultRpm: deps.config.rateLimitRpm });
  // The hot route first: a chat request does not walk the public, dashboard and /v1 router layers.
  app.post(
    '/v1/chat/completions',
    auth,
    limit,
    // Parsed as JSON whatever the content type: curl -d sends form encoding by default.
    express.json({ limit: '10mb', type: () => true, strict: false }),
    chatCompletionsHandler(deps),
  );

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const ok = await deps.store.ping();
    res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'database unreachable' });
  });
  if (deps.publicRouter) app.use(deps.publicRouter);
  if (deps.dashboardRouter) app.use('/dashboard', deps.dashboardRouter);

  const v1 = express.Router();
  v1.use(auth);
  v1.use(limit);
  v1.get('/models', (_req, res) => {
    res.json({ object: 'list', data: [{ id: SVC_MODEL, object: 'model', created: 1_735_689_600, owned_by: 'svc' }] });
  });
  if (deps.webhooksRouter) v1.use('/webhooks', deps.webhooksRouter);
  app.use('/v1', v1);

  app.use((req: Request) => {
    throw new ApiError('not_found', `Unknown request URL: ${req.method} ${req.path}. Please check the URL and method.`);
  });
  app.use(errorHandler(deps.logger));
  return app;
}

/**
 * One log line per request: id, key prefix, status, latency, and what the route added (tokens, upstream
 * latency); the same moment counts the request in the metrics. Never keys, prompts or answers.
 */
function requestLog(logger: Logger, clock: () => number, metrics: Metrics | undefined) {
  return (req: Request, res: Response, next: NextFunction) => {
    // 'close', not 'finish': a client that went away mid-stream is logged and counted too, as 499.
    res.on('close', () => {
      const key = res.locals.apiKey as { prefix?: string } | undefined;
      const latencyMs = clock() - (res.locals.startedAt as number);
      const status = res.writableFinished ? res.statusCode : CLIENT_CLOSED_STATUS;
      metrics?.request(req.method, routeLabel(req), status, latencyMs / 1000);
      logger.info(
        {
          request_id: res.locals.requestId,
          method: req.method,
          // originalUrl: `req.path` is relative to the router that answered (`/test` for /v1/webhooks/test).
          path: req.originalUrl.split('?')[0],
          status,
          latency_ms: latencyMs,
          key_prefix: key?.prefix,
          ...(res.locals.logFields as Record<string, unknown> | undefined),
        },
        'request',
      );
    });
    next();
  };
}
