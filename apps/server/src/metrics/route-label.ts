/** The public routes: a request that failed before its route matched (401, 429, 413) is still counted under it. */
const KNOWN_ROUTES = new Set([
  '/v1/chat/completions',
  '/v1/models',
  '/v1/models/:model',
  '/v1/responses',
  '/v1/responses/:id',
  '/v1/responses/:id/cancel',
  '/v1/responses/:id/input_items',
  '/v1/webhooks/test',
  '/v1/webhooks/deliveries',
  '/v1/webhooks/deliveries/redeliver',
  '/v1/webhooks/deliveries/:id',
  '/v1/webhooks/deliveries/:id/redeliver',
  '/v1/webhooks/deliveries/:id/cancel',
  '/v1/openapi.json',
  '/metrics',
  '/healthz',
  '/readyz',
]);

/** A path segment that is an id (any text: an unknown id is still a request to that route), by the segment before it. */
const ID_AFTER = /^(\/v1\/(?:models|responses))\/[^/]+/;

/**
 * A bounded `route` label: the route template (`/v1/webhooks/deliveries/:id`), `/dashboard` for anything
 * under it, and `unmatched` for every other path (scanners must not create series).
 *
 * @example
 * routeLabel('/v1/responses/resp_abc/cancel'); // '/v1/responses/:id/cancel'
 */
export function routeLabel(path: string): string {
  if (path === '/dashboard' || path.startsWith('/dashboard/')) return '/dashboard';
  const template = path
    .replace(/\/+$/, '')
    .replace(/\/whd_[^/]+/, '/:id')
    .replace(ID_AFTER, (_, route: string) => `${route}/${route.endsWith('models') ? ':model' : ':id'}`);
  return KNOWN_ROUTES.has(template) ? template : 'unmatched';
}
