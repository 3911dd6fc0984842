import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { constants as h2constants, createSecureServer, type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { selfSignedCert } from './self-signed-cert.js';

/**
 * A tool call the fake answers with; `arguments` objects are JSON-encoded. With `input`, a call of a custom tool
 * (GPT-5's free-form tools) as OpenAI sends one: `{"type": "custom", "custom": {"name", "input"}}`, streamed as a
 * first fragment with the name and `"input": ""`, then `{"custom": {"input": piece}}` fragments.
 */
export type FakeToolCall = { name: string; id?: string } & ({ arguments: string | Record<string, unknown> } | { input: string });

/**
 * How the fake answers one request. Success fields shape a normal answer; the failure flags replace it.
 * Flags that only make sense for streams (`resetMidStream`, `hangMidStream`, `truncated`, `trickle`,
 * `errorEvent`) are ignored for non-streamed requests, which then get a normal answer.
 */
export interface FakeUpstreamBehavior {
  /** Answer text, or a function of the parsed request body. Default "Hello from the fake upstream." */
  answer?: string | ((body: Record<string, unknown>) => string);
  /** Reasoning text to emit before the answer. */
  reasoning?: string;
  /**
   * Field the reasoning goes in: OpenAI-compatible servers use either. Default `reasoning_content`.
   * `think-tags`: in the content, as `<think>\n…\n</think>\n\n` before the answer (Ollama's OpenAI-compatible
   * API, vLLM without `--reasoning-parser`, llama.cpp with `--reasoning-format none`).
   */
  reasoningField?: 'reasoning_content' | 'reasoning' | 'think-tags';
  /**
   * A hybrid model (Qwen3-8B): `reasoning` is emitted only while thinking is on, as its server reads the switch —
   * `vllm` (and SGLang, llama.cpp): `chat_template_kwargs.enable_thinking` (on unless false); `ollama`:
   * `reasoning_effort` (on unless `none`).
   */
  hybrid?: 'vllm' | 'ollama';
  /**
   * Tokens the model reasoned with and does not show (OpenAI's reasoning models): counted in
   * `completion_tokens` and reported as `completion_tokens_details.reasoning_tokens`, as OpenAI reports them.
   */
  reasoningTokens?: number;
  /** Stream the content in pieces of this many characters (splitting `<think>` tags across frames), not word by word. */
  contentPieceChars?: number;
  /** Answer with these (parallel) tool calls and `finish_reason: "tool_calls"`. */
  toolCalls?: FakeToolCall[];
  /** `false` omits usage (non-stream body and the include_usage chunk). Default true. */
  usage?: boolean;
  /** Streams one more choice's text under this index after the answer (an upstream's bug, or a hostile one). */
  extraChoiceIndex?: number;
  /** After the first frames, one frame of this many characters of text that never ends (no line break), then the end. */
  endlessFrameChars?: number;
  /** After the first frames, one frame whose delta holds arrays nested this deep. */
  deepFrame?: number;
  /** finish_reason of a text answer. Default "stop". */
  finishReason?: string;
  /** Respond with this non-2xx status and an OpenAI error body. */
  status?: number;
  /** Message of the error body for `status` / `errorEvent`. */
  errorMessage?: string;
  /**
   * The body sent with `status` instead of OpenAI's `{"error":{…}}`: a provider's own error shape (Gemini's
   * `[{"error":{…}}]`, Mistral's `{"object":"error","message":{"detail":[…]}}`, a bare FastAPI `{"detail":[…]}`).
   */
  errorBody?: unknown;
  /** `retry-after` header sent with `status`. */
  retryAfter?: string;
  /** `code` and `param` of the error body for `status` (default null). */
  errorCode?: string;
  errorParam?: string;
  /** The only token-limit field this server takes; the other is refused with 400 `unsupported_parameter` (as OpenAI's reasoning models refuse `max_tokens`). */
  tokenLimitField?: 'max_tokens' | 'max_completion_tokens';
  /**
   * Refuse a `developer` message with 400, as servers with a strict role list do (an OpenAI-compatible server
   * whose roles are system, assistant, user, tool and function). Ollama drops it instead: the model never sees it.
   */
  refuseDeveloperRole?: boolean;
  /**
   * Fields this server does not take: a request with one gets Mistral's 422 (`extra_forbidden`, the field in the
   * validation object that is its `message`). Mistral refuses `stream_options` and `store`, for instance.
   */
  refuseFields?: string[];
  /** `gemini`: `refuseFields` are refused as Gemini's OpenAI-compatible API refuses a top-level name it does not know (400, `[{"error":…}]`). */
  refuseFieldsAs?: 'gemini';
  /** Refuse any `temperature` but 1 (as OpenAI's reasoning models do), whatever the model's name. */
  fixedTemperature?: boolean;
  /** `service_tier` of the completion and of every chunk. */
  serviceTier?: string;
  /** 200 with a non-JSON HTML body. */
  garbage?: boolean;
  /** 200 with exactly this JSON body (e.g. a schema-invalid completion), streamed or not. */
  rawJson?: unknown;
  /** Destroy the socket as soon as the request arrived, before any header. */
  resetBeforeHeaders?: boolean;
  /** Over HTTP/2: close the stream with REFUSED_STREAM before any header ("not processed, safe to retry", RFC 9113 §8.7). */
  refuseStream?: boolean;
  /** Destroy the socket after this many SSE frames (true = 2). */
  resetMidStream?: boolean | number;
  /** Never respond. */
  hang?: boolean;
  /** Send nothing, not even headers, until this settles (a model working on a long answer), then answer as set. */
  holdUntil?: Promise<unknown>;
  /** Send headers and the first frames, then nothing more. */
  hangMidStream?: boolean;
  /** End the SSE body after the content frames, with no finish_reason frame and no [DONE]. */
  truncated?: boolean;
  /** Send the first `afterFrames` SSE frames, then nothing more until `until` settles (the model stalls mid-answer), then the rest. */
  pauseMidStream?: { afterFrames: number; until: Promise<unknown> };
  /** Send SSE frames `intervalMs` apart (true = 50 ms). */
  trickle?: boolean | { intervalMs?: number };
  /** Send `data: {"error":{...}}` after the first content frame, then end the stream. */
  errorEvent?: boolean;
  /** After the headers, send nothing until this settles (a reasoning model thinking before its first token). */
  silentUntil?: Promise<unknown>;
  /** Wait this long before sending headers. */
  delayMs?: number;
  /**
   * Hold the headers until this many requests are open at once (or `timeoutMs` passed, default 30 s): proves a
   * client sends that many requests concurrently, without timing anything.
   */
  waitForOpen?: { count: number; timeoutMs?: number };
  /** Write SSE frames with `\r\n` line ends. */
  crlf?: boolean;
  /** Put `: keep-alive` comment lines between frames. */
  comments?: boolean;
  /** Write the SSE body in pieces of this many bytes, each flushed separately (tests split frames). */
  splitBytes?: number;
  /** Spread each frame's JSON over several `data:` lines (pretty-printed JSON). */
  multiLineData?: boolean;
  /** Send exactly these SSE body pieces (after 200 + event-stream headers), each flushed separately; then end the body (left open with `hangMidStream`). */
  rawSse?: string[];
  /** Extra response headers. */
  headers?: Record<string, string>;
}

export interface FakeUpstreamRequest {
  method: string;
  url: string;
  /** Parsed JSON body (the raw string when it was not JSON). */
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** The client went away before the response ended. */
  aborted: boolean;
  /** '1.1', or '2.0' when the request came over HTTP/2. */
  httpVersion: string;
}

/**
 * Plain HTTP (the default), or HTTPS with a self-signed certificate (its PEM is `FakeUpstream.ca`) whose
 * ALPN offers `h2` and `http/1.1` (`'h2'`) or only `http/1.1` (`'h1'`).
 */
export interface FakeUpstreamTransport {
  https?: 'h2' | 'h1';
}

export interface FakeUpstream {
  /** Base URL ending in `/v1`, e.g. `http://127.0.0.1:41234/v1`. */
  url: string;
  requests: FakeUpstreamRequest[];
  /** TCP connections accepted so far (a client that reuses connections keeps this low). */
  readonly connections: number;
  /** HTTP/2 sessions accepted so far (HTTPS `h2` only): many streams over few sessions is multiplexing. */
  readonly sessions: number;
  /** The certificate to trust, with `https`. */
  ca: string | undefined;
  /** Closes every HTTP/2 session gracefully: GOAWAY (code 0) with its last stream, whose streams may finish. */
  goaway(): void;
  /** Requests received whose response has not closed yet. */
  readonly open: number;
  /** The most requests open at one moment so far: a client that queues requests keeps this at its queue's width. */
  readonly peakOpen: number;
  /** Behaviour for every following request (not taken from the queue). */
  setBehavior(behavior: FakeUpstreamBehavior): void;
  /** Queue a behaviour for the next request only; queued behaviours are used in order. */
  nextBehavior(behavior: FakeUpstreamBehavior): void;
  /** Resolves with the first request the client aborted (already aborted or future); rejects after `timeoutMs`. */
  waitForAbort(timeoutMs?: number): Promise<FakeUpstreamRequest>;
  /**
   * `behavior` for every following request, the queued ones dropped, past aborts forgotten (`waitForAbort` waits for
   * a new one): a file's tests that share an upstream start from the same one, whatever the test before left behind.
   */
  reset(behavior: FakeUpstreamBehavior): void;
  /** Destroys every socket and stops listening. */
  close(): Promise<void>;
}

const DEFAULT_ANSWER = 'Hello from the fake upstream.';

/** Whether a hybrid model served by `server` thinks for `body` (see `FakeUpstreamBehavior.hybrid`). */
function hybridThinks(body: Record<string, unknown>, server: 'vllm' | 'ollama'): boolean {
  if (server === 'ollama') return body.reasoning_effort !== 'none';
  const kwargs = body.chat_template_kwargs as { enable_thinking?: unknown } | undefined;
  return kwargs?.enable_thinking !== false;
}

/** One 32 KiB piece of the 16 MiB answer `sixteenMiBStream` streams: 32 words of 1,023 x's and a space. */
export const BIG_CONTENT = ('x'.repeat(1023) + ' ').repeat(32);

/**
 * One SSE frame of a chat completion chunk with `choices` (and `extra` top-level fields, e.g. `usage`), as an
 * upstream sends it: for `rawSse`.
 *
 * @example
 * upstream.setBehavior({ rawSse: [chunkFrame([{ index: 0, delta: { content: 'Hi' }, finish_reason: 'stop' }]), 'data: [DONE]\n\n'] });
 */
export function chunkFrame(choices: object[], extra: object = {}): string {
  return `data: ${JSON.stringify({ id: 'up', object: 'chat.completion.chunk', created: 1, model: 'm', choices, ...extra })}\n\n`;
}

/**
 * A `rawSse` of 16 MiB of answer (64 writes of 8 frames of `BIG_CONTENT`), far more than the socket buffers
 * between svc and a client take: for backpressure and clients that stop reading. `usage`: a usage frame before
 * `[DONE]`.
 */
export function sixteenMiBStream(options: { usage?: boolean } = {}): string[] {
  const delta = (d: object, finish: string | null = null) => chunkFrame([{ index: 0, delta: d, finish_reason: finish }]);
  const pieces = [delta({ role: 'assistant', content: '' })];
  for (let i = 0; i < 64; i++) pieces.push(delta({ content: BIG_CONTENT }).repeat(8));
  pieces.push(delta({}, 'stop'));
  if (options.usage) pieces.push(chunkFrame([], { usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
  pieces.push('data: [DONE]\n\n');
  return pieces;
}

/**
 * Starts a real OpenAI-compatible HTTP server on 127.0.0.1 (random port) that answers
 * `POST /v1/chat/completions` like OpenAI does, or fails in a chosen way.
 *
 * @example
 * const upstream = await startFakeUpstream({ answer: 'Paris.' });
 * try {
 *   upstream.nextBehavior({ status: 429, retryAfter: '7' });
 *   // ... point the server at upstream.url ...
 * } finally {
 *   await upstream.close();
 * }
 */
export async function startFakeUpstream(options: FakeUpstreamBehavior = {}, transport: FakeUpstreamTransport = {}): Promise<FakeUpstream> {
  let behavior: FakeUpstreamBehavior = options;
  const queue: FakeUpstreamBehavior[] = [];
  const requests: FakeUpstreamRequest[] = [];
  const sockets = new Set<Socket>();
  const abortWaiters = new Set<(request: FakeUpstreamRequest) => void>();
  let closed = false;

  const tls = transport.https ? selfSignedCert() : undefined;
  const onRequest = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void => {
    void handle(req, res);
  };
  // node:http2 always offers h2 by ALPN; an HTTPS server that offers only http/1.1 is node:https's.
  const server =
    transport.https === 'h2' ? createSecureServer({ ...tls, allowHTTP1: true }, onRequest) : tls ? createHttpsServer(tls, onRequest) : createServer(onRequest);
  let connections = 0;
  let sessions = 0;
  const openSessions = new Set<ServerHttp2Session>();
  server.on('session', (session: ServerHttp2Session) => {
    sessions += 1;
    openSessions.add(session);
    session.on('close', () => openSessions.delete(session));
  });
  let open = 0;
  let peakOpen = 0;
  const openWaiters = new Set<() => void>();
  function openReached(count: number, timeoutMs: number): Promise<void> {
    if (open >= count) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        openWaiters.delete(check);
        resolve();
      };
      const check = (): void => {
        if (open >= count || closed) done();
      };
      const timer = setTimeout(done, timeoutMs);
      openWaiters.add(check);
    });
  }
  server.on('connection', (socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): Promise<void> {
    open += 1;
    peakOpen = Math.max(peakOpen, open);
    for (const waiter of openWaiters) waiter();
    res.once('close', () => {
      open -= 1;
    });
    const raw = await readBody(req);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      body = { raw } as Record<string, unknown>;
    }
    const record: FakeUpstreamRequest = { method: req.method ?? '', url: req.url ?? '', body, headers: req.headers, aborted: false, httpVersion: req.httpVersion };
    requests.push(record);
    let current = queue.shift() ?? behavior;
    let destroyedByUs = false;
    res.on('close', () => {
      // An Http2ServerResponse counts as finished once its stream closed, reset or not: there, what tells is
      // whether this fake ended it.
      const finished = 'stream' in res ? res.writableEnded : res.writableFinished;
      if (!finished && !destroyedByUs && !closed) {
        record.aborted = true;
        for (const waiter of abortWaiters) waiter(record);
      }
    });
    const reset = (): void => {
      destroyedByUs = true;
      // Over HTTP/2 the stream is reset (RST_STREAM), not the connection its neighbours share.
      if ('stream' in res) res.stream.close(h2constants.NGHTTP2_INTERNAL_ERROR);
      else res.socket?.destroy();
    };

    if (req.method !== 'POST' || !(req.url ?? '').startsWith('/v1/chat/completions')) {
      sendJson(res, 404, { error: { message: `Unknown route ${req.method} ${req.url}`, type: 'invalid_request_error', code: 'not_found', param: null } });
      return;
    }
    if (current.resetBeforeHeaders) return reset();
    if (current.refuseStream && 'stream' in res) {
      destroyedByUs = true;
      res.stream.close(h2constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    if (current.hang) return;
    if (current.holdUntil) await current.holdUntil;
    if (current.delayMs) await delay(current.delayMs);
    if (current.waitForOpen) await openReached(current.waitForOpen.count, current.waitForOpen.timeoutMs ?? 30_000);
    if (gone(res)) return;
    if (current.status && current.status >= 300) {
      const headers: Record<string, string> = { ...current.headers };
      if (current.retryAfter) headers['retry-after'] = current.retryAfter;
      const type = current.status === 429 ? 'rate_limit_error' : current.status >= 500 ? 'server_error' : 'invalid_request_error';
      const error = { message: current.errorMessage ?? `Fake upstream failure ${current.status}`, type, code: current.errorCode ?? null, param: current.errorParam ?? null };
      sendJson(res, current.status, current.errorBody !== undefined ? current.errorBody : { error }, headers);
      return;
    }
    const extra = current.refuseFields?.find((field) => body[field] !== undefined);
    if (extra !== undefined) {
      if (current.refuseFieldsAs === 'gemini') {
        const message = `Invalid JSON payload received. Unknown name "${extra}": Cannot find field.`;
        const details = [{ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ description: message }] }];
        sendJson(res, 400, [{ error: { code: 400, message, status: 'INVALID_ARGUMENT', details } }]);
        return;
      }
      const detail = [{ type: 'extra_forbidden', loc: ['body', extra], msg: 'Extra inputs are not permitted', input: body[extra] }];
      sendJson(res, 422, { object: 'error', message: { detail }, type: 'invalid_request_error', param: null, code: null });
      return;
    }
    const refusal = parameterRefusal(body, current);
    if (refusal) {
      sendJson(res, 400, { error: { ...refusal, type: 'invalid_request_error' } });
      return;
    }
    if (current.rawJson !== undefined) {
      sendJson(res, 200, current.rawJson, current.headers);
      return;
    }
    if (current.garbage) {
      res.writeHead(200, { 'content-type': 'text/html', ...current.headers });
      res.end('<html><body>502 Bad Gateway (not JSON)</body></html>');
      return;
    }

    if (current.hybrid && !hybridThinks(body, current.hybrid)) current = { ...current, reasoning: undefined };
    const id = `chatcmpl-fake${requests.length}`;
    const created = Math.floor(Date.now() / 1000);
    const model = typeof body.model === 'string' ? body.model : 'fake-model';
    const given = typeof current.answer === 'function' ? current.answer(body) : (current.answer ?? DEFAULT_ANSWER);
    const inTags = current.reasoningField === 'think-tags' && current.reasoning !== undefined;
    const answer = inTags ? `<think>\n${current.reasoning}\n</think>\n\n${given}` : given;
    const reasoningField = current.reasoningField === 'think-tags' ? null : (current.reasoningField ?? 'reasoning_content');
    const toolCalls = (current.toolCalls ?? []).map((call, i) =>
      'input' in call
        ? { id: call.id ?? `call_fake${i}`, type: 'custom' as const, custom: { name: call.name, input: call.input } }
        : {
            id: call.id ?? `call_fake${i}`,
            type: 'function' as const,
            function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
          },
    );
    const contentPieces = toolCalls.length > 0 ? [] : current.contentPieceChars ? (answer.match(new RegExp(`[^]{1,${current.contentPieceChars}}`, 'g')) ?? []) : splitAnswer(answer);
    const usage = {
      prompt_tokens: countWords(JSON.stringify(body.messages ?? '')),
      completion_tokens: Math.max(1, contentPieces.length + toolCalls.length * 3 + (current.reasoning ? countWords(current.reasoning) : 0)),
      total_tokens: 0,
    };
    if (current.reasoningTokens !== undefined) {
      usage.completion_tokens += current.reasoningTokens;
      Object.assign(usage, {
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: current.reasoningTokens, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
      });
    }
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    const finishReason = toolCalls.length > 0 ? 'tool_calls' : (current.finishReason ?? 'stop');

    // OpenAI answers `n` choices (the same text here) and, with `logprobs`, each token's log probability and
    // its `top_logprobs` alternatives; streamed, each choice's chunks come one choice per chunk, in turn.
    const choiceCount = typeof body.n === 'number' && body.n > 1 ? body.n : 1;
    const wantsLogprobs = body.logprobs === true;
    const topLogprobs = typeof body.top_logprobs === 'number' ? body.top_logprobs : 0;
    usage.completion_tokens *= choiceCount;
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    // OpenAI's audio models, asked for `modalities: ["text", "audio"]`, speak the answer: `content` is null and its
    // words are `audio.transcript` beside the base64 audio (`data`, here the text's bytes standing for pcm16).
    const audioOut = toolCalls.length === 0 && Array.isArray(body.modalities) && body.modalities.includes('audio');
    const audio = { id: `audio_fake${requests.length}`, data: Buffer.from(answer).toString('base64'), expires_at: created + 3600, transcript: answer };

    if (body.stream !== true) {
      const message: Record<string, unknown> = { role: 'assistant', content: toolCalls.length > 0 || audioOut ? null : answer, refusal: null };
      if (audioOut) message.audio = audio;
      if (current.reasoning && reasoningField) message[reasoningField] = current.reasoning;
      if (toolCalls.length > 0) message.tool_calls = toolCalls;
      const logprobs = wantsLogprobs ? { content: contentPieces.map((piece) => tokenLogprob(piece, topLogprobs)), refusal: null } : null;
      const completion: Record<string, unknown> = {
        id,
        object: 'chat.completion',
        created,
        model,
        choices: Array.from({ length: choiceCount }, (_, index) => ({ index, message, logprobs, finish_reason: finishReason })),
        ...(current.serviceTier ? { service_tier: current.serviceTier } : {}),
        system_fingerprint: 'fp_fake',
      };
      if (current.usage !== false) completion.usage = usage;
      sendJson(res, 200, completion, current.headers);
      return;
    }

    // `connection` is an HTTP/1.1 header; HTTP/2 refuses it.
    const keepAlive = 'stream' in res ? {} : { connection: 'keep-alive' };
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...keepAlive, ...current.headers });
    // The HTTP/2 compatibility response has the same write API at run time; its types differ.
    const out = res as ServerResponse;
    out.flushHeaders();
    if (current.silentUntil) await current.silentUntil;
    const eol = current.crlf ? '\r\n' : '\n';
    const write = async (text: string): Promise<void> => {
      if (gone(res)) return;
      if (!current.splitBytes) {
        out.write(text);
        await delay(1);
        return;
      }
      const bytes = Buffer.from(text);
      for (let i = 0; i < bytes.length && !gone(res); i += current.splitBytes) {
        out.write(bytes.subarray(i, i + current.splitBytes));
        await delay(2);
      }
    };

    if (current.rawSse) {
      for (const piece of current.rawSse) await write(piece);
      if (!current.hangMidStream) res.end();
      return;
    }

    const frame = (payload: unknown): string => {
      const json = current.multiLineData ? JSON.stringify(payload, null, 2) : JSON.stringify(payload);
      const data = json.split('\n').map((line) => `data: ${line}`).join(eol);
      return `${current.comments ? `: keep-alive${eol}` : ''}${data}${eol}${eol}`;
    };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null, index = 0, logprobs: unknown = null): Record<string, unknown> => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      ...(current.serviceTier ? { service_tier: current.serviceTier } : {}),
      system_fingerprint: 'fp_fake',
      choices: [{ index, delta, logprobs, finish_reason: finish }],
    });

    const frames: string[] = [];
    for (let c = 0; c < choiceCount; c++) {
      const emptyLogprobs = wantsLogprobs ? { content: [], refusal: null } : null;
      frames.push(frame(chunk(audioOut ? { role: 'assistant', refusal: null } : { role: 'assistant', content: '', refusal: null }, null, c, emptyLogprobs)));
    }
    if (current.reasoning && reasoningField) for (const piece of splitAnswer(current.reasoning)) frames.push(frame(chunk({ [reasoningField]: piece })));
    contentPieces.forEach((piece, p) => {
      for (let c = 0; c < choiceCount; c++) {
        // Spoken, as OpenAI streams it: the transcript first (the first piece with the audio's id and
        // `content: null`), then the audio data, then its `expires_at` alone.
        const delta = !audioOut ? { content: piece } : p === 0 ? { content: null, audio: { id: audio.id, transcript: piece } } : { audio: { transcript: piece } };
        frames.push(frame(chunk(delta, null, c, wantsLogprobs ? { content: [tokenLogprob(piece, topLogprobs)], refusal: null } : null)));
      }
    });
    for (let c = 0; audioOut && c < choiceCount; c++) {
      const half = Math.ceil(audio.data.length / 8) * 4;
      frames.push(frame(chunk({ role: 'assistant', content: null, refusal: null, audio: { id: audio.id, data: audio.data.slice(0, half) } }, null, c)));
      if (half < audio.data.length) frames.push(frame(chunk({ audio: { data: audio.data.slice(half) } }, null, c)));
      frames.push(frame(chunk({ audio: { expires_at: audio.expires_at } }, null, c)));
    }
    for (let c = 0; c < choiceCount; c++) {
      toolCalls.forEach((call, index) => {
        if (call.type === 'custom') {
          frames.push(frame(chunk({ tool_calls: [{ index, id: call.id, type: 'custom', custom: { name: call.custom.name, input: '' } }] }, null, c)));
          for (const fragment of splitArguments(call.custom.input)) frames.push(frame(chunk({ tool_calls: [{ index, custom: { input: fragment } }] }, null, c)));
          return;
        }
        frames.push(frame(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }, null, c)));
        for (const fragment of splitArguments(call.function.arguments)) {
          frames.push(frame(chunk({ tool_calls: [{ index, function: { arguments: fragment } }] }, null, c)));
        }
      });
    }
    if (current.extraChoiceIndex !== undefined) {
      frames.push(frame({ ...chunk({}), choices: [{ index: current.extraChoiceIndex, delta: { content: 'Stray.' }, logprobs: null, finish_reason: null }] }));
    }
    const contentFrameCount = frames.length;
    for (let c = 0; c < choiceCount; c++) frames.push(frame(chunk({}, finishReason, c)));
    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    if (includeUsage && current.usage !== false) {
      const tier = current.serviceTier ? { service_tier: current.serviceTier } : {};
      frames.push(frame({ id, object: 'chat.completion.chunk', created, model, ...tier, system_fingerprint: 'fp_fake', choices: [], usage }));
    }
    frames.push(`data: [DONE]${eol}${eol}`);

    const intervalMs = current.trickle ? (typeof current.trickle === 'object' ? (current.trickle.intervalMs ?? 50) : 50) : 0;
    const resetAfter = current.resetMidStream === true ? 2 : typeof current.resetMidStream === 'number' ? current.resetMidStream : -1;
    for (let i = 0; i < frames.length; i++) {
      if (gone(res) || closed) return;
      if (i === resetAfter) return reset();
      if (current.hangMidStream && i === 2) return;
      if (current.pauseMidStream && i === current.pauseMidStream.afterFrames) await current.pauseMidStream.until;
      if (current.truncated && i === contentFrameCount) {
        res.end();
        return;
      }
      if (current.deepFrame !== undefined && i === 2) {
        await write(`data: {"choices":[{"index":0,"delta":{"content":"a","x":${'['.repeat(current.deepFrame)}${']'.repeat(current.deepFrame)}}}]}${eol}${eol}`);
      }
      if (current.endlessFrameChars !== undefined && i === 2) {
        const piece = 'x'.repeat(64 * 1024);
        await write('data: {"choices":[{"index":0,"delta":{"content":"');
        for (let sent = 0; sent < current.endlessFrameChars && !gone(res) && !closed; sent += piece.length) await write(piece);
        res.end();
        return;
      }
      if (current.errorEvent && i === 2) {
        await write(frame({ error: { message: current.errorMessage ?? 'The fake upstream failed mid-stream.', type: 'server_error', code: 'internal_error', param: null } }));
        res.end();
        return;
      }
      await write(frames[i]!);
      if (intervalMs) await delay(intervalMs);
    }
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}/v1`,
    ca: tls?.cert,
    goaway() {
      for (const session of openSessions) session.close();
    },
    get sessions() {
      return sessions;
    },
    requests,
    get connections() {
      return connections;
    },
    get open() {
      return open;
    },
    get peakOpen() {
      return peakOpen;
    },
    setBehavior(next) {
      behavior = next;
    },
    nextBehavior(next) {
      queue.push(next);
    },
    reset(next) {
      behavior = next;
      queue.length = 0;
      for (const request of requests) request.aborted = false;
    },
    waitForAbort(timeoutMs = 5000) {
      const already = requests.find((r) => r.aborted);
      if (already) return Promise.resolve(already);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          abortWaiters.delete(waiter);
          reject(new Error(`fake upstream: no aborted request within ${timeoutMs} ms`));
        }, timeoutMs);
        const waiter = (request: FakeUpstreamRequest): void => {
          clearTimeout(timer);
          abortWaiters.delete(waiter);
          resolve(request);
        };
        abortWaiters.add(waiter);
      });
    },
    async close() {
      closed = true;
      for (const waiter of openWaiters) waiter();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** OpenAI's reasoning models as the fake knows them (its own list, not svc's rule, so tests check the rule). */
const REASONING_MODELS = ['o1', 'o1-mini', 'o3', 'o3-mini', 'o3-pro', 'o4-mini', 'gpt-5', 'gpt-5-mini', 'gpt-5-nano', 'gpt-5.1'];

/** OpenAI's models that do not reason: they refuse `reasoning_effort`. */
const NON_REASONING_OPENAI_MODELS = ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-4.1-mini', 'gpt-4.1-nano', 'gpt-5-chat-latest'];

/**
 * The 400 a real server gives for parameters its model does not take: OpenAI's reasoning models refuse
 * `max_tokens`, a `temperature` other than 1, and `top_p`, the penalties, `logprobs`, `top_logprobs` and
 * `logit_bias` whatever their value; its other models refuse `reasoning_effort` (their messages, codes and
 * params); `tokenLimitField` makes any model refuse the other field.
 */
function parameterRefusal(body: Record<string, unknown>, behavior: FakeUpstreamBehavior): { message: string; code: string; param: string } | null {
  const model = String(body.model ?? '');
  const reasoning = REASONING_MODELS.some((name) => model === name || model.startsWith(`${name}-`));
  const only = behavior.tokenLimitField ?? (reasoning ? 'max_completion_tokens' : undefined);
  const refused = only === 'max_completion_tokens' ? 'max_tokens' : only === 'max_tokens' ? 'max_completion_tokens' : undefined;
  if (refused && body[refused] !== undefined) {
    return { message: `Unsupported parameter: '${refused}' is not supported with this model. Use '${only}' instead.`, code: 'unsupported_parameter', param: refused };
  }
  const developer = Array.isArray(body.messages) ? body.messages.findIndex((m) => (m as { role?: unknown } | null)?.role === 'developer') : -1;
  if (behavior.refuseDeveloperRole && developer !== -1) {
    return { message: `developer is not one of ['system', 'assistant', 'user', 'tool', 'function'] - 'messages.[${developer}].role'`, code: 'invalid_value', param: `messages.[${developer}].role` };
  }
  if (reasoning) {
    for (const param of ['top_p', 'presence_penalty', 'frequency_penalty', 'logprobs', 'top_logprobs', 'logit_bias']) {
      if (body[param] !== undefined) return { message: `Unsupported parameter: '${param}' is not supported with this model.`, code: 'unsupported_parameter', param };
    }
  }
  if (NON_REASONING_OPENAI_MODELS.some((name) => model === name || model.startsWith(`${name}-`)) && body.reasoning_effort !== undefined) {
    return { message: "Unsupported parameter: 'reasoning_effort' is not supported with this model.", code: 'unsupported_parameter', param: 'reasoning_effort' };
  }
  if (reasoning && body.reasoning_effort !== undefined) {
    // Each family takes its own efforts: gpt-5.1 `none` but not `minimal`, gpt-5 `minimal` but not `none`, o-series neither.
    const efforts = model.startsWith('gpt-5.1') ? ['none', 'low', 'medium', 'high'] : model.startsWith('gpt-5') ? ['minimal', 'low', 'medium', 'high'] : ['low', 'medium', 'high'];
    if (!efforts.includes(String(body.reasoning_effort))) {
      const listed = `${efforts.slice(0, -1).map((e) => `'${e}'`).join(', ')}, and '${efforts.at(-1)!}'`;
      return {
        message: `Unsupported value: 'reasoning_effort' does not support '${String(body.reasoning_effort)}' with this model. Supported values are: ${listed}.`,
        code: 'unsupported_value',
        param: 'reasoning_effort',
      };
    }
  }
  if ((reasoning || behavior.fixedTemperature) && body.temperature !== undefined && body.temperature !== 1) {
    return {
      message: `Unsupported value: 'temperature' does not support ${String(body.temperature)} with this model. Only the default (1) value is supported.`,
      code: 'unsupported_value',
      param: 'temperature',
    };
  }
  return null;
}

/** The response can no longer be written (an Http2ServerResponse has no `destroyed`: its stream has). */
function gone(res: ServerResponse | Http2ServerResponse): boolean {
  return 'stream' in res ? res.stream.destroyed || res.stream.closed : res.destroyed;
}

function readBody(req: IncomingMessage | Http2ServerRequest): Promise<string> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', () => resolve(Buffer.concat(parts).toString('utf8')));
  });
}

function sendJson(res: ServerResponse | Http2ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(payload);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** One token's entry of `logprobs.content`, with `top` alternatives (the token itself first), as OpenAI gives it. */
function tokenLogprob(token: string, top: number): Record<string, unknown> {
  const entry = (text: string, logprob: number) => ({ token: text, logprob, bytes: [...Buffer.from(text)] });
  const alternatives = Array.from({ length: top }, (_, i) => entry(i === 0 ? token : `${token}${i}`, -0.01 - i));
  return { ...entry(token, -0.01), top_logprobs: alternatives };
}

/** Word-sized pieces that keep their leading whitespace, like tokens do. */
function splitAnswer(text: string): string[] {
  return text.match(/\s*\S+|\s+$/g) ?? (text ? [text] : []);
}

function splitArguments(args: string): string[] {
  if (args.length < 3) return [args];
  const third = Math.ceil(args.length / 3);
  return [args.slice(0, third), args.slice(third, 2 * third), args.slice(2 * third)].filter((s) => s.length > 0);
}

function countWords(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}
