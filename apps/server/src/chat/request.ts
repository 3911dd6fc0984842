import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import {
  ChatCompletionRequestOuterSchema,
  ChatCompletionRequestSchema,
  ChatMessageSchema,
  DEFAULT_MAX_TOKENS,
  DEFAULT_TEMPERATURE,
  ToolSchema,
  toolName,
  type Tool,
  MAX_LOGIT_BIAS_ENTRIES,
  MAX_METADATA_PAIRS,
  SVC_MODEL,
  THINKING_TEMPERATURE,
  type ChatCompletionRequest,
} from '@svc/protocol';
import { z } from 'zod';
import { ApiError, quoted } from '../http/errors.js';
import type { UpstreamBody } from '../upstream/upstream.js';
import { type ThinkingSwitch, withThinkingSwitch } from '../upstream/hybrid-thinking.js';

/**
 * `messages[0].content` from a zod path. A key is the client's own where a field takes any keys (`metadata`, an
 * unknown key of `svc`): it is quoted cut, so a megabytes-long key does not make a megabytes-long `param`.
 */
export function formatParam(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : out ? `.${quoted(String(part))}` : quoted(String(part));
  return out;
}

/** Unknown keys an error names, at most; the rest are counted. */
const MAX_NAMED_KEYS = 5;

/** A value from the request as JSON, as an error message quotes it (`quoted`): a 1 MB role is not echoed whole. */
function quotedValue(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(quoted(value)) : quoted(jsonHead(value, QUOTED_JSON_CHARS));
}

/** More than `quoted` keeps, so that it still marks the cut with `…`. */
const QUOTED_JSON_CHARS = 256;

/**
 * The start of `value` as JSON, at least `max` characters of it where it is longer: what JSON.stringify gives,
 * without serialising a 10 MB array or object whole (or overflowing the stack on one nested a million deep)
 * to quote its first characters.
 *
 * @example
 * jsonHead({ a: [1, 2] }, 256) === '{"a":[1,2]}';
 */
export function jsonHead(value: unknown, max: number): string {
  let out = '';
  const visit = (v: unknown): void => {
    if (out.length > max) return;
    if (typeof v === 'string') out += JSON.stringify(head(v, max));
    else if (v === null || typeof v !== 'object') out += JSON.stringify(v) ?? 'null';
    else if (Array.isArray(v)) {
      out += '[';
      for (let i = 0; i < v.length && out.length <= max; i++) {
        if (i > 0) out += ',';
        visit(v[i]);
      }
      out += ']';
    } else {
      out += '{';
      let first = true;
      for (const key in v) {
        if (out.length > max) break;
        if (!Object.hasOwn(v, key)) continue;
        out += `${first ? '' : ','}${JSON.stringify(head(key, max))}:`;
        first = false;
        visit((v as Record<string, unknown>)[key]);
      }
      out += '}';
    }
  };
  visit(value);
  return out;
}

/** The first `max` characters of `text`, and the other half of a surrogate pair cut there (a lone half is escaped). */
function head(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max + 1 : max);
}

/** `'a', 'b' and 3 more`: the first keys, each quoted cut. */
function keyList(keys: readonly string[]): string {
  const named = keys.slice(0, MAX_NAMED_KEYS).map((k) => `'${quoted(k)}'`).join(', ');
  return keys.length > MAX_NAMED_KEYS ? `${named} and ${keys.length - MAX_NAMED_KEYS} more` : named;
}

function valueAt(root: unknown, path: ReadonlyArray<PropertyKey>): unknown {
  let value = root;
  for (const part of path) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<PropertyKey, unknown>)[part];
  }
  return value;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/** Maps the first zod issue onto design §4's codes, with `param` naming the offending field. */
