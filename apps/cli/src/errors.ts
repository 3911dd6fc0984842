/**
 * An error the user can act on. `bin.ts` prints its message as one line on stderr and exits with
 * `exitCode`; anything else that escapes is reported the same way, never with a stack trace.
 *
 * @example
 * throw new CliError('no API key: pass --api-key or set SVC_API_KEY');
 */
export class CliError extends Error {
  override name = 'CliError';
  readonly exitCode: number;

  constructor(message: string, options: { exitCode?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.exitCode = options.exitCode ?? 1;
  }
}

/** The server answered with an error body (`{ error: { message, type, code, param } }`) or a non-2xx status. */
export class ApiError extends CliError {
  override name = 'ApiError';
  readonly status: number;
  readonly code: string | undefined;
  /** The server's error object as it answered it (its message cut as in the line printed), when it answered in svc's error shape. */
  readonly body: { error: Record<string, unknown> } | undefined;

  constructor(message: string, status: number, code: string | undefined, body?: { error: Record<string, unknown> }) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/**
 * What `--json` prints on stdout for a command that failed before printing its result: the server's error object as
 * it answered it, or one in the same shape (`{"error":{"message","type","code","param"}}`) saying what went wrong
 * here (`type` `cli_error`: the server unreachable, no API key, an answer not from svc …), with the HTTP `status` when
 * there was one.
 *
 * @example
 * if (json) process.stdout.write(`${errorJson(err)}\n`);
 */
export function errorJson(err: unknown): string {
  if (err instanceof ApiError && err.body) return JSON.stringify(err.body);
  const message = (err instanceof CliError ? err.message : `unexpected error: ${err instanceof Error ? err.message : String(err)}`).split('\n')[0];
  const code = err instanceof ApiError ? (err.code ?? null) : null;
  const status = err instanceof ApiError ? { status: err.status } : {};
  return JSON.stringify({ error: { message, type: 'cli_error', code, param: null, ...status } });
}

/** One-line description of a network failure from undici (connection refused, DNS, timeout …). */
export function describeNetworkError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // Something answered, but not in HTTP (NATS, Postgres, Redis on the port): undici's message is its parser's.
  if (err.name === 'HTTPParserError') return 'the answer is not HTTP: is another service listening on that port?';
  const cause = err.cause instanceof Error ? err.cause : undefined;
  const code = (err as { code?: unknown }).code ?? (cause as { code?: unknown } | undefined)?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
      return 'connection reset';
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connect timeout';
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
      // OpenSSL's own words ("…:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:…") say it obscurely.
      return 'no TLS on that port (https:// to a plain HTTP server?): use http://';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return 'timed out';
    default: {
      const message = cause?.message ?? err.message;
      return message.split('\n')[0] ?? message;
    }
  }
}
