import type { DashboardDeliveryDetail } from '@svc/protocol';

type Attempt = Pick<DashboardDeliveryDetail['attempt_log'][number], 'status_code' | 'error' | 'response_body'>;

/**
 * What an attempt's "Error / response" cell says beside its Code: the error when it adds something to the
 * code (a timeout, a refused connection, "redirects are not followed"), else the start of the receiver's
 * answer. A bare "HTTP 500" beside the code 500 said nothing.
 *
 * @example
 * attemptNote({ status_code: 500, error: 'HTTP 500', response_body: 'boom' }) // { kind: 'response', text: 'boom' }
 */
export function attemptNote(a: Attempt): { kind: 'error' | 'response'; text: string } | null {
  const prefix = a.status_code === null ? null : `HTTP ${a.status_code}`;
  let error = a.error;
  if (error !== null && prefix !== null && error.startsWith(prefix)) {
    // "HTTP 302 (redirects are not followed)": the part the code does not say.
    const rest = error.slice(prefix.length).trim().replace(/^\((.*)\)$/, '$1');
    error = rest === '' ? null : rest.charAt(0).toUpperCase() + rest.slice(1);
  }
  if (error !== null) return { kind: 'error', text: error };
  if (a.response_body) return { kind: 'response', text: a.response_body };
  return null;
}