function issueToError(issue: z.core.$ZodIssue, body: unknown): ApiError {
  const param = formatParam(issue.path);
  const value = valueAt(body, issue.path);
  if (issue.code === 'invalid_type' && value === undefined) {
    return new ApiError('missing_required_parameter', `Missing required parameter: '${param}'.`, { param });
  }
  if (issue.code === 'invalid_type' && typeof value === 'number' && !Number.isFinite(value)) {
    // JSON has no Infinity, but 1e999 parses to it: the type is right, the value is not.
    return new ApiError('invalid_value', `Invalid value for '${param}': the number is too large (it parses as Infinity); expected a finite number.`, { param });
  }
  if (issue.code === 'invalid_type') {
    return new ApiError('invalid_type', `Invalid type for '${param}': expected ${issue.expected}, but got ${describe(value)}.`, { param });
  }
  if (issue.code === 'invalid_union' && value !== undefined) {
    // A value none of whose alternatives even has the right type (e.g. content: 5) is a type error.
    const expected = issue.errors.map((branch) => branch.find((i) => i.code === 'invalid_type' && i.path.length === 0));
    if (expected.length > 0 && expected.every(Boolean)) {
      const names = expected.map((i) => (i as { expected: string }).expected).join(' or ');
      return new ApiError('invalid_type', `Invalid type for '${param}': expected ${names}, but got ${describe(value)}.`, { param });
    }
    // null for a field that is not nullable (tool_choice: null, as an ORM sends "unset") is a type error, as OpenAI
    // answers it, not "Invalid input": no alternative takes null, whatever their types.
    if (value === null) {
      const names = [...new Set(alternatives(issue).map((branch) => branchType(branch)))].join(' or ');
      return new ApiError('invalid_type', `Invalid type for '${param}': expected ${names}, but got null.`, { param });
    }
    // A value of exactly one alternative's type (content parts, a stop list, a tool_choice string) is judged
    // by that alternative: the answer names the field inside it, as OpenAI's does, not "Invalid input".
    const typed = issue.errors.filter((branch) => !branch.some((i) => i.code === 'invalid_type' && i.path.length === 0));
    if (typed.length === 1 && typed[0]!.length > 0) {
      return firstProblem(
        typed[0]!.map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] })),
        body,
      );
    }
  }
  const rolePath = issue.path[issue.path.length - 1] === 'role' ? issue.path.slice(0, -1) : issue.path;
  if (issue.code === 'invalid_union' && rolePath.length === 2 && rolePath[0] === 'messages') {
    const param = formatParam(rolePath);
    const role = (valueAt(body, rolePath) as { role?: unknown } | undefined)?.role;
    if (role === undefined) return new ApiError('missing_required_parameter', `Missing required parameter: '${param}.role'.`, { param: `${param}.role` });
    return new ApiError(
      'invalid_value',
      `Invalid value for '${param}.role': ${quotedValue(role)}. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.`,
      { param: `${param}.role` },
    );
  }
  if (issue.code === 'invalid_union' && isPlainObject(value)) return typedObjectProblem(issue, value, param, body);
  if ((issue.code === 'too_small' || issue.code === 'too_big') && value !== undefined) {
    const bound = boundProblem(issue, value, param);
    if (bound) return bound;
  }
  if (issue.code === 'unrecognized_keys') {
    const where = param ? `'${param}'` : 'the request';
    const first = issue.keys[0] === undefined ? null : quoted(issue.keys[0]);
    return new ApiError('invalid_value', `Unrecognized parameter(s) in ${where}: ${keyList(issue.keys)}.`, {
      param: param ? `${param}.${first}` : first,
    });
  }
  return new ApiError('invalid_value', `Invalid value for '${param || 'body'}': ${issue.message}.`, { param: param || null });
}

/**
 * An object none of a union's alternatives took, where the alternatives are told apart by `type` (a Responses
 * input item): judged by the one whose `type` it has (and that takes its keys), so the answer names the field
 * inside it, as OpenAI's does; a `type` none has is named with the supported ones. Else "Invalid input".
 */
function typedObjectProblem(issue: z.core.$ZodIssueInvalidUnion, value: object, param: string, body: unknown): ApiError {
  const onType = (i: z.core.$ZodIssue) => i.path.length === 1 && i.path[0] === 'type';
  const branches = alternatives(issue);
  // An alternative refusing the value itself (a string enum, an unknown key) is not one the object was meant for.
  const fits = branches.filter((branch) => !branch.some((i) => onType(i) || (i.path.length === 0 && i.code !== 'custom')));
  if (fits.length === 1 && fits[0]!.length > 0) {
    return firstProblem(
      fits[0]!.map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] })),
      body,
    );
  }
  const type = (value as { type?: unknown }).type;
  const supported = new Set(branches.flatMap((branch) => branch.flatMap((i) => (onType(i) && i.code === 'invalid_value' ? i.values : []))));
  if (fits.length === 0 && type !== undefined && supported.size > 0) {
    const names = [...supported].map((v) => `'${String(v)}'`).join(', ');
    return new ApiError('invalid_value', `Invalid value for '${param}.type': ${quotedValue(type)}. Supported values are: ${names}.`, { param: `${param}.type` });
  }
  return new ApiError('invalid_value', `Invalid value for '${param || 'body'}': ${issue.message}.`, { param: param || null });
}

