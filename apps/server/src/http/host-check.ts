import { isIP } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import type { ErrorBody } from '@svc/protocol';
import { ApiError } from './errors.js';

/** A request whose Host header names none of the server's own names (DNS rebinding): 421. */
export class MisdirectedRequestError extends ApiError {
  override readonly status = 421;

  constructor(host: string) {
    super(
      'invalid_request',
      `This server does not answer to the host name '${host}'. If that is its name, add it to SVC_ALLOWED_HOSTS.`,
    );
    this.name = 'MisdirectedRequestError';
  }

  override toBody(): ErrorBody {
    return { error: { message: this.message, type: 'invalid_request_error', code: 'misdirected_request', param: null } };
  }
}

/** The host name of a Host header value, lower case, without port or IPv6 brackets. */
export function hostName(header: string): string {
  const value = header.trim().toLowerCase();
  if (value.startsWith('[')) return value.slice(1, value.indexOf(']') > 0 ? value.indexOf(']') : undefined);
  const colon = value.lastIndexOf(':');
  return colon >= 0 ? value.slice(0, colon) : value;
}

/**
 * Middleware for the browser-facing routes (dashboard, /metrics): refuses a request whose Host header is a
 * name the server does not go by — what a DNS-rebinding page sends after pointing its own name at 127.0.0.1.
 * Allowed: any IP address (a rebinding attack needs a name), `localhost`, the bind host, and `allowed`
 * (SVC_ALLOWED_HOSTS; `.example.com` also allows every subdomain). Options are checked once, here.
 *
 * @example
 * app.use(['/dashboard', '/metrics'], hostCheck({ bindHost: config.host, allowed: config.allowedHosts }));
 */
export function hostCheck(options: { bindHost: string; allowed: readonly string[] }) {
  const exact = new Set(['localhost', hostName(options.bindHost), ...options.allowed.filter((h) => !h.startsWith('.'))]);
  const suffixes = options.allowed.filter((h) => h.startsWith('.'));
  const allows = (name: string) => isIP(name) !== 0 || exact.has(name) || suffixes.some((s) => name.endsWith(s) || name === s.slice(1));
  return (req: Request, _res: Response, next: NextFunction) => {
    // Node keeps the first of several Host headers; a proxy in front may go by the last. RFC 9112 §3.2: a 400.
    if (hostHeaderCount(req.rawHeaders) > 1) throw new ApiError('invalid_request', 'The request has more than one Host header.');
    // RFC 9112 §3.2.2: a request target in absolute form names the host; its Host header is ignored.
    const header = absoluteFormAuthority(req.originalUrl) ?? req.headers.host;
    if (header === undefined) return next(); // HTTP/1.0 without Host: no name to rebind.
    const name = hostName(header);
    if (!allows(name)) throw new MisdirectedRequestError(name);
    next();
  };
}

function hostHeaderCount(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]?.toLowerCase() === 'host') count++;
  return count;
}

/** The authority of a request target in absolute form (`GET http://name/path`), or undefined. */
function absoluteFormAuthority(target: string): string | undefined {
  const match = /^https?:\/\/([^/?#]*)/i.exec(target);
  if (!match) return undefined;
  const authority = match[1] ?? '';
  return authority.slice(authority.lastIndexOf('@') + 1);
}
