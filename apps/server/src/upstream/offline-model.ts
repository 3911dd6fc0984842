import { randomBytes } from 'node:crypto';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { countTokensBounded, decodeGenerator, encodeBounded, loadTokenizer } from '../tokens/tokenizer.js';
import { pace, turns } from '../turns.js';
import { messageText, type ChatCompletionChunk, type FinishReason, type ToolCall, type Usage } from '@svc/protocol';
import { ApiError } from '../http/errors.js';
import { SchemaBoundsError, sampleFromSchema, type JsonSchema, type SampleHints } from './json-schema.js';
import { contentWords, rankPassages, splitSentences, terms, type Passage, type RankedPassage } from './sentence-ranker.js';
import { isRecord } from '../is-record.js';
import type { CallSignal, ChunkStream, Upstream, UpstreamBody, UpstreamCompletion, UpstreamRequest } from './upstream.js';

/** Shown when there is nothing to answer from. */
export const NO_SOURCE_ANSWER =
  "I am svc's built-in offline model, and I answer only from source text, but this request has none. " +
  'Put the document to answer from in a system message (or paste it into your message) and ask again, ' +
  'or connect a real model by starting the server with SVC_UPSTREAM_BASE_URL (and SVC_UPSTREAM_API_KEY) set, ' +
  'e.g. SVC_UPSTREAM_BASE_URL=https://api.openai.com/v1.';

/** Sentences quoted in an answer, at most. */
const MAX_SENTENCES = 3;
/** A sentence joins the answer when it scores at least this share of the best one. */
const RELATIVE_CUTOFF = 0.6;
/** A last user message this long (in words) also counts as a source: a pasted document. */
const PASTED_DOCUMENT_WORDS = 40;
/**
 * Characters of the conversation the offline model reads: the last user message first (its beginning and its
 * end, where the question usually is), then the sources in order, until this many; the rest is ignored, as past
 * a model's context window. Ranking runs in one go, in time that grows with the characters read: the bound
 * keeps one request from holding the event loop, however large its messages.
 */
export const MAX_READ_CHARS = 16 * 1024;
/** Stream chunks between yields to the event loop. */
const CHUNKS_PER_TICK = 32;

interface Plan {
  content: string | null;
  reasoning: string | null;
  /** Calls without ids; each choice gets fresh ids. `custom`: a custom tool's call, whose `arguments` are its free-text input. */
  toolCalls: Array<{ name: string; arguments: string; custom?: true }>;
}

interface GeneratedChoice {
  /** Token ids per part, so streaming pieces and usage agree with what was generated. */
  reasoningTokens: number[];
  contentTokens: number[] | null;
  toolCalls: Array<ToolCall & { tokens: number[] }>;
  finishReason: FinishReason;
}

/**
 * The built-in offline model (used when SVC_UPSTREAM_BASE_URL is unset): deterministic and extractive.
 *
 * - It answers the last user message with the 1–3 sentences of the sources that match it best (BM25),
 *   quoted verbatim in document order. Sources: every system, developer and tool message, earlier user
 *   messages, and the last user message itself when it is long (a pasted document; its questions are the
 *   query). "Summarise…" questions get the document's first sentences. With no source it says so and how to
 *   give one or connect a real model; when nothing matches it says the sources do not cover the question.
 * - Tools: `tool_choice` naming a function → a call to it; `"required"` → a call to the best-matching tool
 *   (one call per clearly matching tool when `parallel_tool_calls` is not false); `"auto"` (or unset with
 *   tools) → a call only when the last message is the user's, no source sentence matches the question and a
 *   tool's name or description does; otherwise text. Arguments are generated from the tool's JSON Schema
 *   (so they validate) and filled from the question where a field's name suggests it.
 * - `thinking` adds `reasoning_content` explaining which passages were picked and why.
 * - `max_completion_tokens`/`max_tokens` (o200k_base tokens, reasoning included) cut the output with
 *   `finish_reason: "length"`; `stop` cuts the text before the first stop sequence. `n` gives n choices.
 * - `response_format`: `json_object` → `{"answer": "<the answer>"}`; `json_schema` → a value valid against the
 *   schema, built like tool arguments (so `parse()`/`generateObject`/`withStructuredOutput` work offline).
 * - `logprobs: true` is refused (400 `invalid_value`, param `logprobs`): there are no probabilities to report.
 *
 * @example
 * const model = createOfflineModel();
 * const completion = await model.complete({
 *   body: { model: 'offline', messages: [{ role: 'system', content: doc }, { role: 'user', content: 'When was it founded?' }] },
 *   signal: new AbortController().signal,
 *   thinking: false,
 * });
 */