/** A union's alternatives' problems, those of a union within it (an alternative that is a union itself) as its own. */
function alternatives(issue: z.core.$ZodIssueInvalidUnion): z.core.$ZodIssue[][] {
  return issue.errors.flatMap((branch) => {
    const [only] = branch;
    return branch.length === 1 && only!.code === 'invalid_union' && only!.path.length === 0 ? alternatives(only!) : [branch];
  });
}

/**
 * A number, list or string past its bound, in OpenAI's words ("Invalid 'messages': empty array. Expected an array
 * with minimum length 1, but got an empty array instead."), which clients show their users; zod's own ("Too small:
 * expected array to have >=1 items") reads as a stack's. Other bounds (a refinement's) keep their message.
 */
function boundProblem(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig, value: unknown, param: string): ApiError | undefined {
  const small = issue.code === 'too_small';
  const limit = Number(small ? (issue as z.core.$ZodIssueTooSmall).minimum : (issue as z.core.$ZodIssueTooBig).maximum);
  const inclusive = issue.inclusive !== false;
  const sign = small ? (inclusive ? '>=' : '>') : inclusive ? '<=' : '<';
  let what: string;
  if (typeof value === 'number') {
    const kind = Number.isInteger(value) ? 'integer' : 'decimal';
    what = `${kind} ${small ? 'below minimum' : 'above maximum'} value. Expected a value ${sign} ${limit}, but got ${value} instead.`;
  } else if (Array.isArray(value)) {
    what =
      value.length === 0
        ? `empty array. Expected an array with minimum length ${limit}, but got an empty array instead.`
        : `array too ${small ? 'short' : 'long'}. Expected an array with ${small ? 'minimum' : 'maximum'} length ${limit}, but got an array with length ${value.length} instead.`;
  } else if (typeof value === 'string') {
    what =
      value.length === 0
        ? `empty string. Expected a string with minimum length ${limit}, but got an empty string instead.`
        : `string too ${small ? 'short' : 'long'}. Expected a string with ${small ? 'minimum' : 'maximum'} length ${limit}, but got a string with length ${value.length} instead.`;
  } else return undefined;
  return new ApiError('invalid_value', `Invalid '${param}': ${what}`, { param });
}

/** The type an alternative of a union wants, from its problem with the value itself: an enum's values are strings. */
function branchType(branch: z.core.$ZodIssue[]): string {
  const own = branch.find((i) => i.path.length === 0);
  if (own?.code === 'invalid_type') return own.expected;
  if (own?.code === 'invalid_value') return describe(own.values[0]);
  return 'object';
}

