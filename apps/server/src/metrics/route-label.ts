/** The public routes: a request that failed before its route matched (401, 429, 413) is still counted under it. */
const KNOWN_ROUTES = new Set([
  '/v1/chat/completions',
  '/v1/models',
  '/v1/webhooks/test',
  '/v1/webhooks/deliveries',
  '/v1/webhooks/deliveries/:id',
  '/v1/webhooks/deliveries/:id/redeliver',
  '/v1/openapi.json',
  '/metrics',
  '/healthz',
  '/readyz',
]);

/**
 * A bounded `route` label: the route template (`/v1/webhooks/deliveries/:id`), `/dashboard` for anything
 * under it, and `unmatched` for every other path (scanners must not create series).
 */
export function routeLabel(path: string): string {
  if (path === '/dashboard' || path.startsWith('/dashboard/')) return '/dashboard';
  const template = path.replace(/\/+$/, '').replace(/\/whd_[^/]+/, '/:id');
  return KNOWN_ROUTES.has(template) ? template : 'unmatched';
}
