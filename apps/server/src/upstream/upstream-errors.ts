import type { IncomingHttpHeaders } from 'node:http';
import { UpstreamError } from './upstream.js';
import { isRecord } from '../is-record.js';

/** Longest upstream message passed on; longer ones are cut with `…`. */
const MESSAGE_LIMIT = 2000;

/** What an upstream error body says (see `readErrorBody` for the shapes read). */
export interface UpstreamErrorBody {
  message: string | null;
  code: string | null;
  param: string | null;
  /**
   * The upstream refused svc's own key in a 400: Gemini answers a wrong or expired key with 400 `INVALID_ARGUMENT`,
   * its `details` naming the reason (`API_KEY_INVALID`), where OpenAI answers 401.
   */
  keyRefused?: true;
}

/**
 * Maps a non-2xx upstream answer onto what the client gets (design §4), so that client libraries keep the
 * upstream's meaning:
 *
 * | upstream | client |
 * |---|---|
 * | 400, 413, 422, and a 404 naming a param: about the request | 400 `invalid_request_error` with the upstream's message, code (else `context_length_exceeded` for a prompt too long, else `upstream_invalid_request`) and param |
 * | the same naming `model` (or code `model_not_found`), a 404 naming no param | 502 `upstream_error`: svc's upstream configuration, not the request |
 * | 429 | 429 `rate_limit_error` `upstream_rate_limited`, its `retry-after` / `retry-after-ms` passed on |
 * | 401, 403 (svc's own upstream key; also Gemini's 400 naming an `API_KEY_…` reason), 5xx, any other status | 502 `upstream_error` (`retry-after` passed on; a 4xx but 408, 409, 429 with `x-should-retry: false`) |
 *
 * `redact` removes svc's upstream key from anything echoed back.
 *
 * @example
 * throw upstreamHttpError(400, { 'content-type': 'application/json' }, '{"error":{"message":"bad","code":"x","param":"top_p"}}', (t) => t);
 */
export function upstreamHttpError(status: number, headers: IncomingHttpHeaders, text: string, redact: (text: string) => string): UpstreamError {
  const body = readErrorBody(text);
  const message = body.message === null ? null : shorten(withoutKeys(body.message, redact));
  const retryAfter = header(headers, 'retry-after');
  if (status === 429) {
    const passed: Record<string, string> = {};
    if (retryAfter) passed['retry-after'] = retryAfter;
    const retryAfterMs = header(headers, 'retry-after-ms');
    if (retryAfterMs) passed['retry-after-ms'] = retryAfterMs;
    return new UpstreamError('upstream_rate_limited', `Upstream rate limit reached${message ? `: ${message}` : '.'}`, {
      upstreamStatus: status,
      upstreamCode: body.code,
      headers: passed,
    });
  }
  if (isAboutTheRequest(status, body)) {
    const tooLong = body.code === null && message !== null && CONTEXT_TOO_LONG.test(message) && !TOKEN_LIMIT_TOO_LARGE.test(message);
    return new UpstreamError('upstream_invalid_request', message ?? `The upstream model rejected the request (HTTP ${status}).`, {
      upstreamStatus: status,
      upstreamCode: tooLong ? 'context_length_exceeded' : body.code === null ? null : redact(body.code),
      param: body.param === null ? (tooLong ? 'messages' : null) : redact(body.param),
    });
  }
  return new UpstreamError('upstream_error', `Upstream responded with HTTP ${status}${message ? `: ${message}` : '.'}`, {
    upstreamStatus: status,
    upstreamCode: body.code,
    // A 502 is retried by every SDK (the openai SDKs twice, LangChain up to six times), each retry one more upstream
    // call and audit delivery; an upstream 4xx here is svc's configuration (its key, its model, its URL) and the
    // same again on a retry: `x-should-retry: false` tells the openai SDKs not to.
    headers: configurationError(status) ? { 'x-should-retry': 'false' } : retryAfter ? { 'retry-after': retryAfter } : {},
  });
}

