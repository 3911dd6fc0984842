import { SVC_MODEL, type ChatCompletionChunk, type ChatCompletionRequest, type SvcResult, type Usage } from '@svc/protocol';
import type { ApiError } from '../http/errors.js';
import { toApiError } from '../http/to-api-error.js';
import type { ChunkStream } from '../upstream/upstream.js';
import { NO_USAGE, record, recordFailure, statusFor, type ChatContext, type Outcome } from './chat-context.js';
import { FrameJson } from './frame-json.js';
import { KeptTexts } from './kept-text.js';
import { countUsage } from './prompt.js';
import { ChoiceIndexes, ToolCallingChoices } from '../choice-indexes.js';
import { flatten } from '../flat-string.js';
import { answerSchema, dehallucinateRequested } from './request.js';
import { SseWriter } from './sse-writer.js';
import { audioTranscript } from './answer-text.js';

/** The choices of one upstream chunk, as the relay hands them on. */
export type RelayedChoices = ChatCompletionChunk['choices'];

/**
 * What a relayed stream is written as: chat completion chunks (`data:` frames and `[DONE]`), or the Responses
 * API's events. The relay decides when (the first choice's finish carries `svc`; usage and the end come after
 * the stream, the end after the audit); the output decides how. A returned promise means "wait for drain".
 */
export interface StreamOutput {
  serviceTier(tier: string): void;
  choices(choices: RelayedChoices, systemFingerprint: string | null | undefined, svc: SvcResult | undefined): Promise<void> | undefined;
  usage(usage: Usage, systemFingerprint: string | null | undefined): Promise<void> | undefined;
  /** After the audit: the stream's last words. `outcome`: what the audit says (`recordsAudit`). */
  end(outcome: Outcome): Promise<void> | undefined;
  /** The stream broke after it started; `usage` is what was generated until then. */
  fail(error: ApiError, usage: Usage, outcome: Outcome): Promise<void> | undefined;
  /** The client left before the end: nothing more is written; `usage` is what was generated so far. */
  abandoned?(usage: Usage, outcome: Outcome): Promise<void> | undefined;
  /**
   * The output stores the stream's end with its audit and records that audit itself (a background response: its
   * end and the audit to record are one write, so that a runner killed between them leaves no end audited otherwise
   * than it was stored): the relay records none, and hands `end`, `fail` and `abandoned` the outcome to record.
   */
  recordsAudit?: true;
}

/** Chat completion chunks under our id and model; usage as a `choices: []` chunk only when the client asked. */
export function chatChunks(ctx: ChatContext, request: ChatCompletionRequest, sse: SseWriter): StreamOutput {
  const { requestId, startedAt } = ctx.exchange;
  const includeUsage = request.stream_options?.include_usage === true;
  const frames = new FrameJson(requestId, Math.floor(startedAt / 1000), SVC_MODEL, { includeUsage });
  return {
    serviceTier: (tier) => frames.serviceTier(tier),
    choices: (choices, fingerprint, svc) => sse.write(frames.of(choices, fingerprint, svc)),
    usage: (usage, fingerprint) => (includeUsage ? sse.write(frames.usage(usage, fingerprint)) : undefined),
    end: () => sse.write('[DONE]'),
    fail: (error) => sse.write(JSON.stringify(error.toBody())),
  };
}

/**
 * Relays upstream chunks to the client through `output` (chat chunks by default); the chunk that finishes the
 * first choice also carries `svc` (the full text is known then). Usage from upstream is held back until the
 * stream ends. Whatever fails once the stream started ends it through `output.fail`, recorded like a success:
 * this never throws.
 *
 * @example
 * await relayStream(ctx, request, await upstream.stream({ body, signal: ctx.abort, thinking: false }));
 */