export function createOfflineModel(): Upstream {
  const fills = fillQueue();
  return {
    async complete({ body, signal, thinking }: UpstreamRequest): Promise<UpstreamCompletion> {
      await loadTokenizer();
      signal.throwIfAborted();
      const { choices, usage } = await generate(body, thinking, fills);
      return {
        id: `chatcmpl-${randomId()}`,
        created: Math.floor(Date.now() / 1000),
        choices: choices.map((choice, index) => {
          const message: UpstreamCompletion['choices'][number]['message'] = {
            role: 'assistant',
            content: choice.contentTokens ? decodeAll(choice.contentTokens) : null,
            refusal: null,
          };
          if (choice.reasoningTokens.length > 0) message.reasoning_content = decodeAll(choice.reasoningTokens);
          if (choice.toolCalls.length > 0) message.tool_calls = choice.toolCalls.map(({ tokens: _tokens, ...call }) => call);
          return { index, message, finish_reason: choice.finishReason, logprobs: null };
        }),
        usage,
        system_fingerprint: 'svc-offline',
      };
    },

    async stream({ body, signal, thinking }: UpstreamRequest): Promise<ChunkStream> {
      await loadTokenizer();
      signal.throwIfAborted();
      const generated = await generate(body, thinking, fills);
      const includeUsage = isRecord(body.stream_options) && body.stream_options.include_usage === true;
      return oneByOne(streamChunks(generated, body.model, includeUsage, signal));
    },

    async close(): Promise<void> {},
  };
}

/**
 * Plans the answer and encodes it. Encoding and counting go through the bounded tokenizer calls, which yield
 * to the event loop: a 10 MiB message or 3 MB of white space does not hold up other requests.
 */
async function generate(body: UpstreamBody, thinking: boolean, fills: FillQueue): Promise<{ choices: GeneratedChoice[]; usage: Usage }> {
  // Planning a large conversation takes tens of ms: a turn of its own, not the one that read the request.
  await yieldToEventLoop();
  if (body.logprobs === true) {
    // Deterministic extraction has no token distribution to report: a clear refusal, not made-up numbers.
    throw new ApiError(
      'invalid_value',
      "The built-in offline model does not produce log probabilities: send 'logprobs' only when svc is connected to a real model (SVC_UPSTREAM_BASE_URL).",
      { param: 'logprobs' },
    );
  }
  const plan = await planAnswer(body, thinking, turns(), fills);
  const limit = firstPositiveInt(body.max_completion_tokens, body.max_tokens) ?? Infinity;
  const stops = (typeof body.stop === 'string' ? [body.stop] : Array.isArray(body.stop) ? body.stop : []).filter(
    (s): s is string => typeof s === 'string' && s.length > 0,
  );
  const n = firstPositiveInt(body.n) ?? 1;
  const choices: GeneratedChoice[] = [];
  for (let i = 0; i < n; i++) choices.push(await budget(plan, limit, stops));
  const completionTokens = choices.reduce(
    (sum, c) => sum + c.reasoningTokens.length + (c.contentTokens?.length ?? 0) + c.toolCalls.reduce((s, t) => s + t.tokens.length, 0),
    0,
  );
  const reasoningTokens = choices.reduce((sum, c) => sum + c.reasoningTokens.length, 0);
  const promptTokens = await countPromptTokens(body);
  const usage: Usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  if (thinking) usage.completion_tokens_details = { reasoning_tokens: reasoningTokens };
  return { choices, usage };
}