function isPlainObject(value: unknown): value is object {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * A request whose list fields (chat `messages` and `tools`, Responses `input`) may be long: `schema` is the
 * whole request's, `outer` the same with the lists' items left unread, `lists` each list's key and the schema
 * of an array of its items.
 */
export interface ListedRequest<T> {
  schema: z.ZodType<T>;
  outer: z.ZodObject;
  lists: ReadonlyArray<{ key: string; items: z.ZodArray }>;
}

/** How long lists are read: in one pass with the request up to `onePassItems` items in all, else `perStep` at a time. */
export interface ListPacing {
  onePassItems: number;
  perStep: number;
}

/** One pass is cheapest for the lists of ordinary requests; 256 items are well under a turn's 2 ms. */
const LIST_PACING: ListPacing = { onePassItems: 256, perStep: 256 };

/**
 * Validates a request body against a schema of `@svc/protocol`, answering the first problem as OpenAI does
 * (design §4): a missing required field first, then types and values, with `param` naming the field. Long
 * lists are validated a slice at a time, yielding to the event loop when `turn` says, and the rest of the body
 * in one step: 100,000 messages in one schema pass are 100–150 ms in which no other request is served.
 * The answer is one pass's: each list's first problem and first missing field are put where the list is in
 * the schema's field order, and a list refused whole (not an array, too long) is not read item by item.
 */
export async function parseRequestBodyInTurns<T>(request: ListedRequest<T>, body: unknown, turn: () => boolean, pacing = LIST_PACING): Promise<T> {
  const object = requestObject(body) as Record<string, unknown>;
  let items = 0;
  for (const { key } of request.lists) {
    const list = object[key];
    if (Array.isArray(list)) items += list.length;
  }
  if (items <= pacing.onePassItems) {
    const parsed = request.schema.safeParse(object);
    if (!parsed.success) throw firstProblem(parsed.error.issues, body);
    return parsed.data;
  }
  const outer = request.outer.safeParse(object);
  const outerIssues = outer.success ? [] : outer.error.issues;
  const parsedLists = new Map<string, unknown[]>();
  const listIssues = new Map<string, z.core.$ZodIssue[]>();
  for (const { key, items: schema } of request.lists) {
    const list = object[key];
    if (!Array.isArray(list) || outerIssues.some((issue) => issue.path.length === 1 && issue.path[0] === key)) continue;
    const parsed: unknown[] = [];
    let first: z.core.$ZodIssue | undefined;
    let missing: z.core.$ZodIssue | undefined;
    for (let start = 0; start < list.length && !(first && missing); start += pacing.perStep) {
      const result = schema.safeParse(list.slice(start, start + pacing.perStep));
      if (result.success) for (const item of result.data) parsed.push(item);
      else {
        // Of a list's problems only two can be the answer: its first, and its first missing field.
        for (const issue of result.error.issues) {
          const [index, ...rest] = issue.path;
          const placed = { ...issue, path: [key, start + Number(index), ...rest] };
          first ??= placed;
          if (!missing && isMissing(placed, body)) missing = placed;
        }
      }
      if (turn()) await yieldToEventLoop();
    }
    parsedLists.set(key, parsed);
    if (first) listIssues.set(key, missing && missing !== first ? [first, missing] : [first]);
  }
  if (outer.success && listIssues.size === 0) {
    const data = outer.data as Record<string, unknown>;
    for (const [key, list] of parsedLists) data[key] = list;
    return data as T;
  }
  // In the schema's field order, each list's items' problems after the list's own.
  const issues: z.core.$ZodIssue[] = [];
  for (const field of Object.keys(request.outer.shape)) {
    for (const issue of outerIssues) if (issue.path[0] === field) issues.push(issue);
    issues.push(...(listIssues.get(field) ?? []));
  }
  throw firstProblem(issues, body);
}

/** The body as an object, after the checks that must come before any schema's. */
function requestObject(body: unknown): object {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError('invalid_type', `The request body must be a JSON object, but got ${describe(body)}.`);
  }
  // Counted before the schema checks each pair, so that 100,000 pairs are one refusal, not 100,000 checks in one turn.
  refuseMoreKeysThan(body, 'metadata', MAX_METADATA_PAIRS, 'key-value pairs');
  return body;
}

/** `body[field]` with more than `max` keys is refused as the schema's own limit would be, without reading them all. */
function refuseMoreKeysThan(body: object, field: string, max: number, what: string): void {
  if (hasMoreKeysThan((body as Record<string, unknown>)[field], max)) {
    throw new ApiError('invalid_value', `Invalid value for '${field}': ${field} may have at most ${max} ${what}.`, { param: field });
  }
}

/** Whether `value` is a plain object with more than `max` keys; counts no further than max + 1. */
function hasMoreKeysThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  let count = 0;
  for (const key in value) if (Object.hasOwn(value, key) && ++count > max) return true;
  return false;
}

/** What OpenAI answers first: a missing required field, else the first problem in the body's order. */
export function firstProblem(issues: readonly z.core.$ZodIssue[], body: unknown): ApiError {
  return issueToError(issues.find((issue) => isMissing(issue, body)) ?? issues[0]!, body);
}

