import type { IncomingMessage, ServerResponse } from 'node:http';

/** SVC_CORS_ORIGINS: `*` (any origin), or the origins allowed; empty: no CORS headers at all. */
export type CorsOrigins = '*' | readonly string[];

/**
 * The origins of SVC_CORS_ORIGINS: `*`, `none` (or empty), or origins separated by commas
 * (`https://app.example.com,http://localhost:5173`). Throws an Error whose message says what is accepted.
 */
export function parseCorsOrigins(text: string): CorsOrigins {
  const value = text.trim();
  if (value === '*') return '*';
  if (value === '' || value === 'none') return [];
  return value.split(',').map((item) => {
    const origin = item.trim();
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || origin.includes('*') || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== origin.replace(/\/$/, '').toLowerCase()) {
      throw new Error(`"${origin}" is not an origin: use scheme://host[:port] (e.g. https://app.example.com), * for any, or none`);
    }
    return url.origin;
  });
}

/** Response headers a browser script may read: the request id, the rate limit and when to retry. */
const EXPOSED = [
  'x-request-id',
  'retry-after',
  'retry-after-ms',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
].join(', ');
const METHODS = 'GET, POST, DELETE, OPTIONS';
/** A header list as browsers send it in Access-Control-Request-Headers: tokens and commas. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;
const MAX_HEADER_LIST = 4096;

/**
 * CORS for the API (`/v1`), as api.openai.com answers it, so that browser apps (the openai SDK with
 * `dangerouslyAllowBrowser`, the AI SDK in a page) can call svc: a preflight is answered 204 without a key
 * (browsers never send one with it), with the request's headers allowed as asked (the SDKs add their own
 * `x-stainless-*`); other responses name the allowed origin. No credentials are allowed: the API is keyed by
 * `Authorization`, never by cookies. The dashboard, which is, is same-origin only and gets none of this.
 * Returns true when it answered the request (a preflight).
 *
 * @example
 * const cors = corsFor(config.corsOrigins);
 * if (cors(req, res)) return; // preflight answered
 */
export function corsFor(origins: CorsOrigins): (req: IncomingMessage, res: ServerResponse) => boolean {
  if (origins !== '*' && origins.length === 0) return () => false;
  const allowed = origins === '*' ? null : new Set(origins);
  return (req, res) => {
    const origin = req.headers.origin;
    const url = req.url ?? '';
    if (origin === undefined || !(url.startsWith('/v1/') || url === '/v1' || url.startsWith('/v1?'))) return false;
    if (allowed) {
      res.setHeader('vary', 'Origin');
      if (!allowed.has(origin)) return false;
    }
    res.setHeader('access-control-allow-origin', allowed ? origin : '*');
    const method = req.headers['access-control-request-method'];
    if (req.method !== 'OPTIONS' || method === undefined) {
      res.setHeader('access-control-expose-headers', EXPOSED);
      return false;
    }
    const asked = req.headers['access-control-request-headers'];
    const headers: Record<string, string> = { 'access-control-allow-methods': METHODS, 'access-control-max-age': '7200', 'content-length': '0' };
    if (asked && asked.length <= MAX_HEADER_LIST && HEADER_LIST.test(asked.trim())) headers['access-control-allow-headers'] = asked.trim();
    res.writeHead(204, headers).end();
    return true;
  };
}