/** Spends the token budget on reasoning first, then on the answer, like reasoning models do. */
async function budget(plan: Plan, limit: number, stops: string[]): Promise<GeneratedChoice> {
  let remaining = limit;
  let truncated = false;
  /** The tokens of `text` that fit in what is left of the budget; encodes no further than that. */
  const take = async (text: string): Promise<number[]> => {
    const { tokens, truncated: cut } = await encodeBounded(text, Math.max(0, remaining));
    remaining -= tokens.length;
    if (cut) {
      truncated = true;
      remaining = 0;
    }
    return tokens;
  };
  const reasoningTokens = plan.reasoning ? await take(plan.reasoning) : [];
  if (plan.toolCalls.length > 0) {
    const toolCalls: GeneratedChoice['toolCalls'] = [];
    for (const call of plan.toolCalls) {
      if (remaining <= 0 && truncated) break;
      const tokens = await take(call.arguments);
      const id = `call_${randomId()}`;
      toolCalls.push(
        call.custom
          ? { id, type: 'custom', custom: { name: call.name, input: decodeAll(tokens) }, tokens }
          : { id, type: 'function', function: { name: call.name, arguments: decodeAll(tokens) }, tokens },
      );
    }
    return { reasoningTokens, contentTokens: null, toolCalls, finishReason: truncated ? 'length' : 'tool_calls' };
  }
  let content = plan.content ?? '';
  for (const stop of stops) {
    const at = content.indexOf(stop);
    if (at !== -1) {
      content = content.slice(0, at);
    }
  }
  const contentTokens = await take(content);
  return { reasoningTokens, contentTokens, toolCalls: [], finishReason: truncated ? 'length' : 'stop' };
}

