import type { Dispatcher } from 'undici';
import type { ErrorBody } from '@svc/protocol';
import { ApiError, CliError, describeNetworkError } from './errors.js';
import { loadUndici } from './load-undici.js';
import { USER_AGENT } from './version.js';
import { printable } from './output.js';
import type { ResponseShape } from './response-shapes.js';

export interface ApiClient {
  /** `http://host:port` without a trailing `/v1`. */
  readonly baseUrl: string;
  /**
   * Sends a request and returns the parsed JSON body, checked against `shape`, and its raw text; non-2xx becomes an
   * `ApiError`, an answer of another shape a `CliError` naming what was expected.
   */
  json<T>(method: 'GET' | 'POST', path: string, shape: ResponseShape<T>, body?: unknown, options?: { signal?: AbortSignal }): Promise<{ data: T; raw: string; status: number }>;
  /** Sends a JSON POST and returns the open response (2xx only) for streaming. */
  stream(path: string, body: unknown): Promise<Dispatcher.ResponseData>;
}

/**
 * A thin undici client for the svc API: bearer auth, JSON in and out, one-line errors.
 *
 * @example
 * const api = createApiClient({ baseUrl: 'http://127.0.0.1:8080', apiKey });
 * const { data } = await api.json('GET', '/v1/webhooks/deliveries?limit=10', deliveryList);
 */
