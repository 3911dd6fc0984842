import { bodyErrors } from './body-errors.js';
import { ApiError } from './errors.js';
import { storageFault } from '../storage/storage-fault.js';

/** The wait a 503 `database_unavailable` asks for: /readyz probes every few seconds, an operator acts in minutes. */
export const DATABASE_RETRY_AFTER_S = 5;

/** What `express.json()` (body-parser, raw-body) puts on the errors it throws. */
interface BodyParserError extends Error {
  type?: string;
  /** The parser's limit in bytes, on `entity.too.large`. */
  limit?: number;
  /** The Content-Type's charset, on `charset.unsupported`. */
  charset?: unknown;
  /** The Content-Encoding, on `encoding.unsupported`. */
  encoding?: string;
  /** node:zlib's code when the body did not inflate (`Z_DATA_ERROR`, `ERR__ERROR_FORMAT_PADDING_1`). */
  code?: unknown;
}

/**
 * Turns anything thrown into design §4's error: an `ApiError` as it is, a body parser's or Express's error for a
 * client's mistake as the matching 4xx, a fault of the database's surroundings (`storageFault`: a full disk, a
 * lock, Postgres restarting) as a 503 `database_unavailable` with `retry-after`, anything else as a 500
 * `internal_error`; neither message says anything internal (the original is kept as `cause`, for the log).
 *
 * @example
 * res.status(toApiError(err).status);
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const parserError = err as BodyParserError | null;
  switch (parserError?.type) {
    case 'entity.parse.failed':
      return bodyErrors.invalidJson();
    case 'entity.too.large':
      return bodyErrors.tooLarge(parserError.limit);
    case 'encoding.unsupported':
      return bodyErrors.unsupportedEncoding(parserError.encoding ?? 'unknown');
    case 'charset.unsupported':
      return bodyErrors.notUtf8(typeof parserError.charset === 'string' ? parserError.charset.toLowerCase() : undefined);
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return bodyErrors.incomplete();
    default: {
      // body-parser passes node:zlib's error on as it is (no `type`), with a 400 that must not read as a bad URL.
      if (typeof parserError?.code === 'string' && /^(Z_|ERR__ERROR_)/.test(parserError.code)) return bodyErrors.notInflated();
      const status = clientErrorStatus(err);
      if (status === 404) return new ApiError('not_found', 'Not found. Please check the URL.');
      if (err instanceof URIError || status !== undefined) {
        // Express's router and `send` fail this way on a path, parameter or cookie with malformed percent-encoding.
        return new ApiError('invalid_request', "The request URL is malformed: every '%' must start a valid percent-encoded UTF-8 sequence.");
      }
      if (storageFault(err) !== undefined) {
        return new ApiError('database_unavailable', "The server's database is unavailable right now. Please retry shortly.", {
          headers: { 'retry-after': String(DATABASE_RETRY_AFTER_S) },
          cause: err,
        });
      }
      return new ApiError('internal_error', 'The server had an error while processing your request. Please retry.', { cause: err });
    }
  }
}

/**
 * The 4xx status of an error that Express, its router or `send` / `serve-static` made for a client's mistake
 * (http-errors style `status`/`statusCode`), else undefined: those are answered as such, not as a 500.
 */
function clientErrorStatus(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { status, statusCode } = err as { status?: unknown; statusCode?: unknown };
  const code = typeof status === 'number' ? status : statusCode;
  return typeof code === 'number' && code >= 400 && code < 500 ? code : undefined;
}
