import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD, hasCjk, jsonValuesText, mergeJudgeSpans, SourceIndexCache, type ClaimResult } from '@svc/grounding';
import type { Claim, SvcResult } from '@svc/protocol';
import type { Logger } from 'pino';
import type { Upstream, UpstreamBody } from '../upstream/upstream.js';
import { GroundingThread } from './grounding-thread.js';
import { groundingSourceMessages, groundingSources, lastUserIndex, lastUserText, unreadableSourceParts } from './prompt.js';

export interface GroundingRequest {
  messages: unknown;
  answer: string;
  /** `svc.dehallucinate` as requested (default true). */
  requested: boolean;
  /**
   * The JSON Schema the answer was asked to follow (`response_format` `json_schema`, the Responses API's
   * `text.format`): the values it constrains to a choice are not claims (see `jsonValuesText`).
   */
  schema?: unknown;
  signal?: AbortSignal;
}

/** Produces the response's `svc` object (design §3). */
export interface Grounder {
  check(request: GroundingRequest): Promise<SvcResult>;
}

export function notChecked(requested: boolean): SvcResult {
  return { dehallucinate_requested: requested, grounded: true, score: 1, flagged_spans: [], checked: false };
}

/** Checks of inputs larger than this (UTF-16 units of sources and answer) run on the grounding thread. */
export const INLINE_GROUNDING_CHARS = 32_000;
/**
 * Checks of answers longer than this run on the grounding thread whatever the sources' size: the check's cost
 * grows mostly with the answer's claims (a 16 KB answer against 2 KB of sources is about 20 ms, 2 KB about 3 ms),
 * and inline that is a stall of every other stream.
 */
export const INLINE_ANSWER_CHARS = 2_000;
/**
 * Checks of Chinese or Japanese text larger than this run on the thread: its words are found by ICU's segmenter,
 * about 1 µs a character, so 32,000 characters inline would hold the loop ~50 ms (8,000: ~25 ms).
 */
export const INLINE_CJK_CHARS = 2_000;

export interface OfflineGrounderOptions {
  /** Scores below it are not grounded (SVC_GROUNDING_THRESHOLD); defaults to the check's own. */
  threshold?: number;
  /** Where large inputs are checked; null checks everything inline. Defaults to the thread beside the build. */
  thread?: GroundingThread | null;
}

/**
 * The offline check of `@svc/grounding`: runs when requested, the answer has text and there is a source. Large
 * inputs are checked on a worker thread when the build has one (`thread`), so they never stall other requests.
 *
 * @example
 * const grounder = createOfflineGrounder({ threshold: config.groundingThreshold });
 */
export function createOfflineGrounder(options: OfflineGrounderOptions = {}): Grounder {
  const thread = options.thread === undefined ? GroundingThread.beside(import.meta.url) : (options.thread ?? undefined);
  const threshold = options.threshold ?? DEFAULT_GROUNDING_THRESHOLD;
  // System prompts repeat across requests: their index is built once (same result, a fraction of the CPU).
  const sourceIndexCache = new SourceIndexCache();
  return {
    async check({ messages, answer, requested, schema }) {
      if (!requested) return notChecked(requested);
      // A JSON answer is checked by its values alone, at their offsets: span texts are then taken from the answer.
      // Values its schema makes a choice (`enum`, `const`) or the model's own confidence are not claims.
      const read = jsonValuesText(answer, schema);
      const checked = read ?? answer;
      if (checked.trim() === '') return notChecked(requested);
      // An image, a file or audio among the sources may hold what the answer says, and the check cannot read it.
      const unreadable = unreadableSourceParts(messages);
      const withUnreadable = (svc: SvcResult): SvcResult => (unreadable.length > 0 ? { ...svc, unreadable_parts: unreadable } : svc);
      const sources = groundingSourceMessages(messages);
      if (sources.texts.length === 0) return withUnreadable(notChecked(requested));
      // Asked only of them ("Describe this receipt." beside the image, no other text): nothing to check against.
      const asked = lastUserIndex(messages);
      if (unreadable.length > 0 && sources.messageIndex.every((i) => i === asked)) return withUnreadable(notChecked(requested));
      const input = { sources: sources.texts, answer: checked, question: lastUserText(messages) };
      let size = answer.length;
      for (const text of sources.texts) size += text.length;
      const large = size > INLINE_GROUNDING_CHARS || checked.length > INLINE_ANSWER_CHARS || (size > INLINE_CJK_CHARS && [checked, ...sources.texts].some(hasCjk));
      const result = thread && large ? await thread.check(input, threshold) : checkGrounding(input, { sourceIndexCache, threshold });
      if (!result.checked) return withUnreadable(notChecked(requested));
      const asAnswered = <T extends { start: number; end: number; text: string }>(span: T): T =>
        read === undefined ? span : { ...span, text: answer.slice(span.start, span.end) };
      if (unreadable.length > 0) {
        // Any claim the text does not back may come from the parts the check cannot read, so there is no verdict
        // (design §3: checked false, grounded true, score 1); each claim's evidence in the text is still reported.
        return withUnreadable({ ...notChecked(requested), claims: result.claims.map((c) => toClaim(asAnswered(c), sources.messageIndex)) });
      }
      return {
        dehallucinate_requested: true,
        grounded: result.grounded,
        score: result.score,
        flagged_spans: result.flaggedSpans.map(asAnswered),
        checked: true,
        claims: result.claims.map((c) => toClaim(asAnswered(c), sources.messageIndex)),
      };
    },
  };
}

