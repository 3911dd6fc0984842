import type { DashboardKey, ErrorBody } from '@svc/protocol';

// The dashboard API (/dashboard/api): one fetch wrapper. What it returns is typed in @svc/protocol (`Dashboard…`).

/** An error answer of the API: `{ error: { message, type, code, param } }`. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly param: string | null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

let csrfToken = '';
let onSignedOut: (failedWrite: boolean) => void = () => {};

export function setCsrfToken(token: string): void {
  csrfToken = token;
}

/**
 * Called when any request finds the session gone (401), so the app can show the sign-in page;
 * `failedWrite` says the request was a change (a Save, a Revoke…) that did not happen.
 */
export function setSignedOutHandler(handler: (failedWrite: boolean) => void): void {
  onSignedOut = handler;
}

/**
 * Calls the dashboard API; writes carry the session's CSRF token. Resolves with the parsed JSON, rejects
 * with ApiError.
 *
 * @example
 * const { data } = await api<DashboardKeyList>('GET', '/keys');
 */
export async function api<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(`${import.meta.env.BASE_URL}api${path}`, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError('The server could not be reached. Check that it is running and try again.', 0, 'network_error', null);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const error = (parsed as Partial<ErrorBody> | undefined)?.error;
    const failure = new ApiError(error?.message ?? `The server answered ${res.status}.`, res.status, error?.code ?? 'http_error', error?.param ?? null);
    if (res.status === 401 && path !== '/login') onSignedOut(method !== 'GET');
    throw failure;
  }
  return parsed as T;
}

/**
 * One of the signed-in user's keys (`GET /keys/{id}`), or null when there is none with this id — another
 * account's key included: the API answers 404 alike.
 */
export async function getKey(keyId: string): Promise<DashboardKey | null> {
  try {
    return await api<DashboardKey>('GET', `/keys/${encodeURIComponent(keyId)}`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  }
}
