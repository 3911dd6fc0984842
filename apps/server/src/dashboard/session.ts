import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { SessionsStore } from '../storage/sessions-store.js';
import type { UsersStore, UserRecord } from '../storage/users-store.js';
import { DashboardError } from './errors.js';

export const SESSION_COOKIE = 'svc_session';
export const SESSION_TTL_MS = 7 * 24 * 60 * 60 * 1000;
const COOKIE_PATH = '/dashboard';

export interface SignedIn {
  user: UserRecord;
  tokenHash: string;
  csrfToken: string;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The value of one cookie from the Cookie header (no dependency needed for a single name). */
export function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeCookie(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** A cookie value with malformed percent-encoding is no session of ours: as if it were absent (401, not 500). */
function decodeCookie(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

function setCookie(req: Request, res: Response, value: string, maxAgeSeconds: number): void {
  const attributes = [
    `${SESSION_COOKIE}=${value}`,
    `Path=${COOKIE_PATH}`,
    `Max-Age=${maxAgeSeconds}`,
    'HttpOnly',
    'SameSite=Lax',
  ];
  if (req.secure) attributes.push('Secure');
  res.append('Set-Cookie', attributes.join('; '));
}

/** Sessions in the database, keyed by the SHA-256 of a random cookie token; a CSRF token per session. */
export class Sessions {
  constructor(
    private readonly sessions: SessionsStore,
    private readonly users: UsersStore,
    private readonly clock: () => number,
  ) {}

  /**
   * Starts a session for `user`, whose password was checked against `checkedHash`, and sets its cookie; returns the
   * session's CSRF token, or undefined (no session, no cookie) when the stored hash is no longer that one: a
   * password reset ran during the check, and its end of the user's sessions may have come before this one began.
   */
  async start(req: Request, res: Response, user: UserRecord, checkedHash: string): Promise<string | undefined> {
    const token = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const now = this.clock();
    const tokenHash = sha256(token);
    await this.sessions.create({ tokenHash, userId: user.id, csrfToken, now, expiresAt: now + SESSION_TTL_MS });
    // Read after the session exists: a reset that stores its hash later also deletes this session.
    if ((await this.users.byId(user.id))?.password_hash !== checkedHash) {
      await this.sessions.delete(tokenHash);
      return undefined;
    }
    setCookie(req, res, token, SESSION_TTL_MS / 1000);
    // Expired rows of anyone are dropped on sign-in (cheap); Retention drops them hourly for when nobody signs in.
    await this.sessions.purgeExpired(now);
    return csrfToken;
  }

  async end(req: Request, res: Response, signedIn: SignedIn | undefined): Promise<void> {
    if (signedIn) await this.sessions.delete(signedIn.tokenHash);
    setCookie(req, res, '', 0);
  }

  /** Resolves the session cookie to a user, or undefined. */
  async resolve(req: Request): Promise<SignedIn | undefined> {
    const token = readCookie(req, SESSION_COOKIE);
    if (!token) return undefined;
    const tokenHash = sha256(token);
    const session = await this.sessions.byHash(tokenHash, this.clock());
    if (!session) return undefined;
    const user = await this.users.byId(session.user_id);
    return user ? { user, tokenHash, csrfToken: session.csrf_token } : undefined;
  }

  /**
   * Middleware: requires a session (401 otherwise) and, on writes, the session's CSRF token in `X-CSRF-Token`
   * (403 otherwise). Puts the SignedIn on `res.locals.signedIn`.
   */
  require() {
    return async (req: Request, res: Response, next: NextFunction) => {
      const signedIn = await this.resolve(req);
      if (!signedIn) throw new DashboardError('not_signed_in', 'Your session has ended or you are not signed in. Sign in again.');
      if (isWrite(req.method) && !csrfMatches(req.get('x-csrf-token'), signedIn.csrfToken)) {
        throw new DashboardError('csrf_token_invalid', 'The request is missing a valid X-CSRF-Token header. Reload the page and try again.');
      }
      res.locals.signedIn = signedIn;
      next();
    };
  }
}

function isWrite(method: string): boolean {
  return method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';
}

function csrfMatches(presented: string | undefined, expected: string): boolean {
  if (!presented) return false;
  // Hashing first gives equal lengths, so the constant-time compare leaks neither content nor length.
  return timingSafeEqual(createHash('sha256').update(presented).digest(), createHash('sha256').update(expected).digest());
}

export function signedInOf(res: Response): SignedIn {
  const signedIn = res.locals.signedIn as SignedIn | undefined;
  if (!signedIn) throw new DashboardError('not_signed_in', 'Sign in to use the dashboard.');
  return signedIn;
}