export function createApiClient(options: { baseUrl: string; apiKey: string; timeoutMs?: number; maxResponseBytes?: number; maxErrorBytes?: number }): ApiClient {
  // Accept the OpenAI-style base URL too (`…/v1`): every path below starts with /v1.
  const baseUrl = options.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
  const timeoutMs = options.timeoutMs ?? 120_000;
  const maxResponseBytes = options.maxResponseBytes ?? MAX_RESPONSE_BYTES;
  const maxErrorBytes = options.maxErrorBytes ?? MAX_ERROR_BYTES;

  async function send(method: 'GET' | 'POST', path: string, body: unknown, signal?: AbortSignal, deadline?: AbortSignal): Promise<Dispatcher.ResponseData> {
    const { request } = await loadUndici();
    const headers: Record<string, string> = {
      authorization: `Bearer ${options.apiKey}`,
      'user-agent': USER_AGENT,
      accept: 'application/json',
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await request(`${baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? (method === 'POST' ? '' : undefined) : JSON.stringify(body),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal,
      });
    } catch (err) {
      if (deadline?.aborted) throw overDeadline();
      throw new CliError(`cannot reach the server at ${baseUrl}: ${describeNetworkError(err)}`, { cause: err });
    }
  }

  const overDeadline = () => new CliError(`the server at ${baseUrl} did not finish its answer within ${timeoutMs / 1000} s`);

  /**
   * The body as text, read up to `limit` bytes: a body without end (a server that is not svc, or a broken proxy)
   * would otherwise be held until the process runs out of memory.
   */
  async function readText(response: Dispatcher.ResponseData, limit = maxResponseBytes, deadline?: AbortSignal): Promise<string> {
    const chunks: Buffer[] = [];
    let bytes = 0;
    try {
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > limit) {
          response.body.destroy();
          throw new CliError(`the server at ${baseUrl} sent a response over ${mebibytes(limit)}, more than svc sends (is --base-url an svc server?)`);
        }
        chunks.push(chunk);
      }
    } catch (err) {
      if (err instanceof CliError) throw err;
      if (deadline?.aborted) throw overDeadline();
      throw new CliError(`the server at ${baseUrl} closed the response early: ${describeNetworkError(err)}`, { cause: err });
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  async function failure(response: Dispatcher.ResponseData, deadline?: AbortSignal): Promise<never> {
    throw errorFromResponse(response.statusCode, await readText(response, maxErrorBytes, deadline), baseUrl);
  }

  return {
    baseUrl,
    async json<T>(method: 'GET' | 'POST', path: string, shape: ResponseShape<T>, body?: unknown, options: { signal?: AbortSignal } = {}) {
      // The whole exchange, not only the wait between two chunks: a server trickling a byte now and then is given up on too.
      const deadline = AbortSignal.timeout(timeoutMs);
      const response = await send(method, path, body, options.signal ? AbortSignal.any([options.signal, deadline]) : deadline, deadline);
      if (response.statusCode < 200 || response.statusCode >= 300) return failure(response, deadline);
      const raw = await readText(response, maxResponseBytes, deadline);
      let data: unknown;
      try {
        data = JSON.parse(raw);
      } catch {
        throw new CliError(`unexpected response from ${baseUrl}${path}: ${htmlPage(raw) ?? 'not JSON'} (is --base-url an svc server?)`);
      }
      if (!shape.check(data)) throw new CliError(`unexpected response from ${baseUrl}${path}: JSON, but not ${shape.what} (is --base-url an svc server?)`);
      return { data, raw, status: response.statusCode };
    },
    async stream(path: string, body: unknown) {
      const response = await send('POST', path, body);
      if (response.statusCode < 200 || response.statusCode >= 300) return failure(response);
      // svc answers a stream as server-sent events; anything else (a sign-in page, another API's JSON) has no
      // chunks to read, and reading it anyway ended in "the stream ended before the grounding result arrived".
      if (!String(response.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        const text = await readText(response, maxErrorBytes);
        throw new CliError(`unexpected response from ${baseUrl}${path}: ${htmlPage(text) ?? 'not an event stream'} (is --base-url an svc server?)`);
      }
      return response;
    },
  };
}

/**
 * The largest answer read: a delivery's detail holds its exact payload (up to the 64 MiB svc delivers), escaped
 * as a JSON string.
 */
const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;
/** svc's error bodies are a few hundred bytes: its messages quote a request's values cut. */
const MAX_ERROR_BYTES = 1024 * 1024;
/** Characters of a server's error message printed, at most. */
const MAX_MESSAGE_CHARS = 1000;

const mebibytes = (bytes: number) => (bytes >= 1024 * 1024 ? `${bytes / 1024 / 1024} MiB` : `${bytes} bytes`);

/** Turns an error response into one line: the server's message (its start, when long), then status and code. */
export function errorFromResponse(status: number, text: string, baseUrl: string): ApiError {
  let parsed: Partial<ErrorBody> | undefined;
  try {
    parsed = JSON.parse(text) as Partial<ErrorBody>;
  } catch {
    parsed = undefined;
  }
  const error = parsed?.error;
  if (error && typeof error.message === 'string') {
    const code = typeof error.code === 'string' ? error.code.slice(0, MAX_MESSAGE_CHARS) : undefined;
    const message = error.message.length > MAX_MESSAGE_CHARS ? `${error.message.slice(0, MAX_MESSAGE_CHARS)}…` : error.message;
    return new ApiError(`${message} (${status}${code ? ` ${code}` : ''})${routeHint(status, code, error.message, baseUrl)}`, status, code, {
      error: { ...error, message },
    });
  }
  const page = htmlPage(text);
  if (page !== undefined) {
    // svc answers every error in JSON: an HTML page is from something in front of it or in its place.
    return new ApiError(`unexpected response from ${baseUrl}: HTTP ${status}, ${page}, not svc's JSON error: a proxy's error page? (is svc running behind it, is --base-url right?)`, status, undefined);
  }
  return new ApiError(`unexpected response from ${baseUrl}: HTTP ${status} (is --base-url an svc server?)`, status, undefined);
}

/**
 * svc itself answered that it has no such route, naming the path with the base URL's in front (`--base-url
 * http://host:8080/api`): svc serves /v1 at its root. Behind a proxy that strips a prefix svc never sees one, and a
 * missing delivery's 404 names no path.
 */
function routeHint(status: number, code: string | undefined, message: string, baseUrl: string): string {
  const url = new URL(baseUrl);
  const path = url.pathname.replace(/\/+$/, '');
  if (status !== 404 || code !== 'not_found' || path === '' || !message.includes(`${path}/v1/`)) return '';
  return `: --base-url ends in ${path}, and svc serves its API at its root (try --base-url ${url.origin})`;
}

/** `an HTML page ("502 Bad Gateway")`, by its title or first heading, when `text` is HTML; else undefined. */
function htmlPage(text: string): string | undefined {
  if (!/^\s*</.test(text)) return undefined;
  const heading = /<title[^>]*>([^<]*)<\/title>/i.exec(text)?.[1] ?? /<h1[^>]*>([^<]*)<\/h1>/i.exec(text)?.[1];
  const name = heading?.replace(/\s+/g, ' ').trim().slice(0, 100);
  return name ? `an HTML page ("${printable(name)}")` : 'an HTML page';
}
