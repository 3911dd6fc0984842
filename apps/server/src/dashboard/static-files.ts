import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type Router } from 'express';

/**
 * Where the built SPA is: apps/dashboard/dist, found through the @svc/dashboard workspace package, else
 * by walking up from this module (src/dashboard/ when run from source, dist/ when bundled) to the apps folder.
 */
export function findDashboardDist(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('@svc/dashboard/package.json');
    const dist = join(dirname(pkg), 'dist');
    if (existsSync(join(dist, 'index.html'))) return dist;
  } catch {
    // Not linked (a copied build): fall through to the folder layout.
  }
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = resolve(dir, 'dashboard', 'dist');
    if (existsSync(join(candidate, 'index.html'))) return candidate;
    dir = dirname(dir);
  }
  return undefined;
}

/**
 * The built SPA at /dashboard: hashed assets cached for a year, every other path answered with index.html
 * (client-side routes). When nothing is built, a 503 that says how to build it.
 */
export function dashboardStatic(distDir: string | undefined): Router {
  const router = express.Router();
  const indexFile = distDir ? join(distDir, 'index.html') : undefined;
  if (!distDir || !indexFile || !existsSync(indexFile)) {
    router.use((_req, res) => {
      res.status(503).type('text/plain').send('dashboard not built: run npm run build\n');
    });
    return router;
  }
  router.use('/assets', express.static(join(distDir, 'assets'), { immutable: true, maxAge: '365d', index: false }));
  // A missing (or malformed) asset is a plain 404, not the SPA's page and not an error with the file's path.
  router.use('/assets', (_req, res) => {
    res.status(404).type('text/plain').send('Not found\n');
  });
  router.use(express.static(distDir, { index: false, maxAge: 0 }));
  const html = readFileSync(indexFile);
  router.get('/{*path}', (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.type('html').send(html);
  });
  return router;
}