function isMissing(issue: z.core.$ZodIssue, body: unknown): boolean {
  return issue.code === 'invalid_type' && valueAt(body, issue.path) === undefined;
}

/** The one model svc serves: any other name is a 404 `model_not_found`, as OpenAI answers an unknown model. */
export function requireSvcModel(model: string): void {
  if (model !== SVC_MODEL) throw new ApiError('model_not_found', `The model '${quoted(model)}' does not exist. Use '${SVC_MODEL}'.`, { param: 'model' });
}

/**
 * Validates a chat request body (design §3): types of every standard field, `model` = svc01, `svc` options,
 * the messages in `turn`'s turns. Throws ApiError with the first problem.
 */
export async function parseChatRequest(body: unknown, turn: () => boolean): Promise<ChatCompletionRequest> {
  // Counted before the schema checks each entry: 300,000 entries were one 200 ms step.
  if (body !== null && typeof body === 'object') refuseMoreKeysThan(body, 'logit_bias', MAX_LOGIT_BIAS_ENTRIES, 'entries');
  if (body !== null && typeof body === 'object') refuseToolsNotFunctions(body);
  const request = await parseRequestBodyInTurns(CHAT_REQUEST, body, turn);
  requireSvcModel(request.model);
  checkToolChoice(request);
  checkStreamOptions(request);
  return request;
}

/**
 * `stream_options` on a request that does not stream, refused as OpenAI refuses it: dropped without a word, a
 * client asking for `include_usage` on a non-streamed call would never learn why no usage chunk came.
 */
function checkStreamOptions(request: ChatCompletionRequest): void {
  if (request.stream_options != null && request.stream !== true) {
    throw new ApiError('invalid_value', "The 'stream_options' parameter is only allowed when 'stream' is enabled.", { param: 'stream_options' });
  }
}

/**
 * A tool of a type chat completions has not (`web_search`, `file_search`: the Responses API's built-in tools) is
 * refused by its type, before the schema reads it as a function tool and names its missing `function`, which would
 * send its author looking for a typo.
 */
function refuseToolsNotFunctions(body: object): void {
  const tools = (body as { tools?: unknown }).tools;
  if (!Array.isArray(tools)) return;
  const i = tools.findIndex((tool) => isPlainObject(tool) && typeof (tool as { type?: unknown }).type === 'string' && !CHAT_TOOL_TYPES.has((tool as { type: string }).type));
  if (i === -1) return;
  const type = (tools[i] as { type: string }).type;
  throw new ApiError(
    'invalid_value',
    `Invalid value for 'tools[${i}].type': '${quoted(type)}'. Supported values are: 'function' and 'custom'.`,
    { param: `tools[${i}].type` },
  );
}

const CHAT_TOOL_TYPES = new Set(['function', 'custom']);

/**
 * `tool_choice` as OpenAI refuses it before any model runs: without `tools` at all, or naming a function that
 * is not one of them (the upstream would be asked for a call it cannot make; the offline model would make it).
 */
function checkToolChoice(request: ChatCompletionRequest): void {
  const choice = request.tool_choice;
  if (choice === undefined) return;
  const tools = request.tools ?? [];
  if (tools.length === 0) {
    throw new ApiError('invalid_value', "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", { param: 'tool_choice' });
  }
  if (typeof choice === 'string') return;
  if (choice.type === 'function' || choice.type === 'custom') {
    const name = choice.type === 'function' ? choice.function.name : choice.custom.name;
    if (!tools.some((tool) => tool.type === choice.type && toolName(tool) === name)) {
      throw new ApiError('invalid_value', `Invalid value for 'tool_choice': no ${choice.type} tool named '${quoted(name)}' is in 'tools'.`, { param: 'tool_choice' });
    }
    return;
  }
  // "Call one of none": sent on, the choice would become no tools at all, and the model answer in text.
  if (choice.allowed_tools.tools.length === 0 && choice.allowed_tools.mode === 'required') {
    throw new ApiError(
      'invalid_value',
      "Invalid value for 'tool_choice.allowed_tools.tools': mode 'required' needs at least one tool to call, and none is allowed. Name the tools the model may call, or use mode 'auto'.",
      { param: 'tool_choice.allowed_tools.tools' },
    );
  }
  for (const [i, allowed] of choice.allowed_tools.tools.entries()) {
    const param = `tool_choice.allowed_tools.tools[${i}]`;
    const name = allowed.type === 'function' ? allowed.function?.name : allowed.type === 'custom' ? allowed.custom?.name : undefined;
    if (name === undefined) {
      throw new ApiError(
        'invalid_value',
        `Invalid value for '${param}': only function and custom tools ({"type": "function", "function": {"name": …}}, {"type": "custom", "custom": {"name": …}}) are served.`,
        { param },
      );
    }
    if (!tools.some((tool) => tool.type === allowed.type && toolName(tool) === name)) {
      throw new ApiError('invalid_value', `Invalid value for '${param}': no ${allowed.type} tool named '${quoted(name)}' is in 'tools'.`, { param });
    }
  }
}

