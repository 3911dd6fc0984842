import { z } from 'zod';

export const ERROR_TYPES = [
  'invalid_request_error',
  'authentication_error',
  'rate_limit_error',
  'upstream_error',
  'server_error',
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];

/** Every machine code of design §4, with the status and type it is sent with. */
export const ERROR_CODES = {
  invalid_json: { status: 400, type: 'invalid_request_error' },
  missing_required_parameter: { status: 400, type: 'invalid_request_error' },
  invalid_type: { status: 400, type: 'invalid_request_error' },
  invalid_value: { status: 400, type: 'invalid_request_error' },
  invalid_request: { status: 400, type: 'invalid_request_error' },
  upstream_invalid_request: { status: 400, type: 'invalid_request_error' },
  missing_api_key: { status: 401, type: 'authentication_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  request_too_large: { status: 413, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  upstream_rate_limited: { status: 429, type: 'rate_limit_error' },
  too_many_requests_in_flight: { status: 429, type: 'rate_limit_error' },
  upstream_error: { status: 502, type: 'upstream_error' },
  upstream_timeout: { status: 502, type: 'upstream_error' },
  upstream_unavailable: { status: 502, type: 'upstream_error' },
  upstream_invalid_response: { status: 502, type: 'upstream_error' },
  internal_error: { status: 500, type: 'server_error' },
  database_unavailable: { status: 503, type: 'server_error' },
} as const satisfies Record<string, { status: number; type: ErrorType }>;
export type ErrorCode = keyof typeof ERROR_CODES;

/** `{ "error": { message, type, code, param } }` (spec §2.6); `param` absent only on the test-webhook no-URL error. */
export const ErrorBodySchema = z.object({
  error: z.object({
    message: z.string(),
    type: z.enum(ERROR_TYPES),
    code: z.string(),
    param: z.string().nullable().optional(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;
