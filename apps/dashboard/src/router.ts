import { useEffect, useState, type MouseEvent } from 'react';
import type { DeliveryStatus } from '@svc/protocol';
import { isDeliveryStatus } from '@svc/protocol/delivery-list-query';

/** The app's pages, parsed from the path under /dashboard/. */
export type Route =
  | { page: 'keys' }
  | { page: 'key'; keyId: string }
  | ({ page: 'deliveries'; keyId: string; status?: DeliveryStatus; delivery?: string } & DeliveryFilter)
  | { page: 'usage'; keyId?: string }
  | { page: 'not-found' };

/**
 * The deliveries list's search beside its status, under the deliveries API's own parameter names (the URL of a
 * filtered view reads as the API call that makes it).
 */
export interface DeliveryFilter {
  request_id?: string;
  /** ISO 8601 times. */
  since?: string;
  until?: string;
  /** `503` or `5xx`. */
  last_status_code?: string;
}

export const DELIVERY_FILTER_PARAMS = ['request_id', 'since', 'until', 'last_status_code'] as const;

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
    if (parts.length === 4 && parts[3] === 'deliveries') {
      // The filter and the open delivery live in the URL, so a view can be linked, reloaded and shared.
      const params = new URLSearchParams(search);
      const status = params.get('status') ?? '';
      const delivery = params.get('delivery');
      const filter: DeliveryFilter = {};
      for (const name of DELIVERY_FILTER_PARAMS) {
        const value = params.get(name);
        if (value) filter[name] = value;
      }
      return {
        page: 'deliveries',
        keyId: parts[2]!,
        ...(isDeliveryStatus(status) ? { status } : {}),
        ...filter,
        ...(delivery ? { delivery } : {}),
      };
    }
  }
  return { page: 'not-found' };
}

export function hrefOf(route: Route): string {
  switch (route.page) {
    case 'keys':
      return `${BASE}/settings/api-keys`;
    case 'key':
      return `${BASE}/settings/api-keys/${encodeURIComponent(route.keyId)}`;
    case 'deliveries': {
      const params = new URLSearchParams();
      if (route.status) params.set('status', route.status);
      for (const name of DELIVERY_FILTER_PARAMS) if (route[name]) params.set(name, route[name]);
      if (route.delivery) params.set('delivery', route.delivery);
      return `${BASE}/settings/api-keys/${encodeURIComponent(route.keyId)}/deliveries${params.size > 0 ? `?${params}` : ''}`;
    }
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

/** Whether the page may go away other than by navigating (Sign out): asks as navigating would. */
export function mayLeave(): boolean {
  return !blocked();
}

/** Marks the popstate events `navigate` sends itself, which have passed the guards already. */
const IN_APP = { svcInApp: true };

/** `keepScroll`: the same page in another state (a filter, an open row), so the reader keeps their place. */
export function navigate(route: Route, options: { replace?: boolean; keepScroll?: boolean } = {}): void {
  if (blocked()) return;
  const href = hrefOf(route);
  if (options.replace) window.history.replaceState(null, '', href);
  else if (href !== window.location.pathname + window.location.search) window.history.pushState(null, '', href);
  window.dispatchEvent(new PopStateEvent('popstate', { state: IN_APP }));
  if (!options.keepScroll) window.scrollTo(0, 0);
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