export async function relayStream(
  ctx: ChatContext,
  request: ChatCompletionRequest,
  chunks: ChunkStream,
  outputOf: (sse: SseWriter) => StreamOutput = (sse) => chatChunks(ctx, request, sse),
): Promise<void> {
  const { res, startedAt } = ctx.exchange;
  const requested = dehallucinateRequested(request);
  const texts = new KeptTexts();
  /** Each choice's reasoning: not checked nor audited as the answer, but counted when svc counts usage. */
  const reasoning = new KeptTexts();
  /** Each choice's `audio.transcript`: the answer of one given only as audio (OpenAI's audio models). */
  const transcripts = new KeptTexts();
  /** Each choice's `delta.refusal` pieces: what the model said instead of an answer when it refused. */
  const refusals = new KeptTexts();
  /** The first choice's answer, as the grounding check and the audit take it. */
  const answer = (): string => texts.text(0) || transcripts.text(0);
  /**
   * What svc counts as completion tokens when upstream reports none: each choice's answer (its text, or the
   * transcript of one given only as audio), its reasoning and its refusal.
   */
  const generated = (): string[] => {
    const out = [...texts.all(), ...reasoning.all(), ...refusals.all()];
    for (const index of transcripts.indexes()) if (texts.text(index) === '') out.push(transcripts.text(index));
    return out;
  };
  const started = new ChoiceIndexes();
  /** The choices whose finish_reason came; those that streamed a tool call. */
  const finished = new ChoiceIndexes();
  const calling = new ToolCallingChoices();
  /** Made once per stream: with n > 1 every frame after the first finish is looked at with it. */
  const finishedAlready = (choice: { index: number }): boolean => finished.has(choice.index);
  /** The finish of a choice the upstream left unfinished: `tool_calls` after a call, as OpenAI ends one. */
  const closing = (index: number) => ({ index, delta: {}, finish_reason: calling.finish(index, 'stop' as const), logprobs: null });
  let usage: Usage | null = null;
  let svc: SvcResult | null = null;
  /** What the audit records of this stream, as it stands now. */
  const outcome = (statusCode: number, counted: Usage): Outcome => ({
    statusCode,
    streaming: true,
    messages: request.messages,
    responseText: answer(),
    refusal: refusals.text(0) || undefined,
    svc,
    usage: counted,
  });
  /** Finish chunks of other choices that arrive before the first choice finished wait for its `svc`. */
  const held: Array<Pick<ChatCompletionChunk, 'choices' | 'system_fingerprint'>> = [];
  let firstToken = false;

  let sse: SseWriter;
  let out: StreamOutput;
  try {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // Node keeps the header block it just built (`_header`) for the response's life, as some 30 joined pieces:
    // about 1.2 KB per open stream, 0.2 KB once flat.
    const header = (res as { _header?: unknown })._header;
    if (typeof header === 'string') flatten(header);
    // A client that reads nothing for as long as the whole upstream exchange may take is not coming back.
    sse = new SseWriter(res, { keepAliveMs: ctx.deps.config.streamKeepAliveMs, stallMs: ctx.deps.config.upstream.timeoutMs });
    out = outputOf(sse);
  } catch (error) {
    // `each` will never run: without this the upstream exchange would keep its timers and abort listener.
    chunks.cancel();
    throw error;
  }

  const computeSvc = async () =>
    ctx.deps.grounder.check({ messages: request.messages, answer: answer(), requested, schema: answerSchema(request) });

  /** The upstream's last `system_fingerprint`, for the usage frame; whether its `service_tier` is known. */
  let lastFingerprint: string | null | undefined;
  let tierKnown = false;

  /**
   * Adjusts an upstream chunk's choices (ours alone) in place for the client, and keeps the text. Returns the
   * opening frames to send before it: a choice whose first frame carries token logprobs opens with a frame of
   * its own (`role`, empty content), as OpenAI opens every choice; the openai SDK's stream helper otherwise
   * counts that first frame's logprobs twice.
   */
  const relay = (chunk: ChatCompletionChunk): RelayedChoices | undefined => {
    let opening: RelayedChoices | undefined;
    for (const choice of chunk.choices) {
      const delta = choice.delta;
      if (!started.has(choice.index)) {
        started.add(choice.index);
        if (hasTokenLogprobs(choice.logprobs)) {
          (opening ??= []).push({ index: choice.index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
        } else if (delta.role === undefined) delta.role = 'assistant';
      }
      if (typeof delta.content === 'string') texts.append(choice.index, delta.content);
      calling.see(choice);
      if (typeof delta.reasoning_content === 'string') reasoning.append(choice.index, delta.reasoning_content);
      if (typeof delta.refusal === 'string') refusals.append(choice.index, delta.refusal);
      const transcript = delta.audio === undefined ? undefined : audioTranscript(delta);
      if (transcript !== undefined) transcripts.append(choice.index, transcript);
      if (!firstToken && (delta.content || delta.reasoning_content || delta.refusal || delta.tool_calls?.length || transcript)) {
        firstToken = true;
        ctx.deps.metrics?.firstToken((ctx.deps.clock() - startedAt) / 1000);
      }
      if (choice.logprobs === undefined) choice.logprobs = null;
    }
    return opening;
  };

  /** The first choice finished: its `svc` is computed, then that chunk and the finishes held for it go out. */
  const finishFirst = async (choices: RelayedChoices, fingerprint: string | null | undefined): Promise<void> => {
    svc = await computeSvc();
    await out.choices(choices, fingerprint, svc);
    for (const h of held.splice(0)) await out.choices(h.choices, h.system_fingerprint, svc);
  };

  /** One upstream chunk to the client; a promise when it must wait (the grounding check, a client behind). */
  const relayChunk = (chunk: ChatCompletionChunk): Promise<void> | undefined => {
    if (chunk.system_fingerprint !== undefined) lastFingerprint = chunk.system_fingerprint;
    if (!tierKnown && typeof chunk.service_tier === 'string') {
      tierKnown = true;
      out.serviceTier(chunk.service_tier);
    }
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices || chunk.choices.length === 0) return undefined;
    // A choice finishes once: some servers (vLLM and TGI versions, proxies) repeat the finish in a frame of
    // its own, with usage. That frame gives its usage only; a second finish chunk (a second `svc`, a second
    // check) would make clients count the choice twice.
    if (finished.size > 0 && chunk.choices.some(finishedAlready)) {
      chunk.choices = chunk.choices.filter((c) => !finished.has(c.index));
      if (chunk.choices.length === 0) return undefined;
    }
    const opening = relay(chunk);
    const { system_fingerprint: fingerprint } = chunk;
    if (opening) {
      const behind = out.choices(opening, fingerprint, undefined);
      if (behind) return behind.then(() => relayChoices(chunk));
    }
    return relayChoices(chunk);
  };

  /** The choices of a relayed chunk to the client: a finish of the first choice waits for `svc`. */
  const relayChoices = (chunk: ChatCompletionChunk): Promise<void> | undefined => {
    const { choices, system_fingerprint: fingerprint } = chunk;
    let finishesFirst = false;
    let finishesOther = false;
    for (const c of choices) {
      if (c.finish_reason === null || c.finish_reason === undefined) continue;
      finished.add(c.index);
      if (c.index === 0) finishesFirst = true;
      else finishesOther = true;
    }
    if (finishesFirst) return finishFirst(choices, fingerprint);
    if (finishesOther && svc === null) {
      held.push({ choices, system_fingerprint: fingerprint });
      return undefined;
    }
    return out.choices(choices, fingerprint, finishesOther && svc ? svc : undefined);
  };

  /** The chunks of `batch` from `from` on, in order: synchronously unless one of them must wait. */
  const relayBatch = (batch: ChatCompletionChunk[], from = 0): Promise<void> | undefined => {
    for (let i = from; i < batch.length; i++) {
      const behind = relayChunk(batch[i]!);
      if (behind) return i + 1 < batch.length ? behind.then(() => relayBatch(batch, i + 1)) : behind;
    }
    return undefined;
  };

  /** The delivery of the finished stream is recorded (committed): nothing after it records another. */
  let recorded = false;
  try {
    await chunks.each(relayBatch);
    ctx.upstreamFinishedAt = ctx.deps.clock();
    // What is left are our own closing frames, the audit (one event-loop turn) and [DONE]: one write at the end.
    sse.hold();
    if (svc === null) {
      // Upstream ended cleanly without a finish_reason for the first choice: close it ourselves.
      svc = await computeSvc();
      await out.choices([closing(0)], undefined, svc);
      for (const h of held.splice(0)) await out.choices(h.choices, h.system_fingerprint, svc);
    }
    // Other choices (n > 1) that did not finish either: without a finish_reason the SDKs' stream helpers
    // refuse to assemble the completion ("missing finish_reason for choice 1").
    const unfinished = started.indexes().filter((index) => index !== 0 && !finished.has(index));
    if (unfinished.length > 0) {
      await out.choices(unfinished.map(closing), undefined, svc);
    }
    usage ??= await countUsage(request.messages, generated());
    await out.usage(usage, lastFingerprint);
    const told = outcome(statusFor(ctx, 200), usage);
    if (!out.recordsAudit) await record(ctx, told);
    recorded = true;
    await out.end(told);
  } catch (err) {
    // Whatever failed (upstream, counting, the audit of a finished stream), the delivery is recorded and the
    // client gets an error frame: nothing in this path may throw past them.
    const error = toApiError(err);
    const clientGone = ctx.abort.aborted;
    // Read now, as `clientGone`: storing the failure below ends a background response's run, which its owner's look
    // may then stop (a cancel's status), though it failed first.
    const statusCode = statusFor(ctx, error.status);
    // The status went out as 200 with the first frame: the log line names what ended the stream.
    if (!clientGone) ctx.exchange.logFields = { ...ctx.exchange.logFields, error: error.wireCode ?? error.code };
    sse.hold();
    usage ??= await countUsage(request.messages, generated()).catch(() => NO_USAGE);
    // One request, one delivery: what failed after its delivery was recorded (the Responses API storing the
    // response, in `out.end`) recorded a second one, under another delivery id and another status.
    // Recorded before the end is stored, as a finished stream's is (the client gets nothing before `sse.end`); an
    // output that stores its end with its audit (`recordsAudit`, a background response) records it there instead.
    const failed = outcome(statusCode, usage);
    if (!recorded && !out.recordsAudit) await recordFailure(ctx, failed);
    if (!clientGone) await out.fail(error, usage, failed);
    // What was generated before the client left is kept as the output keeps it (a stored response), and audited.
    if (clientGone) await Promise.resolve(out.abandoned?.(usage, failed)).catch(() => undefined);
  } finally {
    sse.end();
  }
}

/** Logprobs with at least one token (`content` or `refusal`). */
function hasTokenLogprobs(logprobs: unknown): boolean {
  if (typeof logprobs !== 'object' || logprobs === null) return false;
  const { content, refusal } = logprobs as { content?: unknown; refusal?: unknown };
  return (Array.isArray(content) && content.length > 0) || (Array.isArray(refusal) && refusal.length > 0);
}
