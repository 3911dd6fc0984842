import { useEffect, useState } from 'react';

/** The app's pages, parsed from the path under /dashboard/. */
export type Route =
  | { page: 'keys' }
  | { page: 'key'; keyId: string }
  | { page: 'deliveries'; keyId: string }
  | { page: 'usage' };

const BASE = import.meta.env.BASE_URL.replace(/\/$/, '');

export function parseRoute(pathname: string): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = rest.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'usage') return { page: 'usage' };
  if (parts[0] === 'settings' && parts[1] === 'api-keys' && parts[2]) {
    return parts[3] === 'deliveries' ? { page: 'deliveries', keyId: parts[2] } : { page: 'key', keyId: parts[2] };
  }
  return { page: 'keys' };
}

export function hrefOf(route: Route): string {
  switch (route.page) {
    case 'keys':
      return `${BASE}/settings/api-keys`;
    case 'key':
      return `${BASE}/settings/api-keys/${encodeURIComponent(route.keyId)}`;
    case 'deliveries':
      return `${BASE}/settings/api-keys/${encodeURIComponent(route.keyId)}/deliveries`;
    case 'usage':
      return `${BASE}/usage`;
  }
}

export function navigate(route: Route): void {
  const href = hrefOf(route);
  if (href !== window.location.pathname) window.history.pushState(null, '', href);
  window.dispatchEvent(new PopStateEvent('popstate'));
  window.scrollTo(0, 0);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.pathname));
  useEffect(() => {
    const update = () => setRoute(parseRoute(window.location.pathname));
    window.addEventListener('popstate', update);
    return () => window.removeEventListener('popstate', update);
  }, []);
  return route;
}
