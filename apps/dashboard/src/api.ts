/** The dashboard API (/dashboard/api): types of what it returns and one fetch wrapper. */

export interface LastDelivery {
  at: string;
  outcome: 'success' | 'failure' | string;
  status_code: number | null;
  error: string | null;
}

export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  webhook_url: string | null;
  signing_secret_last4: string | null;
  rate_limit_rpm: number | null;
  last_delivery: LastDelivery | null;
}

export interface Me {
  user: { id: string; email: string };
  csrf_token: string;
  default_rate_limit_rpm: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

export interface Delivery {
  id: string;
  event: string;
  request_id: string;
  test: boolean;
  url: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  created_at: string;
  delivered_at: string | null;
}

export interface Attempt {
  attempt: number;
  attempted_at: string;
  outcome: 'success' | 'failure';
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  response_body: string | null;
}

export interface DeliveryDetail extends Delivery {
  /** The exact bytes that were signed and sent. */
  payload: string;
  attempt_log: Attempt[];
}

export interface TestResult {
  success: boolean;
  delivered_to: string;
  status_code?: number | null;
  error?: string | null;
}

export type { UsagePoint, UsageReport as Usage } from '@svc/protocol';

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
let onSignedOut: () => void = () => {};

export function setCsrfToken(token: string): void {
  csrfToken = token;
}

/** Called when any request finds the session gone (401), so the app can show the sign-in page. */
export function setSignedOutHandler(handler: () => void): void {
  onSignedOut = handler;
}

/**
 * Calls the dashboard API; writes carry the session's CSRF token. Resolves with the parsed JSON, rejects
 * with ApiError.
 *
 * @example
 * const { data } = await api<{ data: ApiKey[] }>('GET', '/keys');
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
    const error = (parsed as { error?: { message?: string; code?: string; param?: string | null } } | undefined)?.error;
    const failure = new ApiError(error?.message ?? `The server answered ${res.status}.`, res.status, error?.code ?? 'http_error', error?.param ?? null);
    if (res.status === 401 && path !== '/login') onSignedOut();
    throw failure;
  }
  return parsed as T;
}
