import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import express, { type Express, type NextFunction, type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import { SVC_MODEL, type Model } from '@svc/protocol';
import type { Config } from './config.js';
import type { Store } from './storage/store.js';
import type { Upstream } from './upstream/upstream.js';
import type { AuditSink } from './audit/audit-sink.js';
import type { RateLimiter } from './rate-limit/rate-limiter.js';
import type { KeyCache } from './auth/key-cache.js';
import { bearerAuth, createAuthenticator } from './auth/bearer-auth.js';
import { createRateLimit, rateLimit } from './rate-limit/rate-limit-middleware.js';
import { ApiError } from './http/errors.js';
import { errorHandler } from './http/error-handler.js';
import { hostCheck } from './http/host-check.js';
import { chatRoute, isChatRequest } from './chat/chat-completions.js';
import { logOnClose, newRequestId } from './http/exchange.js';
import type { Grounder } from './chat/grounder.js';
import type { Metrics } from './metrics/metrics.js';
import { InFlightLimit } from './http/in-flight.js';

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
  /** The chat requests in flight and their maximum; default: a limit of `config.maxInFlight`. */
  inFlight?: InFlightLimit;
  /** Mounted at /v1/webhooks, behind auth and rate limiting. */
  webhooksRouter?: Router;
  /** Mounted at /dashboard (static SPA + /dashboard/api). */
  dashboardRouter?: Router;
  /** Extra public routes mounted before auth (e.g. /v1/openapi.json, /metrics). */
  publicRouter?: Router;
}

/**
 * The server's request listener: `POST /v1/chat/completions` goes straight to the chat route on the plain
 * `node:http` objects (the gateway's hot path: no middleware chain), everything else to the Express app.
 *
 * @example
 * const server = http.createServer(createRequestListener(deps)).listen(0, '127.0.0.1');
 */
export function createRequestListener(deps: AppDeps): RequestListener {
  const { app, chat } = build(deps);
  return (req: IncomingMessage, res: ServerResponse) => {
    if (isChatRequest(req)) chat(req, res);
    else app(req, res);
  };
}

/**
 * The HTTP application as an Express app (every route; the chat route there is the same handler the
 * request listener calls directly). Prefer `createRequestListener` for a server.
 *
 * @example
 * const app = createApp(deps); const server = app.listen(0, '127.0.0.1');
 */
export function createApp(deps: AppDeps): Express {
  return build(deps).app;
}

function build(deps: AppDeps): { app: Express; chat: (req: IncomingMessage, res: ServerResponse) => void } {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  // req.ip (the sign-in limiter's key) and req.secure (the session cookie's Secure flag) believe
  // X-Forwarded-For / X-Forwarded-Proto only from the proxies SVC_TRUST_PROXY names.
  app.set('trust proxy', deps.config.trustProxy);

  const authenticate = createAuthenticator({
    keyCache: deps.keyCache,
    clock: deps.clock,
    touchLastUsed: (id, at) => deps.store.keys.touchLastUsed(id, at),
  });
  const applyLimit = createRateLimit({ limiter: deps.rateLimiter, defaultRpm: deps.config.rateLimitRpm });
  const inFlight = deps.inFlight ?? new InFlightLimit(deps.config.maxInFlight);
  const chat = chatRoute({ ...deps, authenticate, applyLimit, inFlight });
  // Other spellings of the path (trailing slash, upper case) that Express' routing matches: same handler,
  // which does its own request id, log line, auth, limit and body.
  app.post('/v1/chat/completions', (req: Request, res: Response) => chat(req, res));

  app.use((req: Request, res: Response, next: NextFunction) => {
    const startedAt = deps.clock();
    const requestId = newRequestId();
    res.locals.startedAt = startedAt;
    res.locals.requestId = requestId;
    res.setHeader('x-request-id', requestId);
    const log = {
      requestId,
      startedAt,
      method: req.method,
      url: req.originalUrl,
      // Read when the response closes: set by bearerAuth, if the request got that far.
      get key() {
        return res.locals.apiKey as { prefix?: string } | undefined;
      },
    };
    logOnClose(res, log, deps.logger, deps.clock, deps.metrics);
    next();
  });

  const auth = bearerAuth(authenticate);
  const limit = rateLimit(applyLimit);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const ok = await deps.store.ping();
    res.status(ok ? 200 : 503).json({ status: ok ? 'ready' : 'database unreachable or not writable' });
  });
  // Routes a browser reaches by the server's address alone answer only to its own names (DNS rebinding): the
  // dashboard, and /metrics while it trusts loopback clients instead of a token. The API needs a key anyway.
  const byAddress = deps.config.metricsToken === undefined ? ['/dashboard', '/metrics'] : ['/dashboard'];
  app.use(byAddress, hostCheck({ bindHost: deps.config.host, allowed: deps.config.allowedHosts }));
  if (deps.publicRouter) app.use(deps.publicRouter);
  if (deps.dashboardRouter) app.use('/dashboard', deps.dashboardRouter);

  const v1 = express.Router();
  v1.use(auth);
  v1.use(limit);
  const model: Model = { id: SVC_MODEL, object: 'model', created: 1_735_689_600, owned_by: 'svc' };
  v1.get('/models', (_req, res) => {
    res.json({ object: 'list', data: [model] });
  });
  v1.get('/models/:model', (req, res) => {
    if (req.params.model !== SVC_MODEL) {
      throw new ApiError('model_not_found', `The model '${req.params.model}' does not exist. Use '${SVC_MODEL}'.`, { param: 'model' });
    }
    res.json(model);
  });
  if (deps.webhooksRouter) v1.use('/webhooks', deps.webhooksRouter);
  app.use('/v1', v1);

  app.use((req: Request) => {
    throw new ApiError('not_found', `Unknown request URL: ${req.method} ${req.path}. Please check the URL and method.`);
  });
  app.use(errorHandler(deps.logger));
  return { app, chat };
}
