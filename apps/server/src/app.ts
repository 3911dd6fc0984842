import { randomUUID } from 'node:crypto';
import type { RequestListener } from 'node:http';
import express, { type Express, type Request, type Router } from 'express';
import type { Logger } from 'pino';
import { SVC_MODEL, type Model } from '@svc/protocol';
import type { Config } from './config.js';
import type { Store } from './storage/store.js';
import type { Upstream } from './upstream/upstream.js';
import type { AuditSink } from './audit/audit-sink.js';
import type { Grounder } from './chat/grounder.js';
import type { RateLimiter } from './rate-limit/rate-limiter.js';
import type { KeyCache } from './auth/key-cache.js';
import type { Metrics } from './metrics/metrics.js';
import { createAuthenticator } from './auth/bearer-auth.js';
import { createRateLimit } from './rate-limit/apply-rate-limit.js';
import { ApiError, quoted } from './http/errors.js';
import { hostCheck } from './http/host-check.js';
import { BodyBudget } from './http/json-body.js';
import { InFlightLimit } from './http/in-flight.js';
import { chatCompletions, isChatRequest } from './chat/chat-completions.js';
import { responsesRouter } from './responses/routes.js';
import { BackgroundResponses } from './responses/background.js';
import { corsFor } from './http/cors.js';
import { createPipeline, type KeyedRoute, type Pipeline } from './pipeline/pipeline.js';
import { answerErrors, apiKeyOf, authorized, exchangeOf, expressRoute } from './pipeline/express.js';

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
  /** The background responses this process runs (started and stopped by its owner); default: one started here. */
  background?: BackgroundResponses;
  /** Mounted at /v1/webhooks, behind auth and the webhooks rate limit. */
  webhooksRouter?: Router;
  /** Mounted at /dashboard (static SPA + /dashboard/api). */
  dashboardRouter?: Router;
  /** Extra public routes mounted before auth (e.g. /v1/openapi.json, /metrics). */
  publicRouter?: Router;
}

/**
 * The server's request listener. Every request goes through the one pipeline (request id, log line, API key and
 * rate limit, error answer); `POST /v1/chat/completions`, the gateway's hot path, then goes straight to the chat
 * route on the plain `node:http` objects, everything else to the Express routes.
 *
 * @example
 * const server = http.createServer(createRequestListener(deps)).listen(0, '127.0.0.1');
 */
export function createRequestListener(deps: AppDeps): RequestListener {
  const pipeline = createPipeline({
    logger: deps.logger,
    clock: deps.clock,
    metrics: deps.metrics,
    authenticate: createAuthenticator({
      keyCache: deps.keyCache,
      clock: deps.clock,
      touchLastUsed: (id, at) => deps.store.keys.touchLastUsed(id, at),
    }),
    applyLimit: createRateLimit({ limiter: deps.rateLimiter, defaultRpm: deps.config.rateLimitRpm }),
  });
  const chatDeps = {
    ...deps,
    inFlight: deps.inFlight ?? new InFlightLimit(deps.config.maxInFlight),
    bodyBudget: new BodyBudget(deps.config.maxBodyBytesInFlight),
  };
  const chat = chatCompletions(chatDeps);
  const background = deps.background ?? defaultBackground(deps);
  const responses = responsesRouter({ ...chatDeps, responses: deps.store.responses, responseEvents: deps.store.responseEvents, background });
  const routes = expressRoute(expressApp(deps, pipeline, chat, responses));
  const cors = corsFor(deps.config.corsOrigins);
  return (req, res) => {
    const exchange = pipeline.open(req, res);
    // RFC 9112 §3.2; Node's own answer to it (requireHostHeader, off in server.ts) is a 400 with an empty body.
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      pipeline.fail(exchange, new ApiError('invalid_request', 'The request has no Host header; HTTP/1.1 requires one.'));
      return;
    }
    if (cors(req, res)) return;
    if (isChatRequest(req)) void pipeline.runWithKey(exchange, chat);
    else if (NUL_IN_URL.test(req.url ?? '')) pipeline.fail(exchange, new ApiError('invalid_request', NUL_IN_URL_MESSAGE));
    else routes(exchange);
  };
}