/**
 * The messages with which self-hosted servers refuse a prompt longer than the model's context, and no code of
 * their own: vLLM ("This model's maximum context length is …", "… longer than the maximum model length of …"),
 * llama.cpp ("the request exceeds the available context size"), LM Studio ("… loaded with context length of
 * only …"), TGI ("`inputs` tokens + `max_new_tokens` must be <= …"). OpenAI says `context_length_exceeded`
 * (param `messages`), which is what applications check to shorten the conversation and try again.
 */
const CONTEXT_TOO_LONG =
  /maximum context length is|longer than the maximum model length|exceeds the available context size|with context length of only|tokens \+ `?max_new_tokens`? must be <=/i;

/**
 * vLLM's refusal of a token limit that leaves no room after the prompt ("'max_tokens' or 'max_completion_tokens' is
 * too large: 4096. This model's maximum context length is 4096 tokens and your request has 21 input tokens"): it
 * names the context length, but shortening the conversation does not help; a smaller `max_tokens` does (svc's
 * default of 4096 fills a 4096-token model by itself). Not `context_length_exceeded`, then.
 */
const TOKEN_LIMIT_TOO_LARGE = /max_(?:completion_)?tokens'?(?: or '?max_completion_tokens'?)? is too large/i;

/** An upstream 4xx that is not about the request and that a retry cannot change (408, 409 and 429 can). */
function configurationError(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 409 && status !== 429;
}

/**
 * An upstream's message as it may reach a client: svc's upstream key taken out (`redact`), and any masked form of
 * it too. Run before the message is shortened: a key the cut splits would no longer be found whole.
 */
export function withoutKeys(text: string, redact: (text: string) => string): string {
  return withoutMaskedKeys(redact(text));
}

/**
 * OpenAI's 401 names the key it refused in a masked form (`sk-proj-abc*****wxyz`): not the key, so `redact`
 * leaves it, yet its prefix and last four characters are svc's own upstream key, which svc's clients never hold.
 */
function withoutMaskedKeys(text: string): string {
  return text.replace(MASKED_KEY, '[redacted]');
}
/**
 * A word with a run of `*` in it. Tried only where a word starts: tried from every position, a long word is
 * scanned to its end and back from each (64 KiB of letters: 2.4 s of the event loop).
 */
const MASKED_KEY = /(?<![\w-])[\w-]*\*{3,}[\w-]*/g;

/** True when the upstream rejected what the client sent (not svc's configuration, not the upstream itself). */
function isAboutTheRequest(status: number, body: UpstreamErrorBody): boolean {
  if (status !== 400 && status !== 404 && status !== 413 && status !== 422) return false;
  if (body.keyRefused) return false;
  // The upstream model svc is configured with (SVC_UPSTREAM_MODEL) is unknown there: svc's fault, not the client's.
  if (body.param === 'model' || body.code === 'model_not_found') return false;
  // A 404 is nearly always svc's configuration — a wrong base URL, or a model vLLM/Ollama do not serve, which
  // they report without a param — so only one that names a parameter of the request is about the request.
  if (status === 404 && body.param === null) return false;
  return true;
}

/**
 * The message, code and param of an upstream error body; nulls for what it does not say (or a body that is not JSON).
 * Besides OpenAI's `{"error":{…}}` it reads Gemini's `[{"error":{…}}]` (its OpenAI-compatible API answers errors as
 * a one-element array), Mistral's `{"object":"error","message":{"detail":[…]}}` and a FastAPI `{"detail":[…]}`: a
 * validation list is told as `loc: msg` lines, the first entry naming `param` (`messages[2].content`) and, without
 * a code of the upstream's own, its pydantic type as `code` (`extra_forbidden`: a field the upstream does not take).
 */
export function readErrorBody(text: string): UpstreamErrorBody {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { message: null, code: null, param: null };
  }
  return errorFields(errorObject(json));
}

