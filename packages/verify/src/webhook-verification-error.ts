/** Why a delivery was rejected. Stable: safe to branch on and to log. */
export type WebhookVerificationErrorCode =
  | 'missing_signature'
  | 'malformed_signature'
  | 'signature_mismatch'
  | 'invalid_payload'
  | 'timestamp_out_of_range'
  | 'payload_too_large';

const STATUS: Record<WebhookVerificationErrorCode, 400 | 401 | 413> = {
  missing_signature: 401,
  malformed_signature: 401,
  signature_mismatch: 401,
  invalid_payload: 400,
  timestamp_out_of_range: 400,
  payload_too_large: 413,
};

/**
 * A delivery that must not be trusted. `status` is the HTTP status a receiver should answer with:
 * 401 for signature problems, 400 for a signed but unusable payload, 413 for a body over an adapter's `limit`.
 *
 * @example
 * try {
 *   const event = constructEvent(rawBody, header, secret);
 * } catch (err) {
 *   if (err instanceof WebhookVerificationError) return res.status(err.status).json(errorBody(err));
 *   throw err;
 * }
 */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  readonly code: WebhookVerificationErrorCode;
  readonly status: 400 | 401 | 413;

  constructor(code: WebhookVerificationErrorCode, message: string) {
    super(message);
    this.code = code;
    this.status = STATUS[code];
  }
}

/** The error envelope svc itself uses (`{ error: { message, type, code, param } }`), for a receiver's reply. */
export interface WebhookErrorBody {
  error: { message: string; type: 'authentication_error' | 'invalid_request_error'; code: WebhookVerificationErrorCode; param: null };
}

/**
 * The JSON body to answer a rejected delivery with; svc shows it in the dashboard's delivery log.
 *
 * @example
 * res.status(err.status).json(errorBody(err));
 */
export function errorBody(err: WebhookVerificationError): WebhookErrorBody {
  return {
    error: {
      message: err.message,
      type: err.status === 401 ? 'authentication_error' : 'invalid_request_error',
      code: err.code,
      param: null,
    },
  };
}