/** Background responses for a listener made without them (tests): its looks never hold the process. */
function defaultBackground(deps: AppDeps): BackgroundResponses {
  const background = new BackgroundResponses({
    store: deps.store.responses,
    audit: deps.audit,
    keys: deps.store.keys,
    deliveries: deps.store.deliveries,
    owner: `app-${randomUUID()}`,
    clock: deps.clock,
    logger: deps.logger,
  });
  background.start();
  return background;
}

/**
 * A percent-encoded NUL anywhere in the URL (a path's id, a query's value). No id or parameter of svc holds one, and
 * Postgres refuses NUL in text: a lookup of one there fails as an internal error, where the client's request is
 * what is wrong.
 */
const NUL_IN_URL = /%00/;
const NUL_IN_URL_MESSAGE = 'The request URL holds a NUL character (%00): no id or parameter of this API contains one.';

/** Every route but the chat route's exact path, as an Express app behind the pipeline. */
function expressApp(deps: AppDeps, pipeline: Pipeline, chat: KeyedRoute, responses: Router): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  // req.ip (the sign-in limiter's key) and req.secure (the session cookie's Secure flag) believe
  // X-Forwarded-For / X-Forwarded-Proto only from the proxies SVC_TRUST_PROXY names.
  app.set('trust proxy', deps.config.trustProxy);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // The answer says only "not ready" (anyone may ask); the log says why, once each time readiness changes.
  let unready: string | null = null;
  app.get('/readyz', async (_req, res) => {
    const problem = await deps.store.unready();
    if (problem !== unready) {
      if (problem !== null) deps.logger.warn({ problem }, 'not ready: the database takes no writes');
      else deps.logger.info({ was: unready }, 'ready again: the database takes writes');
      unready = problem;
    }
    res.status(problem === null ? 200 : 503).json({ status: problem === null ? 'ready' : 'database unreachable or not writable' });
  });
  // Routes a browser reaches by the server's address alone answer only to its own names (DNS rebinding): the
  // dashboard, and /metrics while it trusts loopback clients instead of a token. The API needs a key anyway.
  const byAddress = deps.config.metricsToken === undefined ? ['/dashboard', '/metrics'] : ['/dashboard'];
  app.use(byAddress, hostCheck({ bindHost: deps.config.host, allowed: deps.config.allowedHosts }));
  if (deps.publicRouter) app.use(deps.publicRouter);
  if (deps.dashboardRouter) app.use('/dashboard', deps.dashboardRouter);

  // The deliveries API counts against a limit of its own (`RateLimitBucket`), not the key's chat limit.
  if (deps.webhooksRouter) app.use('/v1/webhooks', authorized(pipeline, 'webhooks'), deps.webhooksRouter);
  const v1 = express.Router();
  v1.use(authorized(pipeline));
  // The chat path's other spellings (trailing slash, upper case) that Express' routing matches.
  v1.post('/chat/completions', (_req, res) => chat(exchangeOf(res), apiKeyOf(res)));
  const model: Model = { id: SVC_MODEL, object: 'model', created: 1_735_689_600, owned_by: 'svc' };
  v1.get('/models', (_req, res) => {
    res.json({ object: 'list', data: [model] });
  });
  v1.get('/models/:model', (req, res) => {
    if (req.params.model !== SVC_MODEL) {
      throw new ApiError('model_not_found', `The model '${quoted(req.params.model)}' does not exist. Use '${SVC_MODEL}'.`, { param: 'model' });
    }
    res.json(model);
  });
  v1.use('/responses', responses);
  app.use('/v1', v1);

  app.use((req: Request) => {
    throw new ApiError('not_found', `Unknown request URL: ${req.method} ${quoted(req.path)}. Please check the URL and method.`);
  });
  app.use(answerErrors(pipeline));
  return app;
}
