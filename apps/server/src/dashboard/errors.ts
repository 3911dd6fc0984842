import type { ErrorBody, ErrorType } from '@svc/protocol';
import { ApiError } from '../http/errors.js';

const DASHBOARD_CODES = {
  not_signed_in: { status: 401, type: 'authentication_error' },
  invalid_credentials: { status: 401, type: 'authentication_error' },
  csrf_token_invalid: { status: 403, type: 'invalid_request_error' },
} as const satisfies Record<string, { status: number; type: ErrorType }>;

export type DashboardErrorCode = keyof typeof DASHBOARD_CODES;

/**
 * Session and CSRF failures of the dashboard API. They have no place among the API's codes (design §4 is about
 * bearer keys), so this subclass carries its own status and code but goes through the same error handler and
 * body shape.
 *
 * @example
 * throw new DashboardError('not_signed_in', 'Sign in to use the dashboard.');
 */
export class DashboardError extends ApiError {
  override readonly status: number;
  readonly dashboardCode: DashboardErrorCode;

  constructor(code: DashboardErrorCode, message: string) {
    super('invalid_request', message);
    this.name = 'DashboardError';
    this.dashboardCode = code;
    this.status = DASHBOARD_CODES[code].status;
  }

  override toBody(): ErrorBody {
    return { error: { message: this.message, type: DASHBOARD_CODES[this.dashboardCode].type, code: this.dashboardCode, param: null } };
  }
}