/** The error object of an upstream body (`{"error":{…}}`, `{"error":"…"}`, vLLM's and Mistral's top level, Gemini's array, FastAPI's `detail`); null when it has none. */
export function errorObject(json: unknown): Record<string, unknown> | null {
  if (Array.isArray(json) && json.length > 0 && isRecord(json[0]) && json[0].error !== undefined) json = json[0];
  if (!isRecord(json)) return null;
  if (typeof json.error === 'string') return { message: json.error };
  if (isRecord(json.error)) return json.error;
  // An `error` of another kind (`true`, a number) still says the answer failed, without a message; `false` and
  // `null` say it did not (some OpenAI-compatible servers put `"error": false` in every normal stream frame).
  if (json.error !== undefined && json.error !== null && json.error !== false) return {};
  if (json.object === 'error' || json.object === 'Error') return json;
  if (json.detail !== undefined && json.error === undefined && json.choices === undefined) return { message: json.detail };
  return null;
}

/** Message, code and param of an error object (`errorObject`). */
export function errorFields(error: Record<string, unknown> | null): UpstreamErrorBody {
  if (error === null) return { message: null, code: null, param: null };
  const code = typeof error.code === 'string' && error.code !== '' ? error.code : null;
  const param = typeof error.param === 'string' && error.param !== '' ? error.param : null;
  if (Array.isArray(error.details) && error.details.some((d) => isRecord(d) && typeof d.reason === 'string' && d.reason.startsWith('API_KEY_'))) {
    return { ...errorFields({ ...error, details: undefined }), keyRefused: true };
  }
  let message = error.message;
  // Mistral's message is the validation object itself, or (older answers) its JSON text.
  if (typeof message === 'string' && message.startsWith('{"detail"')) message = parsed(message) ?? message;
  if (typeof message === 'string') return { message: message.trim() !== '' ? message : null, code, param: param ?? unknownName(message) };
  const validation = validationOf(isRecord(message) ? message.detail : message) ?? validationOf(error.detail);
  if (validation === null) return { message: null, code, param };
  return { message: validation.message, code: code ?? validation.type, param: param ?? validation.param };
}

/**
 * The field Gemini's OpenAI-compatible API names when it refuses a top-level field it does not know
 * (`Invalid JSON payload received. Unknown name "store": Cannot find field.`); null for any other message,
 * a nested name (`… Unknown name "const" at 'tools[0]…'`) included.
 */
export function unknownName(message: string): string | null {
  const match = UNKNOWN_NAME.exec(message);
  return match ? match[1]! : null;
}
const UNKNOWN_NAME = /^Invalid JSON payload received\. Unknown name "([A-Za-z_]\w{0,63})": Cannot find field\.$/;

function parsed(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A pydantic validation list (`[{type, loc, msg}]`) or a bare detail string, as one message; null when `detail` is neither. */
function validationOf(detail: unknown): { message: string; type: string | null; param: string | null } | null {
  if (typeof detail === 'string') return detail.trim() === '' ? null : { message: detail, type: null, param: null };
  if (!Array.isArray(detail) || detail.length === 0) return null;
  const lines: string[] = [];
  let first: { type: string | null; param: string | null } | null = null;
  for (const entry of detail.slice(0, 10)) {
    if (!isRecord(entry) || typeof entry.msg !== 'string') continue;
    const param = Array.isArray(entry.loc) ? paramOf(entry.loc) : null;
    first ??= { type: typeof entry.type === 'string' && entry.type !== '' ? entry.type : null, param };
    lines.push(param ? `${param}: ${entry.msg}` : entry.msg);
  }
  return first === null ? null : { message: lines.join('; '), ...first };
}

/** A pydantic `loc` (`["body", "messages", 2, "content"]`) as OpenAI names a param (`messages[2].content`). */
function paramOf(loc: unknown[]): string | null {
  let out = '';
  for (const [i, part] of loc.entries()) {
    if (i === 0 && part === 'body') continue;
    if (typeof part === 'number') out += `[${part}]`;
    else if (typeof part === 'string') out += out === '' ? part : `.${part}`;
    else return null;
  }
  return out === '' ? null : out;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function shorten(message: string): string {
  const oneLine = message.replace(/\s+/g, ' ').trim();
  return oneLine.length > MESSAGE_LIMIT ? `${oneLine.slice(0, MESSAGE_LIMIT)}…` : oneLine;
}