/** Reading the sources, ranking their sentences and writing the answer each take a turn when the one before did. */
async function planAnswer(body: UpstreamBody, thinking: boolean, turn: () => boolean, fills: FillQueue): Promise<Plan> {
  const messages = (Array.isArray(body.messages) ? body.messages : []).filter(isRecord);
  const lastUserIndex = messages.map((m) => m.role).lastIndexOf('user');
  let unread = MAX_READ_CHARS;
  const read = (text: string): string => {
    const kept = text.length <= unread ? text : text.slice(0, unread);
    unread -= kept.length;
    return kept;
  };
  const lastUserText = lastUserIndex === -1 ? '' : read(headAndTail(messageText(messages[lastUserIndex]!.content), MAX_READ_CHARS));
  const { question, pasted } = splitQuestion(lastUserText);

  // A pass over every message and every source, in the request's turns: 250,000 messages are not read in one step.
  const sources: string[] = [];
  for (let i = 0; i < messages.length && unread > 0; i++) {
    const message = messages[i]!;
    if (['system', 'developer', 'tool', 'function'].includes(String(message.role)) || (message.role === 'user' && i !== lastUserIndex)) {
      const text = read(messageText(message.content));
      if (text.trim()) sources.push(text);
    }
    if (turn()) await yieldToEventLoop();
  }
  if (pasted) sources.push(pasted);

  const passages: Passage[] = [];
  for (const [source, text] of sources.entries()) {
    for (const sentence of splitSentences(text)) passages.push({ text: sentence, source, position: passages.length });
    if (turn()) await yieldToEventLoop();
  }
  const candidates = passages.filter((p) => p.text.split(/\s+/).length >= 4);
  const pool = candidates.length > 0 ? candidates : passages;
  await pace(turn);
  const ranked = rankPassages(question, pool);
  await pace(turn);

  const tools = functionTools(body.tools);
  const toolChoice = body.tool_choice;
  const lastIsUser = messages.length > 0 && messages[messages.length - 1]!.role === 'user';
  const parallel = body.parallel_tool_calls !== false;
  let calledTools: FunctionToolDef[] = [];
  let toolWhy = '';
  // A custom tool named by tool_choice is called with the question as its input: free text is all it takes.
  const forcedCustom = isRecord(toolChoice) && toolChoice.type === 'custom' && isRecord(toolChoice.custom) ? toolChoice.custom.name : undefined;
  if (typeof forcedCustom === 'string') {
    const input = question || lastUserText;
    const reasoning = thinking ? `tool_choice names the custom tool "${forcedCustom}", so I call it with the question as its input.` : null;
    return { content: null, reasoning, toolCalls: [{ name: forcedCustom, arguments: input, custom: true }] };
  }
  if (tools.length > 0 && toolChoice !== 'none') {
    if (isRecord(toolChoice) && isRecord(toolChoice.function) && typeof toolChoice.function.name === 'string') {
      const name = toolChoice.function.name;
      calledTools = [tools.find((t) => t.name === name) ?? { name, description: '', parameters: {} }];
      toolWhy = `tool_choice names the function "${name}", so I call it.`;
    } else if (toolChoice === 'required') {
      calledTools = matchTools(question, tools, parallel, true);
      toolWhy = `tool_choice is "required", so I call the tool${calledTools.length > 1 ? 's' : ''} whose name and description best match the question.`;
    } else if (lastIsUser && ranked.length === 0) {
      calledTools = matchTools(question, tools, parallel, false);
      toolWhy = 'No source sentence answers the question, but a tool matches it, so I call the tool instead of answering.';
    }
  }

  if (calledTools.length > 0) {
    const hints = sampleHints(question || lastUserText);
    const toolCalls: Array<{ name: string; arguments: string }> = [];
    for (const [i, tool] of calledTools.entries()) {
      const filled = await fills(() => fillParameters(body.tools, tool, { ...hints, nameOffset: i }));
      toolCalls.push({ name: tool.name, arguments: JSON.stringify(filled ?? {}) });
    }
    const reasoning = thinking
      ? `${toolWhy} ${toolCalls.map((c) => `${c.name} gets ${c.arguments}, built from its JSON Schema with values taken from the question where a field's name asks for them.`).join(' ')}`
      : null;
    return { content: null, reasoning, toolCalls };
  }

  // Named as the user wrote them: a stem ("franc") is no word to show.
  const questionTerms = [...new Set(contentWords(question))];
  let content: string;
  let reasoning: string;
  /** Whether `content` is quoted from the sources (then its names and numbers may fill a schema's fields). */
  let quoted = false;
  if (passages.length === 0) {
    content = NO_SOURCE_ANSWER;
    reasoning = 'There is no system, developer or tool message and no pasted document to draw on, so I cannot answer from a source and say so instead of guessing.';
  } else if (/\b(summar|tl;?dr|overview|gist|what is (this|the) (document|text|article) about)/i.test(question)) {
    const lead = leadSentences(pool, sources);
    content = lead.map((p) => p.text).join(' ');
    quoted = true;
    reasoning = `The question asks for a summary, so I quote the first ${lead.length} sentence${lead.length > 1 ? 's' : ''} of the longest source verbatim; a document's opening usually states its subject.`;
  } else if (questionTerms.length === 0) {
    content = 'Ask a question about the provided sources, and I will answer with the sentences from them that match it best.';
    reasoning = 'The last user message has no content words to search the sources for, so I ask for a question.';
  } else if (ranked.length === 0) {
    content = `The provided sources do not mention ${formatList(questionTerms.slice(0, 5))}, so I cannot answer that from them.`;
    reasoning = `I searched ${pool.length} sentence${pool.length > 1 ? 's' : ''} from ${sources.length} source${sources.length > 1 ? 's' : ''} for ${formatList(questionTerms)}; none contains any of these terms, so I say so instead of guessing.`;
  } else {
    const picked = pickPassages(ranked);
    content = picked.map((p) => p.text).join(' ');
    quoted = true;
    reasoning =
      `The question is about ${formatList(questionTerms)}. I ranked ${pool.length} sentence${pool.length > 1 ? 's' : ''} from ${sources.length} source${sources.length > 1 ? 's' : ''} with BM25 against these terms. ` +
      picked.map((p, i) => `Passage ${i + 1} (score ${p.score.toFixed(2)}) matches ${formatList(p.matched)}: "${clip(p.text, 80)}"`).join(' ') +
      ` I quote ${picked.length > 1 ? 'these sentences' : 'this sentence'} verbatim, in document order, so that every statement stays grounded in the sources.`;
  }
  const format = structuredFormat(body.response_format);
  if (format) {
    // A field asking for a number or a name takes the question's first, then the answer's: "How tall is the
    // tower?" fills `height` with the 330 of the sentence that answers it, as a model would.
    const hints = quoted ? withAnswer(sampleHints(question || lastUserText), sampleHints(content)) : sampleHints(question || lastUserText);
    const json = await fills(() => structuredContent(format, content, hints));
    reasoning += ` The request asks for ${format.kind === 'json_schema' ? 'JSON matching its schema' : 'a JSON object'}, so I answer with ${format.kind === 'json_schema' ? 'a value built from that schema, filled from the question where a field asks for it' : 'the answer under "answer"'}.`;
    return { content: json, reasoning: thinking ? reasoning : null, toolCalls: [] };
  }
  return { content, reasoning: thinking ? reasoning : null, toolCalls: [] };
}