/** A claim as the response carries it: evidence located by the message it is in. */
function toClaim(c: ClaimResult, messageIndex: readonly number[]): Claim {
  const e = c.evidence;
  return {
    start: c.start,
    end: c.end,
    text: c.text,
    score: c.score,
    grounded: c.grounded,
    evidence: e ? { message_index: messageIndex[e.source]!, start: e.start, end: e.end, text: e.text, score: e.score } : null,
  };
}

/** What the judge is told; the answer and sources follow in the user message. */
export const JUDGE_SYSTEM_PROMPT = [
  'You check whether an ANSWER is supported by SOURCES.',
  'List every phrase of the ANSWER that the SOURCES do not support: claims they do not state, contradict, or',
  'that add names, numbers, dates or details absent from them.',
  'Copy each phrase VERBATIM from the ANSWER: an exact substring, same spelling, case and punctuation, as short',
  'as possible while still containing the unsupported claim. Do not paraphrase, explain or quote the SOURCES.',
  'Reply with JSON only, exactly of the form {"unsupported": ["phrase", ...]}; use {"unsupported": []} when',
  'everything is supported.',
].join('\n');

/** Sources beyond this many characters are cut before they are sent to the judge. */
const JUDGE_MAX_SOURCE_CHARS = 60_000;
const JUDGE_MAX_TOKENS = 1024;

export interface JudgeGrounderOptions {
  upstream: Upstream;
  /** Upstream model that judges (usually `SVC_UPSTREAM_MODEL`). */
  model: string;
  /** The offline check; its result is kept when the judge fails. */
  offline: Grounder;
  /** The judge call is abandoned after this long and the offline result returned. Keep it well under the
   *  upstream timeout: a streamed answer's upstream exchange is still open while the judge runs. */
  timeoutMs: number;
  /** Warnings about failed judge calls go here (never prompts, answers or keys). */
  logger?: Pick<Logger, 'warn'>;
  /**
   * The offline check's threshold (SVC_GROUNDING_THRESHOLD): an answer the judge rejects scores below it.
   * Required, not defaulted, so that it cannot differ from the offline check's.
   */
  threshold: number;
}

/**
 * The offline check, then an LLM judge (the upstream model) asked for the verbatim unsupported phrases of
 * the answer; phrases that are exact substrings of the answer are merged in with `mergeJudgeSpans`.
 * Any failure of the judge (error, timeout, unparsable reply) leaves the offline result as it is.
 *
 * @example
 * const grounder = createJudgeGrounder({ upstream, model: 'gpt-4o-mini', offline: createOfflineGrounder({ threshold }), threshold, timeoutMs: 10_000 });
 */
export function createJudgeGrounder(options: JudgeGrounderOptions): Grounder {
  const { upstream, model, offline, timeoutMs, logger, threshold } = options;
  return {
    async check(request) {
      const result = await offline.check(request);
      // With sources the check cannot read, the judge (shown only their text) would flag what the model saw there.
      if (!result.checked || result.unreadable_parts) return result;
      const sources = groundingSources(request.messages);
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
      const started = Date.now();
      let phrases: string[];
      try {
        const completion = await withAbort(
          upstream.complete({ body: judgeBody(model, sources, request.answer), signal, thinking: false }),
          signal,
        );
        const parsed = parseJudgeReply(completion.choices[0]?.message.content ?? null);
        if (parsed === undefined) {
          logger?.warn({ ms: Date.now() - started }, 'grounding judge reply was not a JSON list of phrases; offline result kept');
          return result;
        }
        phrases = readPhrases(parsed, request.answer, request.schema);
      } catch (err) {
        const reason = timeout.aborted ? 'timeout' : err instanceof Error ? err.name : 'error';
        const code = typeof (err as { code?: unknown })?.code === 'string' ? (err as { code: string }).code : undefined;
        logger?.warn({ reason, code, ms: Date.now() - started }, 'grounding judge failed; offline result kept');
        return result;
      }
      const merged = mergeJudgeSpans(
        { checked: true, grounded: result.grounded, score: result.score, flaggedSpans: result.flagged_spans, claims: [] },
        request.answer,
        phrases,
        threshold,
      );
      return {
        dehallucinate_requested: result.dehallucinate_requested,
        grounded: merged.grounded,
        score: merged.score,
        flagged_spans: merged.flaggedSpans,
        checked: true,
        ...(result.claims ? { claims: result.claims } : {}),
      };
    },
  };
}

