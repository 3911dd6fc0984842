import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type Request, type Response, type Router } from 'express';
import { ApiError } from '../http/errors.js';
import type { Metrics } from './metrics.js';

export interface OperationsRouterOptions {
  metrics: Metrics;
  /** SVC_METRICS_TOKEN. Unset: `/metrics` answers loopback clients only. */
  metricsToken: string | undefined;
  /** The exposition `/metrics` serves; default `metrics.scrape()` (a cluster worker asks its primary for every process's). */
  scrape?: () => Promise<string>;
}

const digest = (text: string) => createHash('sha256').update(text).digest();

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/** Headers a reverse proxy adds to say whom it forwards for; a scraper on this host sends none of them. */
const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host', 'x-forwarded-proto'];

/**
 * A client on this host itself. A reverse proxy on the same host (the usual production layout) connects from
 * loopback on behalf of anyone on the Internet, so a request carrying a proxy's forwarding headers is not one,
 * whether or not SVC_TRUST_PROXY names the proxy.
 */
function isLocalClient(req: Request): boolean {
  if (FORWARDING_HEADERS.some((name) => req.headers[name] !== undefined)) return false;
  return isLoopback(req.socket.remoteAddress);
}

/**
 * Routes for operators and integrators, mounted before API-key auth: `GET /v1/openapi.json` (public) and
 * `GET /metrics` (Prometheus; `Authorization: Bearer $SVC_METRICS_TOKEN`, or loopback clients when no
 * token is configured, requests through a reverse proxy excluded — everyone else gets a 404, as if the route
 * were not there).
 *
 * @example
 * createRequestListener({ …, publicRouter: operationsRouter({ metrics, metricsToken: config.metricsToken }) });
 */
export function operationsRouter(options: OperationsRouterOptions): Router {
  const { metrics, metricsToken } = options;
  const scrape = options.scrape ?? (() => metrics.scrape());
  const expected = metricsToken === undefined ? undefined : digest(metricsToken);
  // Built on first request: the generator and the document cost a few MB of memory nobody may ask for.
  let openApi: Promise<string> | undefined;
  const router = express.Router();

  router.get('/v1/openapi.json', async (_req, res) => {
    openApi ??= import('@svc/protocol/openapi').then(({ buildOpenApiDocument }) => JSON.stringify(buildOpenApiDocument()));
    res.type('application/json').send(await openApi);
  });

  router.get('/metrics', async (req: Request, res: Response) => {
    if (expected === undefined) {
      if (!isLocalClient(req)) throw new ApiError('not_found', `Unknown request URL: ${req.method} ${req.path}. Please check the URL and method.`);
    } else {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
      if (!match?.[1]) {
        throw new ApiError('missing_api_key', "Send the metrics token as 'Authorization: Bearer <SVC_METRICS_TOKEN>'.", { headers: { 'www-authenticate': 'Bearer' } });
      }
      // Both sides hashed first: equal lengths for timingSafeEqual, and the token's length does not leak.
      if (!timingSafeEqual(digest(match[1]), expected)) {
        throw new ApiError('invalid_api_key', 'Incorrect metrics token.', { headers: { 'www-authenticate': 'Bearer' } });
      }
    }
    res.setHeader('cache-control', 'no-store');
    res.type(metrics.contentType).send(await scrape());
  });

  return router;
}