type StructuredFormat = { kind: 'json_object' } | { kind: 'json_schema'; schema: JsonSchema };

/** Runs a schema fill in its turn (`fillQueue`). */
type FillQueue = <T>(fill: () => T) => Promise<T>;

/**
 * Runs each fill in an event-loop iteration of its own, after every fill queued before it. One schema fill is a
 * synchronous step of up to ~40 ms (its pattern tests' budget, a 20,000-value enum's lookup table); requests
 * that arrive together would otherwise take theirs back to back in one phase of the loop, and every other
 * request would wait their sum. A setImmediate queued while the loop runs immediates waits for the next
 * iteration, so other requests' socket reads come between two fills. One queue per model (per server).
 */
function fillQueue(): FillQueue {
  /** Settled when the fill queued last has run. */
  let queued: Promise<unknown> = Promise.resolve();
  return (fill) => {
    const mine = queued.then(async () => {
      await yieldToEventLoop();
      return fill();
    });
    queued = mine.catch(() => undefined);
    return mine;
  };
}

/** `response_format` asking for JSON, or null (absent, `text`, or a shape the offline model does not know). */
function structuredFormat(value: unknown): StructuredFormat | null {
  if (!isRecord(value)) return null;
  if (value.type === 'json_object') return { kind: 'json_object' };
  if (value.type === 'json_schema' && isRecord(value.json_schema)) {
    return { kind: 'json_schema', schema: isRecord(value.json_schema.schema) ? value.json_schema.schema : {} };
  }
  return null;
}

/**
 * The answer as `response_format` asks: `json_object` → `{"answer": <the extractive answer>}`; `json_schema` →
 * a value valid against the schema (the same filler as tool arguments), filled from the question.
 */
function structuredContent(format: StructuredFormat, answer: string, hints: SampleHints): string {
  if (format.kind === 'json_object') return JSON.stringify({ answer });
  return JSON.stringify(fillSchema(format.schema, hints, 'the response_format schema', () => 'response_format') ?? null);
}

/** Arguments for `tool` from its JSON Schema; a schema the filler cannot fill names the tool's parameters. */
function fillParameters(tools: unknown, tool: FunctionToolDef, hints: SampleHints): unknown {
  return fillSchema(tool.parameters, hints, `the parameters of tool '${tool.name}'`, () => {
    const index = Array.isArray(tools) ? tools.findIndex((t) => isRecord(t) && isRecord(t.function) && t.function.name === tool.name) : -1;
    return index === -1 ? 'tool_choice' : `tools[${index}].function.parameters`;
  });
}

