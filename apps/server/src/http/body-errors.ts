import { ApiError } from './errors.js';

const KIB = 1024;
const MIB = 1024 * KIB;

/**
 * The answers to a request body that cannot be taken, one wording whoever read the body: svc's own reader
 * (`readJsonBody`) or Express's `express.json()` (mapped by `toApiError`).
 *
 * @example
 * throw bodyErrors.tooLarge(10 * 1024 * 1024); // 413: "… larger than the 10 MiB limit."
 */
export const bodyErrors = {
  /** 413 naming the limit of the reader that refused the body (the chat route's 10 MiB, the dashboard's 100 KiB). */
  tooLarge: (limitBytes: number | undefined) =>
    new ApiError(
      'request_too_large',
      limitBytes === undefined ? 'The request body is too large.' : `The request body is larger than the ${sizeText(limitBytes)} limit.`,
    ),
  incomplete: () => new ApiError('invalid_request', 'The request body could not be read completely.'),
  /** The bytes are not UTF-8, or (`charset`) the Content-Type says they are in another encoding. */
  notUtf8: (charset?: string) =>
    new ApiError(
      'invalid_request',
      charset === undefined
        ? 'The request body must be UTF-8 encoded JSON.'
        : `The request body must be UTF-8 encoded JSON; its Content-Type says charset=${charset.slice(0, 40)}.`,
    ),
  /** A Content-Encoding other than identity, gzip, x-gzip, deflate and br. */
  unsupportedEncoding: (encoding: string) => new ApiError('invalid_request', `Unsupported content encoding "${encoding}".`),
  /** The body is not what its Content-Encoding says (plain JSON sent as gzip, a truncated stream). */
  notInflated: () => new ApiError('invalid_request', 'The request body could not be inflated: it is not valid for its Content-Encoding.'),
  invalidJson: () =>
    new ApiError('invalid_json', "We could not parse the JSON body of your request. Send valid JSON with 'Content-Type: application/json'."),
};

/** `10 MiB`, `100 KiB`, `1500 bytes`: a limit as its setting was written. */
function sizeText(bytes: number): string {
  if (bytes >= MIB && bytes % MIB === 0) return `${bytes / MIB} MiB`;
  if (bytes >= KIB && bytes % KIB === 0) return `${bytes / KIB} KiB`;
  return `${bytes} bytes`;
}
