import { useEffect, useState, type MouseEvent } from 'react';

/** The app's pages, parsed from the path under /dashboard/. */
export type Route =
  | { page: 'keys' }
  | { page: 'key'; keyId: string }
  | { page: 'deliveries'; keyId: string }
  | { page: 'usage'; keyId?: string }
  | { page: 'not-found' };

const BASE = import.meta.env.BASE_URL.replace(/\/$/, '');

export function parseRoute(pathname: string, search = ''): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = rest.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { page: 'keys' };
  if (parts[0] === 'usage' && parts.length === 1) {
    const keyId = new URLSearchParams(search).get('key');
    return keyId ? { page: 'usage', keyId } : { page: 'usage' };
  }
  if (parts[0] === 'settings' && parts[1] === 'api-keys') {
    if (parts.length === 2) return { page: 'keys' };
    if (parts.length === 3) return { page: 'key', keyId: parts[2]! };
    if (parts.length === 4 && parts[3] === 'deliveries') return { page: 'deliveries', keyId: parts[2]! };
  }
  return { page: 'not-found' };
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
      return route.keyId ? `${BASE}/usage?key=${encodeURIComponent(route.keyId)}` : `${BASE}/usage`;
    case 'not-found':
      return window.location.pathname;
  }
}

type Guard = () => boolean;
const guards = new Set<Guard>();

/**
 * While `guard` is registered, leaving the page within the app asks first (`guard` returns true to
 * stay); the caller also handles `beforeunload` for leaving the app.
 */
export function addNavigationGuard(guard: Guard): () => void {
  guards.add(guard);
  return () => guards.delete(guard);
}

/** True when a registered guard wants to stay on the page (it has asked the user). */
function blocked(): boolean {
  for (const guard of guards) if (guard()) return true;
  return false;
}

/** Marks the popstate events `navigate` sends itself, which have passed the guards already. */
const IN_APP = { svcInApp: true };

export function navigate(route: Route, options: { replace?: boolean } = {}): void {
  if (blocked()) return;
  const href = hrefOf(route);
  if (options.replace) window.history.replaceState(null, '', href);
  else if (href !== window.location.pathname + window.location.search) window.history.pushState(null, '', href);
  window.dispatchEvent(new PopStateEvent('popstate', { state: IN_APP }));
  window.scrollTo(0, 0);
}

/**
 * A click handler for in-app links: plain clicks navigate in place, modified clicks open as usual.
 *
 * @example
 * <a href={hrefOf(route)} onClick={link(route)}>API Keys</a>
 */
export function link(route: Route) {
  return (event: MouseEvent) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(route);
  };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.pathname, window.location.search));
  useEffect(() => {
    let here = window.location.pathname + window.location.search;
    const update = (event: PopStateEvent) => {
      // Back and Forward within the app: with unsaved edits the user may choose to stay, which puts the
      // page's own URL back.
      if (event.state !== IN_APP && blocked()) {
        window.history.pushState(null, '', here);
        return;
      }
      here = window.location.pathname + window.location.search;
      setRoute(parseRoute(window.location.pathname, window.location.search));
    };
    window.addEventListener('popstate', update);
    return () => window.removeEventListener('popstate', update);
  }, []);
  return route;
}

/** Sets the tab title: `API Keys — svc`. */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} — svc`;
  }, [title]);
}