/**
 * A value for `schema`. A schema past the filler's bounds (SCHEMA_BOUNDS: a 10,000 character string, 1,000
 * items, 1 M characters in all, 200,000 steps, 64 levels) is the request's mistake: 400 `invalid_value` on
 * `param()`, saying which bound `what` exceeds.
 */
function fillSchema(schema: JsonSchema, hints: SampleHints, what: string, param: () => string): unknown {
  try {
    return sampleFromSchema(schema, hints);
  } catch (err) {
    if (!(err instanceof SchemaBoundsError)) throw err;
    throw new ApiError('invalid_value', `The offline model cannot fill ${what}: ${err.message}.`, { param: param() });
  }
}

/** `text`, or its first and last `max / 2` characters when longer. */
function headAndTail(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max / 2 - 1)}\n${text.slice(text.length - max / 2)}`;
}

/** The query of the last user message, and the rest of it when it is long enough to be a pasted document. */
function splitQuestion(text: string): { question: string; pasted: string | null } {
  const words = text.split(/\s+/).filter(Boolean).length;
  if (words < PASTED_DOCUMENT_WORDS) return { question: text, pasted: null };
  const sentences = splitSentences(text);
  const questions = sentences.filter((s) => s.trim().endsWith('?'));
  const query = questions.length > 0 ? questions : sentences.slice(-1);
  const rest = sentences.filter((s) => !query.includes(s));
  return { question: query.join(' '), pasted: rest.length > 0 ? rest.join('\n') : null };
}

function pickPassages(ranked: RankedPassage[]): RankedPassage[] {
  const best = ranked[0]!.score;
  const picked: RankedPassage[] = [];
  const seen = new Set<string>();
  for (const passage of ranked) {
    if (picked.length >= MAX_SENTENCES || passage.score < best * RELATIVE_CUTOFF) break;
    const key = passage.text.toLowerCase();
    if (seen.has(key)) continue;
    seen.add(key);
    picked.push(passage);
  }
  return picked.sort((a, b) => a.position - b.position);
}

function leadSentences(pool: Passage[], sources: string[]): Passage[] {
  const longest = sources.reduce((best, text, i) => (text.length > (sources[best]?.length ?? -1) ? i : best), 0);
  const lead = pool.filter((p) => p.source === longest).slice(0, MAX_SENTENCES);
  return lead.length > 0 ? lead : pool.slice(0, MAX_SENTENCES);
}

interface FunctionToolDef {
  name: string;
  description: string;
  parameters: JsonSchema;
}

function functionTools(value: unknown): FunctionToolDef[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((tool) => {
    if (!isRecord(tool) || !isRecord(tool.function) || typeof tool.function.name !== 'string') return [];
    const { name, description, parameters } = tool.function;
    return [{ name, description: typeof description === 'string' ? description : '', parameters: isRecord(parameters) ? parameters : {} }];
  });
}

/**
 * Tools ranked by the question's terms in their name (weight 2) and description and parameter names (1).
 * `required`: the best tool even at score 0; parallel: also every tool with a name match or half the best score.
 * Calls are ordered by where their first matching term appears in the question.
 */
function matchTools(question: string, tools: FunctionToolDef[], parallel: boolean, required: boolean): FunctionToolDef[] {
  const questionTerms = terms(question);
  const scored = tools.map((tool, order) => {
    const nameTerms = new Set(terms(tool.name.replace(/[_-]+/g, ' ').replace(/([a-z0-9])([A-Z])/g, '$1 $2')));
    const properties = isRecord(tool.parameters.properties) ? tool.parameters.properties : {};
    const propertyText = Object.entries(properties)
      .map(([key, sub]) => `${key.replace(/[_-]+/g, ' ')} ${isRecord(sub) && typeof sub.description === 'string' ? sub.description : ''}`)
      .join(' ');
    const otherTerms = new Set(terms(`${tool.description} ${propertyText}`));
    let score = 0;
    let firstAt = Infinity;
    for (const [i, term] of questionTerms.entries()) {
      const weight = nameTerms.has(term) ? 2 : otherTerms.has(term) ? 1 : 0;
      if (weight > 0 && firstAt === Infinity) firstAt = i;
      score += weight;
    }
    return { tool, score, firstAt, order };
  });
  const best = Math.max(...scored.map((s) => s.score));
  if (best <= 0) return required ? [tools[0]!] : [];
  const chosen = scored
    .filter((s) => s.score === best || (s.score >= 2 && s.score >= best / 2))
    .sort((a, b) => b.score - a.score || a.firstAt - b.firstAt || a.order - b.order)
    .slice(0, parallel ? tools.length : 1);
  return chosen.sort((a, b) => a.firstAt - b.firstAt || a.order - b.order).map((s) => s.tool);
}

function sampleHints(question: string): SampleHints {
  const names: string[] = [];
  const sentenceStarts: string[] = [];
  for (const match of question.matchAll(/\p{Lu}[\p{L}\p{M}'’.-]*(?:\s+(?:of\s+|de\s+)?\p{Lu}[\p{L}\p{M}'’.-]*)*/gu)) {
    const phrase = match[0].replace(/['’]s$/, '').replace(/[.]+$/, '');
    const words = phrase.split(/\s+/);
    // Drop capitalised function words ("What", "Is", "I") that only start a sentence.
    while (words.length > 0 && terms(words[0]!).length === 0) words.shift();
    const name = words.join(' ');
    if (!name || names.includes(name) || sentenceStarts.includes(name)) continue;
    // A single capitalised word opening a sentence ("Weather in Paris?") is probably not a name: use it last.
    const atSentenceStart = /(^|[.!?]\s+)$/.test(question.slice(0, match.index));
    if (atSentenceStart && words.length === 1 && phrase === name) sentenceStarts.push(name);
    else names.push(name);
  }
  names.push(...sentenceStarts);
  // The first hundred (a pasted table is not read number by number: each numeric field looks at them all).
  const found: RegExpExecArray[] = [];
  for (const m of question.matchAll(/-?\d+(?:\.\d+)?/g)) if (found.push(m) === 100) break;
  const numbers = found.map((m) => Number(m[0]));
  // Three words each side of the number, within its sentence.
  const numberWords = found.map((m) => {
    const before = question.slice(0, m.index).split(/[.!?]\s/).at(-1)!.toLowerCase().match(/\p{L}+/gu) ?? [];
    const after = question.slice(m.index + m[0].length).split(/[.!?]\s/)[0]!.toLowerCase().match(/\p{L}+/gu) ?? [];
    return [...before.slice(-3), ...after.slice(0, 3)];
  });
  return { question, names, numbers, numberWords, keywords: [...new Set(contentWords(question))] };
}

function mergedNumbers(asked: SampleHints, answer: SampleHints): Pick<SampleHints, 'numbers' | 'numberWords'> {
  const fresh = answer.numbers.map((n, i) => i).filter((i) => !asked.numbers.includes(answer.numbers[i]!));
  return {
    numbers: [...asked.numbers, ...fresh.map((i) => answer.numbers[i]!)],
    numberWords: [...(asked.numberWords ?? []), ...fresh.map((i) => answer.numberWords?.[i] ?? [])],
  };
}

/** `asked`'s hints, then the names and numbers of the answer quoted from the sources that `asked` lacks. */
function withAnswer(asked: SampleHints, answer: SampleHints): SampleHints {
  return {
    ...asked,
    names: [...new Set([...asked.names, ...answer.names])],
    ...mergedNumbers(asked, answer),
  };
}

/**
 * Each chunk as a batch of its own (the offline model paces its chunks itself). A handler that fails ends the
 * loop, and with it the generator.
 */
function oneByOne(chunks: AsyncGenerator<ChatCompletionChunk>): ChunkStream {
  let taken = false;
  return {
    async each(handler) {
      taken = true;
      for await (const chunk of chunks) {
        const behind = handler([chunk]);
        if (behind) await behind;
      }
    },
    cancel() {
      if (taken) return;
      taken = true;
      chunks.return(undefined).catch(() => {});
    },
  };
}

async function* streamChunks(
  generated: { choices: GeneratedChoice[]; usage: Usage },
  model: string,
  includeUsage: boolean,
  signal: CallSignal,
): AsyncGenerator<ChatCompletionChunk> {
  const id = `chatcmpl-${randomId()}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (index: number, delta: ChatCompletionChunk['choices'][number]['delta'], finish: FinishReason | null = null): ChatCompletionChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    system_fingerprint: 'svc-offline',
    choices: [{ index, delta, logprobs: null, finish_reason: finish }],
  });
  let sent = 0;
  const pace = async (): Promise<void> => {
    signal.throwIfAborted();
    if (++sent % CHUNKS_PER_TICK === 0) {
      await yieldToEventLoop();
      signal.throwIfAborted();
    }
  };

  for (const [index, choice] of generated.choices.entries()) {
    await pace();
    yield chunk(index, { role: 'assistant', content: '', refusal: null });
    for (const piece of tokenPieces(choice.reasoningTokens)) {
      await pace();
      yield chunk(index, { reasoning_content: piece });
    }
    if (choice.contentTokens) {
      for (const piece of tokenPieces(choice.contentTokens)) {
        await pace();
        yield chunk(index, { content: piece });
      }
    }
    for (const [callIndex, call] of choice.toolCalls.entries()) {
      await pace();
      // As OpenAI streams each kind: a custom call's input in `custom.input` pieces, a function's arguments in `function.arguments`.
      const custom = call.type === 'custom';
      const opened = custom ? { custom: { name: call.custom.name, input: '' } } : { function: { name: call.function.name, arguments: '' } };
      yield chunk(index, { tool_calls: [{ index: callIndex, id: call.id, type: call.type, ...opened }] });
      for (const piece of tokenPieces(call.tokens)) {
        await pace();
        yield chunk(index, { tool_calls: [{ index: callIndex, ...(custom ? { custom: { input: piece } } : { function: { arguments: piece } }) }] });
      }
    }
    await pace();
    yield chunk(index, {}, choice.finishReason);
  }
  if (includeUsage) {
    await pace();
    yield { id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'svc-offline', choices: [], usage: generated.usage };
  }
}

