import express, { type Router } from 'express';
import helmet from 'helmet';
import { createDashboardApi, type DashboardApiDeps } from './api-router.js';
import { dashboardStatic, findDashboardDist } from './static-files.js';

export type { DashboardWebhooks } from './api-router.js';

export interface DashboardDeps extends DashboardApiDeps {
  /** The built SPA's folder; found next to the server package when omitted. */
  distDir?: string;
}

/**
 * Everything under /dashboard: security headers (a CSP allowing only this origin), the JSON API at /api and
 * the built SPA.
 *
 * @example
 * createRequestListener({ …, dashboardRouter: createDashboardRouter({ config, store, logger, clock, secretBox, keyCache, webhooks }) });
 */
export function createDashboardRouter(deps: DashboardDeps): Router {
  const router = express.Router();
  router.use(
    helmet({
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: ["'self'"],
          scriptSrc: ["'self'"],
          styleSrc: ["'self'"],
          imgSrc: ["'self'", 'data:'],
          fontSrc: ["'self'"],
          connectSrc: ["'self'"],
          objectSrc: ["'none'"],
          baseUri: ["'self'"],
          formAction: ["'self'"],
          frameAncestors: ["'none'"],
        },
      },
      crossOriginEmbedderPolicy: false,
      // Secure cookies and HSTS only make sense behind TLS; a local http server must stay reachable.
      strictTransportSecurity: false,
    }),
  );
  router.use('/api', createDashboardApi(deps));
  router.use(dashboardStatic(deps.distDir ?? findDashboardDist()));
  return router;
}
