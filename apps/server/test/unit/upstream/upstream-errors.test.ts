import { describe, expect, it } from 'vitest';
import { readErrorBody, upstreamHttpError } from '../../../src/upstream/upstream-errors.js';

const KEY = 'sk-upstream-secret';
const redact = (text: string): string => text.split(KEY).join('[redacted]');
const openai = (message: string, code: string | null = null, param: string | null = null) =>
  JSON.stringify({ error: { message, type: 'invalid_request_error', code, param } });

describe('upstreamHttpError', () => {
  it.each([
    // [name, status, headers, body, status, code, wire code, param]
    ['400 naming a parameter', 400, {}, openai("Unsupported parameter: 'top_p'.", 'unsupported_parameter', 'top_p'), 400, 'upstream_invalid_request', 'unsupported_parameter', 'top_p'],
    ['400 without a code', 400, {}, openai('Bad messages.'), 400, 'upstream_invalid_request', 'upstream_invalid_request', null],
    ['404 about the content', 404, {}, openai('No such file.', 'file_not_found', 'messages[0].content'), 400, 'upstream_invalid_request', 'file_not_found', 'messages[0].content'],
    ['413', 413, {}, openai('Too large.', 'context_length_exceeded', 'messages'), 400, 'upstream_invalid_request', 'context_length_exceeded', 'messages'],
    ['422 (vLLM top-level body)', 422, {}, JSON.stringify({ object: 'error', message: 'max_tokens too large', type: 'BadRequestError', param: null, code: 422 }), 400, 'upstream_invalid_request', 'upstream_invalid_request', null],
    [
      '400 (vLLM: max_tokens leaves no room after the prompt, not a prompt too long)',
      400,
      {},
      JSON.stringify({ object: 'error', message: "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 4096 tokens and your request has 21 input tokens (4096 > 4096 - 21).", type: 'BadRequestError', param: null, code: 400 }),
      400,
      'upstream_invalid_request',
      'upstream_invalid_request',
      null,
    ],
    ['400 (vLLM: a prompt too long)', 400, {}, JSON.stringify({ object: 'error', message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages, Please reduce the length of the messages.", type: 'BadRequestError', param: null, code: 400 }), 400, 'upstream_invalid_request', 'context_length_exceeded', 'messages'],
    ["400 (Ollama's string error)", 400, {}, JSON.stringify({ error: 'invalid options' }), 400, 'upstream_invalid_request', 'upstream_invalid_request', null],
    ['404 for the configured model', 404, {}, openai('The model `gpt-9` does not exist.', 'model_not_found', 'model'), 502, 'upstream_error', 'upstream_error', null],
    ['400 naming the model', 400, {}, openai('invalid model ID', null, 'model'), 502, 'upstream_error', 'upstream_error', null],
    ['404 with no error body (wrong base URL)', 404, {}, '<html>Not Found</html>', 502, 'upstream_error', 'upstream_error', null],
    ["404 for vLLM's unknown model (no param)", 404, {}, JSON.stringify({ object: 'error', message: 'The model `x` does not exist.', type: 'NotFoundError', param: null, code: 404 }), 502, 'upstream_error', 'upstream_error', null],
    ["404 for Ollama's unknown model", 404, {}, openai('model "x" not found, try pulling it first'), 502, 'upstream_error', 'upstream_error', null],
    ['401 (svc\'s upstream key)', 401, {}, openai('Incorrect API key.', 'invalid_api_key'), 502, 'upstream_error', 'upstream_error', null],
    ['403', 403, {}, openai('Forbidden.'), 502, 'upstream_error', 'upstream_error', null],
    ['409', 409, {}, openai('Conflict.'), 502, 'upstream_error', 'upstream_error', null],
    ['500', 500, {}, openai('Boom.'), 502, 'upstream_error', 'upstream_error', null],
    ['503 with retry-after', 503, { 'retry-after': '3' }, openai('Overloaded.'), 502, 'upstream_error', 'upstream_error', null],
    ['429', 429, { 'retry-after': '7', 'retry-after-ms': '6500' }, openai('Rate limit reached.', 'rate_limit_exceeded'), 429, 'upstream_rate_limited', 'upstream_rate_limited', null],
  ] as const)('%s', (_name, status, headers, body, clientStatus, code, wireCode, param) => {
    const error = upstreamHttpError(status, headers, body, redact);
    expect(error.status).toBe(clientStatus);
    expect(error.code).toBe(code);
    expect(error.upstreamStatus).toBe(status);
    expect(error.toBody()).toEqual({ error: { message: expect.any(String), type: expect.any(String), code: wireCode, param } });
  });

  it('passes the upstream message as it is for a 4xx about the request, key redacted', () => {
    const error = upstreamHttpError(400, {}, openai(`Bad value near '${KEY}'.`, 'invalid_value', 'stop'), redact);
    expect(error.message).toBe("Bad value near '[redacted]'.");
  });

  it('tells the SDKs not to retry a 502 that svc configuration caused (upstream 401, 403, an unknown model), and lets them retry the rest', () => {
    for (const status of [401, 403, 404]) expect(upstreamHttpError(status, {}, openai('No.'), redact).headers).toEqual({ 'x-should-retry': 'false' });
    expect(upstreamHttpError(400, {}, openai('invalid model ID', null, 'model'), redact).headers).toEqual({ 'x-should-retry': 'false' });
    for (const status of [408, 409, 500, 502, 503]) expect(upstreamHttpError(status, {}, openai('Later.'), redact).headers).toEqual({});
  });

  it("passes a 429's retry-after and retry-after-ms, and a 503's retry-after", () => {
    expect(upstreamHttpError(429, { 'retry-after': '7', 'retry-after-ms': '6500' }, '', redact).headers).toEqual({ 'retry-after': '7', 'retry-after-ms': '6500' });
    expect(upstreamHttpError(429, {}, '', redact).headers).toEqual({});
    expect(upstreamHttpError(503, { 'retry-after': '3' }, '', redact).headers).toEqual({ 'retry-after': '3' });
  });

  it('keeps the upstream key out of 401 messages', () => {
    expect(upstreamHttpError(401, {}, openai(`Incorrect API key provided: ${KEY}.`), redact).message).not.toContain(KEY);
  });

  it("keeps the masked form of svc's upstream key (its prefix and last four) out of what clients are told", () => {
    const masked = 'Incorrect API key provided: sk-proj-AbCd************************************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.';
    const { message } = upstreamHttpError(401, {}, openai(masked, 'invalid_api_key'), redact);
    expect(message).toBe('Upstream responded with HTTP 401: Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys.');
  });

  it('reads a long upstream message without stalling: the masked-key search is linear in its length', () => {
    // One word of 256 KiB (the reader keeps 64 KiB of a body; four times that makes a quadratic search, which
    // held the event loop 2.4 s at 64 KiB, outlast the test's timeout instead of passing on a fast host).
    const word = 'a'.repeat(256 * 1024);
    const { message } = upstreamHttpError(400, {}, openai(`Unknown value ${word} and a key sk-AbCd****wxyz.`), redact);
    expect(message).toMatch(/^Unknown value a+…$/);
    const masked = upstreamHttpError(401, {}, openai(`${word.slice(0, 1000)} sk-AbCd****wxyz-1 b***c`), redact).message;
    expect(masked).toBe(`Upstream responded with HTTP 401: ${word.slice(0, 1000)} [redacted] [redacted]`);
  });
});

describe('readErrorBody', () => {
  it('reads nothing from non-JSON or bodies without an error', () => {
    expect(readErrorBody('nope')).toEqual({ message: null, code: null, param: null });
    expect(readErrorBody('{"choices":[]}')).toEqual({ message: null, code: null, param: null });
  });
});

describe('readErrorBody of hosted providers', () => {
  it.each([
    ['Gemini: a one-element array', '[{"error":{"code":400,"message":"Bad tool","status":"INVALID_ARGUMENT"}}]', { message: 'Bad tool', code: null, param: null }],
    [
      'Mistral: the validation object as JSON text (older answers)',
      JSON.stringify({ object: 'error', message: JSON.stringify({ detail: [{ type: 'extra_forbidden', loc: ['body', 'frequency_penalty'], msg: 'Extra inputs are not permitted' }] }), type: 'internal_error_proxy', param: null, code: '1000' }),
      { message: 'frequency_penalty: Extra inputs are not permitted', code: '1000', param: 'frequency_penalty' },
    ],
    [
      'a validation list of several entries: each told, the first names param',
      JSON.stringify({ detail: [{ type: 'extra_forbidden', loc: ['body', 'store'], msg: 'Extra inputs are not permitted' }, { type: 'extra_forbidden', loc: ['body', 'max_completion_tokens'], msg: 'Extra inputs are not permitted' }] }),
      { message: 'store: Extra inputs are not permitted; max_completion_tokens: Extra inputs are not permitted', code: 'extra_forbidden', param: 'store' },
    ],
    ['a FastAPI detail string', '{"detail":"Not authenticated"}', { message: 'Not authenticated', code: null, param: null }],
  ])('%s', (_name, text, expected) => {
    expect(readErrorBody(text)).toEqual(expected);
  });

  it("flags Gemini's refusal of svc's own key", () => {
    const body = readErrorBody('[{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}]');
    expect(body).toEqual({ message: 'API key not valid.', code: null, param: null, keyRefused: true });
  });
});