/**
 * The judge's phrases that say something the offline check reads: in a JSON answer, a phrase that is only a key,
 * a label its schema offers (`enum`, `const`) or the model's confidence (`jsonValuesText`) is dropped, as the
 * judge, shown no schema, would flag a faithful classification's "neutral" or 0.92.
 */
function readPhrases(phrases: string[], answer: string, schema: unknown): string[] {
  const read = jsonValuesText(answer, schema);
  if (read === undefined) return phrases;
  return phrases.filter((phrase) => {
    if (phrase === '') return false;
    for (let at = answer.indexOf(phrase); at >= 0; at = answer.indexOf(phrase, at + 1)) {
      if (/[\p{L}\p{N}]/u.test(read.slice(at, at + phrase.length))) return true;
    }
    return false;
  });
}

function judgeBody(model: string, sources: string[], answer: string): UpstreamBody {
  let budget = JUDGE_MAX_SOURCE_CHARS;
  const parts: string[] = [];
  for (const [i, source] of sources.entries()) {
    if (budget <= 0) break;
    const text = source.length > budget ? `${source.slice(0, budget)} …` : source;
    budget -= text.length;
    parts.push(`[source ${i + 1}]\n${text}`);
  }
  return {
    model,
    messages: [
      { role: 'system', content: JUDGE_SYSTEM_PROMPT },
      { role: 'user', content: `SOURCES:\n${parts.join('\n\n')}\n\nANSWER:\n${answer}` },
    ],
    temperature: 0,
    max_tokens: JUDGE_MAX_TOKENS,
    response_format: { type: 'json_object' },
    stream: false,
  };
}

/**
 * The phrases of a judge reply: `{"unsupported": [...]}`, any object holding one array of strings, or a
 * bare array — possibly inside a ```json fence or surrounded by prose. `undefined` when nothing parses.
 */
export function parseJudgeReply(content: string | null): string[] | undefined {
  if (content === null) return undefined;
  const text = content.trim();
  const candidates = [text];
  const fence = /```(?:json)?\s*([\s\S]*?)```/i.exec(text);
  if (fence?.[1]) candidates.push(fence[1].trim());
  const objStart = text.indexOf('{');
  const objEnd = text.lastIndexOf('}');
  if (objStart >= 0 && objEnd > objStart) candidates.push(text.slice(objStart, objEnd + 1));
  const arrStart = text.indexOf('[');
  const arrEnd = text.lastIndexOf(']');
  if (arrStart >= 0 && arrEnd > arrStart) candidates.push(text.slice(arrStart, arrEnd + 1));
  for (const candidate of candidates) {
    let value: unknown;
    try {
      value = JSON.parse(candidate);
    } catch {
      continue;
    }
    const phrases = phrasesOf(value);
    if (phrases !== undefined) return phrases;
  }
  return undefined;
}

function phrasesOf(value: unknown): string[] | undefined {
  if (Array.isArray(value)) {
    // Strings, or objects carrying the phrase ({"text": …} / {"span": …} / {"phrase": …}).
    const out: string[] = [];
    for (const item of value) {
      if (typeof item === 'string') out.push(item);
      else if (item && typeof item === 'object') {
        const o = item as Record<string, unknown>;
        const s = o.text ?? o.span ?? o.phrase ?? o.quote;
        if (typeof s === 'string') out.push(s);
      }
    }
    return out;
  }
  if (value && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    for (const key of ['unsupported', 'unsupported_spans', 'spans', 'phrases']) {
      if (key in o) return phrasesOf(o[key]);
    }
    const arrays = Object.values(o).filter(Array.isArray);
    if (arrays.length === 1) return phrasesOf(arrays[0]);
  }
  return undefined;
}

/** Rejects as soon as `signal` aborts, even if the upstream call ignores it. */
function withAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