/** Text pieces of 1, 2, 3, 1, 2, 3… tokens; multi-byte characters split across tokens stay whole. */
function* tokenPieces(tokens: number[]): Generator<string> {
  let piece = '';
  let count = 0;
  let size = 1;
  for (const text of decodeGenerator(tokens)) {
    piece += text;
    if (++count >= size) {
      yield piece;
      piece = '';
      count = 0;
      size = (size % 3) + 1;
    }
  }
  if (piece) yield piece;
}

function decodeAll(tokens: number[]): string {
  let text = '';
  for (const piece of decodeGenerator(tokens)) text += piece;
  return text;
}

/** Roughly OpenAI's chat accounting: each message's role and text, 3 tokens of framing each, 3 for the reply. */
async function countPromptTokens(body: UpstreamBody): Promise<number> {
  let total = 3;
  const turn = turns();
  for (const message of Array.isArray(body.messages) ? body.messages : []) {
    if (!isRecord(message)) continue;
    total += 3 + (await countTokensBounded(String(message.role ?? ''), turn)) + (await countTokensBounded(messageText(message.content), turn));
    if (Array.isArray(message.tool_calls)) total += await countTokensBounded(JSON.stringify(message.tool_calls), turn);
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) total += await countTokensBounded(JSON.stringify(body.tools), turn);
  return total;
}

function firstPositiveInt(...values: unknown[]): number | undefined {
  for (const value of values) if (typeof value === 'number' && Number.isInteger(value) && value > 0) return value;
  return undefined;
}

function formatList(items: string[]): string {
  const quoted = items.map((item) => `"${item}"`);
  return quoted.length <= 1 ? (quoted[0] ?? '') : `${quoted.slice(0, -1).join(', ')} and ${quoted.at(-1)}`;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`;
}

function randomId(): string {
  return randomBytes(18).toString('base64url');
}
