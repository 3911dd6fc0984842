import { ERROR_CODES, type ErrorBody, type ErrorCode } from '@svc/protocol';

// The protocol's, which the delivery list's query parser (shared with the dashboard) quotes with too.
export { quoted } from '@svc/protocol';

/**
 * The one error class the HTTP layer knows: a stable `code` from design §4 that fixes status and type.
 *
 * @example
 * throw new ApiError('model_not_found', "The model 'gpt-5' does not exist; use 'svc01'.", { param: 'model' });
 */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly param: string | null;
  /** false only for the test-webhook no-URL error, whose body has no `param` (spec §4.2). */
  readonly includeParam: boolean;
  readonly headers: Record<string, string>;
  /** The body's `code` when it is not `code` itself: an upstream's own code passed on (design §4). */
  readonly wireCode: string | null;

  constructor(
    code: ErrorCode,
    message: string,
    options: { param?: string | null; includeParam?: boolean; headers?: Record<string, string>; wireCode?: string | null; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'ApiError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.param = options.param ?? null;
    this.includeParam = options.includeParam ?? true;
    this.headers = options.headers ?? {};
    this.wireCode = options.wireCode ?? null;
  }

  toBody(): ErrorBody {
    const { type } = ERROR_CODES[this.code];
    const error: ErrorBody['error'] = { message: this.message, type, code: this.wireCode ?? this.code };
    if (this.includeParam) error.param = this.param;
    return { error };
  }
}
