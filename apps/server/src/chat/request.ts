import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import {
  ChatCompletionRequestOuterSchema,
  ChatMessageSchema,
  DEFAULT_MAX_TOKENS,
  FunctionToolSchema,
  DEFAULT_TEMPERATURE,
  MAX_LOGIT_BIAS_ENTRIES,
  MAX_METADATA_PAIRS,
  SVC_MODEL,
  THINKING_TEMPERATURE,
  type ChatCompletionRequest,
} from '@svc/protocol';
import type { z } from 'zod';
import { ApiError } from '../http/errors.js';
import type { UpstreamBody } from '../upstream/upstream.js';

/** `messages[0].content` from a zod path. */
export function formatParam(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out;
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
  }
  const rolePath = issue.path[issue.path.length - 1] === 'role' ? issue.path.slice(0, -1) : issue.path;
  if (issue.code === 'invalid_union' && rolePath.length === 2 && rolePath[0] === 'messages') {
    const param = formatParam(rolePath);
    const role = (valueAt(body, rolePath) as { role?: unknown } | undefined)?.role;
    if (role === undefined) return new ApiError('missing_required_parameter', `Missing required parameter: '${param}.role'.`, { param: `${param}.role` });
    return new ApiError(
      'invalid_value',
      `Invalid value for '${param}.role': ${JSON.stringify(role)}. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.`,
      { param: `${param}.role` },
    );
  }
  if (issue.code === 'unrecognized_keys') {
    const where = param ? `'${param}'` : 'the request';
    return new ApiError('invalid_value', `Unrecognized parameter(s) in ${where}: ${issue.keys.map((k) => `'${k}'`).join(', ')}.`, {
      param: param ? `${param}.${issue.keys[0]}` : (issue.keys[0] ?? null),
    });
  }
  return new ApiError('invalid_value', `Invalid value for '${param || 'body'}': ${issue.message}.`, { param: param || null });
}

/**
 * A request whose list fields (chat `messages` and `tools`, Responses `input`) are checked item by item:
 * `outer` is the request's schema with the lists' items left unread, `lists` each list's key and item schema.
 */
export interface ListedRequest<T> {
  outer: z.ZodObject;
  lists: ReadonlyArray<{ key: string; item: z.ZodType }>;
  /** Only for the type: what the whole request parses to. */
  parsed?: T;
}

/**
 * Validates a request body against a schema of `@svc/protocol`, answering the first problem as OpenAI does
 * (design §4): a missing required field first, then types and values, with `param` naming the field.
 * Each list's items are validated one at a time, yielding to the event loop when `turn` says, and the rest of
 * the body in one step: 100,000 messages in one schema pass are 100–150 ms in which no other request is
 * served. The issues are put in the schema's field order, each list's where the list is, as one pass has them.
 */
export async function parseRequestBodyInTurns<T>(request: ListedRequest<T>, body: unknown, turn: () => boolean): Promise<T> {
  const object = requestObject(body) as Record<string, unknown>;
  const outer = request.outer.safeParse(object);
  const parsedLists = new Map<string, unknown[]>();
  const listIssues = new Map<string, z.core.$ZodIssue[]>();
  for (const { key, item } of request.lists) {
    const items = object[key];
    if (!Array.isArray(items)) continue;
    const parsedItems: unknown[] = [];
    const issues: z.core.$ZodIssue[] = [];
    for (let i = 0; i < items.length; i++) {
      const parsed = item.safeParse(items[i]);
      if (parsed.success) parsedItems.push(parsed.data);
      else for (const issue of parsed.error.issues) issues.push({ ...issue, path: [key, i, ...issue.path] });
      if (turn()) await yieldToEventLoop();
    }
    parsedLists.set(key, parsedItems);
    if (issues.length > 0) listIssues.set(key, issues);
  }
  if (outer.success && listIssues.size === 0) {
    const data = outer.data as Record<string, unknown>;
    for (const [key, items] of parsedLists) data[key] = items;
    return data as T;
  }
  // In the schema's field order, each list's items' issues after the list's own (its type, its length).
  const issues: z.core.$ZodIssue[] = [];
  const outerIssues = outer.success ? [] : outer.error.issues;
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
  // Counted before the schema checks each entry, so that 100,000 pairs are one refusal, not 100,000 checks in one turn.
  const { metadata, logit_bias: logitBias } = body as { metadata?: unknown; logit_bias?: unknown };
  if (hasMoreKeysThan(metadata, MAX_METADATA_PAIRS)) {
    throw new ApiError('invalid_value', `Invalid 'metadata': metadata may have at most ${MAX_METADATA_PAIRS} key-value pairs.`, { param: 'metadata' });
  }
  if (hasMoreKeysThan(logitBias, MAX_LOGIT_BIAS_ENTRIES)) {
    throw new ApiError('invalid_value', `Invalid 'logit_bias': logit_bias may have at most ${MAX_LOGIT_BIAS_ENTRIES} entries.`, { param: 'logit_bias' });
  }
  return body;
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
  const missing = issues.find((i) => i.code === 'invalid_type' && valueAt(body, i.path) === undefined);
  return issueToError(missing ?? issues[0]!, body);
}

/** The one model svc serves: any other name is a 404 `model_not_found`, as OpenAI answers an unknown model. */
export function requireSvcModel(model: string): void {
  if (model !== SVC_MODEL) throw new ApiError('model_not_found', `The model '${model}' does not exist. Use '${SVC_MODEL}'.`, { param: 'model' });
}

/**
 * Validates a chat request body (design §3): types of every standard field, `model` = svc01, `svc` options,
 * the messages in `turn`'s turns. Throws ApiError with the first problem.
 */
export async function parseChatRequest(body: unknown, turn: () => boolean): Promise<ChatCompletionRequest> {
  const request = await parseRequestBodyInTurns(CHAT_REQUEST, body, turn);
  requireSvcModel(request.model);
  return request;
}

const CHAT_REQUEST: ListedRequest<ChatCompletionRequest> = {
  outer: ChatCompletionRequestOuterSchema,
  lists: [
    { key: 'messages', item: ChatMessageSchema },
    { key: 'tools', item: FunctionToolSchema },
  ],
};

/** What goes upstream: spec defaults, thinking mode, the mapped model, `svc` removed, usage always requested. */
export function toUpstreamBody(
  request: ChatCompletionRequest,
  models: { model: string; thinkingModel: string },
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
  if (streaming) {
    body.stream = true;
    body.stream_options = { ...(request.stream_options ?? {}), include_usage: true };
  } else {
    delete body.stream;
    delete body.stream_options;
  }
  return { body, thinking, streaming };
}

/** `svc.dehallucinate` as requested: the grounding check runs unless the request turns it off. */
export function dehallucinateRequested(request: ChatCompletionRequest): boolean {
  return request.svc?.dehallucinate ?? true;
}