/**
 * An `allowed_tools` choice as every chat upstream reads it: the tools it names and its mode. Only OpenAI takes the
 * choice itself; vLLM, Ollama and the rest refuse it or call any tool. The Responses route sends its own the same way.
 */
function allowedToolsOnly(body: UpstreamBody, choice: ChatCompletionRequest['tool_choice']): void {
  if (choice === undefined || typeof choice === 'string' || choice.type !== 'allowed_tools') return;
  const names = new Set(choice.allowed_tools.tools.map((tool) => `${tool.type}:${tool.function?.name ?? tool.custom?.name}`));
  const tools = (body.tools as Tool[] | undefined)?.filter((tool) => names.has(`${tool.type}:${toolName(tool)}`)) ?? [];
  if (tools.length > 0) {
    body.tools = tools;
    body.tool_choice = choice.allowed_tools.mode;
  } else {
    delete body.tools;
    delete body.tool_choice;
  }
}

export const CHAT_REQUEST: ListedRequest<ChatCompletionRequest> = {
  schema: ChatCompletionRequestSchema,
  outer: ChatCompletionRequestOuterSchema,
  lists: [
    { key: 'messages', items: z.array(ChatMessageSchema) },
    { key: 'tools', items: z.array(ToolSchema) },
  ],
};

/**
 * What goes upstream: spec defaults, thinking mode (the model, its temperature and a hybrid model's switch), the
 * mapped model, `svc` removed, usage always requested.
 */
export function toUpstreamBody(
  request: ChatCompletionRequest,
  models: { model: string; thinkingModel: string; thinkingSwitch?: ThinkingSwitch },
): { body: UpstreamBody; thinking: boolean; streaming: boolean } {
  const thinking = request.svc?.thinking === true;
  const streaming = request.stream === true;
  // Every field but `svc`, in order; an explicit null means "the default" and some upstreams reject nulls,
  // so those are not forwarded.
  const body = {} as UpstreamBody;
  for (const key in request) {
    const value = (request as Record<string, unknown>)[key];
    if (key !== 'svc' && value !== null) (body as Record<string, unknown>)[key] = value;
  }
  body.messages = request.messages;
  body.model = thinking ? models.thinkingModel : models.model;
  body.temperature = thinking ? THINKING_TEMPERATURE : (request.temperature ?? DEFAULT_TEMPERATURE);
  if (request.max_tokens == null && request.max_completion_tokens == null) body.max_tokens = DEFAULT_MAX_TOKENS;
  allowedToolsOnly(body, request.tool_choice);
  if (streaming) {
    body.stream = true;
    body.stream_options = { ...(request.stream_options ?? {}), include_usage: true };
  } else {
    delete body.stream;
    delete body.stream_options;
  }
  return { body: withThinkingSwitch(body, thinking, models.thinkingSwitch), thinking, streaming };
}

/** `svc.dehallucinate` as requested: the grounding check runs unless the request turns it off. */
export function dehallucinateRequested(request: ChatCompletionRequest): boolean {
  return request.svc?.dehallucinate ?? true;
}

/**
 * The JSON Schema the answer was asked to follow (`response_format: { type: 'json_schema', json_schema: { schema } }`;
 * the Responses API's `text.format` arrives here translated), or undefined.
 */
export function answerSchema(request: ChatCompletionRequest): unknown {
  const format = request.response_format;
  return format?.type === 'json_schema' ? format.json_schema.schema : undefined;
}
