import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import {
  DEFAULT_MAX_TOKENS,
  DEFAULT_TEMPERATURE,
  SVC_MODEL,
  type ChatCompletion,
  type ChatCompletionRequest,
  type ChatMessage,
  ResponseCustomToolSchema,
  type ResponseContentPart,
  type ResponseCreateRequest,
  type ResponseFunctionTool,
  type ResponseInputItem,
  type ResponseTool,
  type Tool,
  type ToolCall,
  type ResponseObject,
  type ResponseOutputItem,
  type ResponseUsage,
  type Usage,
  toolName,
} from '@svc/protocol';
import { ApiError, quoted } from '../http/errors.js';
import { turns } from '../turns.js';
import { answerText } from '../chat/answer-text.js';
import { isTokenCount } from '../upstream/openai-compatible.js';

// The Responses API is served over chat completions: a request becomes a chat request (its items become
// messages), and the chat answer becomes a response object. Both directions are pure functions, so the
// stored conversation, the upstream and the offline model all see the same translation.

/** The request's own input as items: a string is one user message. */
export function inputItems(request: ResponseCreateRequest): ResponseInputItem[] {
  if (request.input === undefined) return [];
  if (typeof request.input === 'string') return [{ type: 'message', role: 'user', content: request.input }];
  return request.input;
}

/**
 * The chat request that serves a Responses request. `history` is the conversation of `previous_response_id`
 * (its input items and output, oldest first); `instructions` are not carried over from it, as in OpenAI's API.
 *
 * @example
 * await toChatRequest({ model: 'svc01', input: 'Hi', instructions: 'Be brief.' }, [])
 * // { model: 'svc01', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], … }
 */
export async function toChatRequest(
  request: ResponseCreateRequest,
  history: readonly ResponseInputItem[],
  turn: () => boolean = turns(),
): Promise<ChatCompletionRequest> {
  refuseUnserved(request);
  const messages: ChatMessage[] = [];
  if (request.instructions) messages.push({ role: 'system', content: request.instructions });
  const calls: ToolCalls = { open: new Map(), made: new Set() };
  await appendItems(messages, history, 'previous_response_id', turn, calls);
  await appendItems(messages, inputItems(request), 'input', turn, calls);
  // As OpenAI refuses them, before the upstream would (in its own words, or not at all).
  const [unanswered] = calls.open;
  if (unanswered !== undefined) {
    throw new ApiError('invalid_request', `No tool output found for ${unanswered[1]} ${quoted(unanswered[0])}.`, { param: 'input' });
  }
  if (messages.length === 0) throw new ApiError('missing_required_parameter', "Missing required parameter: 'input'.", { param: 'input' });

  const chat: ChatCompletionRequest = {
    model: request.model,
    messages,
    max_tokens: request.max_output_tokens ?? DEFAULT_MAX_TOKENS,
  };
  if (request.temperature != null) chat.temperature = request.temperature;
  if (request.top_p != null) chat.top_p = request.top_p;
  if (request.user !== undefined) chat.user = request.user;
  // Chat completions take these as they are: the client's tier, cache routing and end-user identifier reach the upstream.
  if (request.service_tier != null) chat.service_tier = request.service_tier;
  if (request.prompt_cache_key != null) chat.prompt_cache_key = request.prompt_cache_key;
  if (request.safety_identifier != null) chat.safety_identifier = request.safety_identifier;
  if (request.reasoning?.effort != null) chat.reasoning_effort = request.reasoning.effort;
  if (request.tools !== undefined && request.tools.length > 0) {
    chat.tools = declaredTools(request).map(chatTool);
  }
  const choice = request.tool_choice;
  if (choice !== undefined && typeof choice !== 'string') {
    // As OpenAI answers a forced (or allowed) call to a function the request does not declare, before the upstream is asked.
    const named = choice.type === 'allowed_tools' ? choice.tools : [choice];
    for (const [i, tool] of named.entries()) {
      const callable = tool.type === 'function' || tool.type === 'custom';
      if (!callable || !(chat.tools ?? []).some((declared) => declared.type === tool.type && toolName(declared) === tool.name)) {
        const what = callable ? String(tool.name) : tool.type;
        throw new ApiError('invalid_value', `Tool choice '${quoted(what)}' not found in 'tools' parameter.`, {
          param: choice.type === 'allowed_tools' ? `tool_choice.tools[${i}]` : 'tool_choice',
        });
      }
    }
  }
  if (choice !== undefined && typeof choice !== 'string' && choice.type === 'allowed_tools') {
    // Sent as the tools the model may call and the mode, which every chat upstream reads (chat's own
    // `allowed_tools` choice is OpenAI's alone); the response still echoes the whole list and the choice.
    const allowed = new Set(choice.tools.map((tool) => tool.name));
    chat.tools = chat.tools?.filter((tool) => allowed.has(toolName(tool)));
    if (chat.tools?.length) chat.tool_choice = choice.mode;
    else delete chat.tools;
  } else if (choice !== undefined && (chat.tools !== undefined || typeof choice !== 'string')) {
    // Without tools a chat upstream refuses any tool_choice (OpenAI's Responses API takes one and calls nothing).
    chat.tool_choice =
      typeof choice === 'string' ? choice : choice.type === 'custom' ? { type: 'custom', custom: { name: choice.name } } : { type: 'function', function: { name: choice.name } };
  }
  if (request.parallel_tool_calls != null) chat.parallel_tool_calls = request.parallel_tool_calls;
  const format = request.text?.format;
  if (format?.type === 'json_object') chat.response_format = { type: 'json_object' };
  if (format?.type === 'json_schema') {
    chat.response_format = {
      type: 'json_schema',
      json_schema: {
        name: format.name,
        schema: format.schema,
        ...(format.description !== undefined && { description: format.description }),
        ...(format.strict != null && { strict: format.strict }),
      },
    };
  }
  if (request.stream) chat.stream = true;
  if (request.svc !== undefined) chat.svc = request.svc;
  return chat;
}

/**
 * Fields that name what svc does not hold: refused, as answering without them would drop what the client asked
 * the model to read (a stored conversation's turns, a stored prompt's instructions) without a word.
 */
const UNSERVED = {
  conversation: "svc does not serve the Conversations API: carry a conversation with 'previous_response_id', or send its turns in 'input'.",
  prompt: "svc does not serve stored prompts: send the prompt's text as 'instructions' and its variables in 'input'.",
} as const;

function refuseUnserved(request: ResponseCreateRequest): void {
  for (const [field, message] of Object.entries(UNSERVED)) {
    if (request[field] != null) throw new ApiError('invalid_value', message, { param: field });
  }
}

/**
 * The function and custom tools of a request; any other tool type (web search, file search, …) is refused by name.
 */
export function declaredTools(request: ResponseCreateRequest): ResponseTool[] {
  const tools: ResponseTool[] = [];
  for (const [i, tool] of (request.tools ?? []).entries()) {
    if (tool.type !== 'function' && tool.type !== 'custom') {
      throw new ApiError(
        'invalid_value',
        `svc serves function and custom tools only: the built-in tool type '${quoted(tool.type)}' is not supported. Declare a function or custom tool and run it in your application instead.`,
        { param: `tools[${i}].type` },
      );
    }
    const name = (tool as { name?: unknown }).name;
    if (typeof name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(name)) {
      throw new ApiError('invalid_value', `Invalid value for 'tools[${i}].name': must be 1-64 characters of a-z, A-Z, 0-9, _ or -.`, {
        param: `tools[${i}].name`,
      });
    }
    tools.push(tool.type === 'custom' ? customTool(tool, i) : withStrictDefault(tool as ResponseFunctionTool));
  }
  return tools;
}

/** A custom tool as declared, its `format` checked as OpenAI reads it (text, or a lark or regex grammar). */
function customTool(tool: { type: string }, i: number): ResponseTool {
  const parsed = ResponseCustomToolSchema.safeParse(tool);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const param = [`tools[${i}]`, ...issue.path.map(String)].join('.');
  throw new ApiError('invalid_value', `Invalid value for '${param}': ${issue.message}.`, { param });
}

/** A declared tool as chat completions declare it (a custom tool's grammar nested under `grammar`, as chat has it). */
function chatTool(tool: ResponseTool): Tool {
  if (tool.type === 'custom') {
    const format = tool.format?.type === 'grammar' ? { type: 'grammar' as const, grammar: { definition: tool.format.definition, syntax: tool.format.syntax } } : tool.format;
    return {
      type: 'custom',
      custom: {
        name: tool.name,
        ...(tool.description != null && { description: tool.description }),
        ...(format != null && { format }),
      },
    };
  }
  return {
    type: 'function',
    function: {
      name: tool.name,
      ...(tool.description != null && { description: tool.description }),
      ...(tool.parameters != null && { parameters: tool.parameters }),
      ...(tool.strict != null && { strict: tool.strict }),
    },
  };
}

/**
 * The tool with the `strict` it is run with. A function tool of the Responses API is strict unless it says
 * otherwise (OpenAI's `FunctionTool.strict`: "Default `true`"), where chat completions' is not: left out, it is
 * sent upstream as `strict: true` when its schema is one strict mode takes (every object closed with
 * `additionalProperties: false` and all its properties required), else as `false` (a chat upstream refuses strict
 * mode for any other schema, and the model then runs as it would without the flag).
 */
function withStrictDefault(tool: ResponseFunctionTool): ResponseFunctionTool {
  if (tool.strict != null) return tool;
  return { ...tool, strict: tool.parameters != null && isStrictSchema(tool.parameters) };
}

/** Whether every object schema in `schema` is closed (`additionalProperties: false`) and requires all its properties. */
function isStrictSchema(schema: unknown): boolean {
  if (Array.isArray(schema)) return schema.every(isStrictSchema);
  if (typeof schema !== 'object' || schema === null) return true;
  const node = schema as Record<string, unknown>;
  const properties = node.properties;
  if (node.type === 'object' || (typeof properties === 'object' && properties !== null)) {
    if (node.additionalProperties !== false) return false;
    const keys = typeof properties === 'object' && properties !== null ? Object.keys(properties) : [];
    // A set: a 10 MiB body can hold an object of 100,000 properties, and includes() per key would be quadratic.
    const required = new Set(Array.isArray(node.required) ? node.required : []);
    if (!keys.every((key) => required.has(key))) return false;
  }
  const nested = [node.items, node.prefixItems, node.anyOf, node.allOf, node.oneOf, node.not];
  if (!nested.every((child) => child === undefined || isStrictSchema(child))) return false;
  // Not spread into one array: push(...values) of 100,000 properties overflows the stack.
  for (const map of [properties, node.$defs, node.definitions]) {
    if (typeof map === 'object' && map !== null && !Object.values(map).every(isStrictSchema)) return false;
  }
  return true;
}

/** The `call_id`s of the conversation's tool calls: those with no output yet (with what they call), and all of them. */
interface ToolCalls {
  open: Map<string, 'function call' | 'custom tool call'>;
  made: Set<string>;
}

/**
 * Appends `items` as chat messages, in the request's turns of the event loop (20,000 items take tens of ms).
 * A `function_call_output` of the request's own input must answer a call made before it.
 */
async function appendItems(
  messages: ChatMessage[],
  items: readonly ResponseInputItem[],
  param: string,
  turn: () => boolean,
  calls: ToolCalls,
): Promise<void> {
  // Images and files a function's output returned: a chat tool message holds text only (OpenAI's chat API takes no
  // other part there), so they follow the turn's tool messages as a user message, which every vision model reads.
  let media: UserPart[] = [];
  const flushMedia = () => {
    if (media.length > 0) messages.push({ role: 'user', content: media });
    media = [];
  };
  for (const [i, item] of items.entries()) {
    if (turn()) await yieldToEventLoop();
    const where = `${param}[${i}]`;
    if (item.type !== 'function_call_output' && item.type !== 'custom_tool_call_output') flushMedia();
    if (item.type === 'reasoning') continue;
    if (item.type === 'function_call' || item.type === 'custom_tool_call') {
      const call: ToolCall =
        item.type === 'function_call'
          ? { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } }
          : { id: item.call_id, type: 'custom', custom: { name: item.name, input: item.input } };
      // Calls of one turn follow the assistant's message (if any): they belong to that one chat message.
      const last = messages.at(-1);
      if (last?.role === 'assistant') (last.tool_calls ??= []).push(call);
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      calls.open.set(item.call_id, item.type === 'function_call' ? 'function call' : 'custom tool call');
      calls.made.add(item.call_id);
      continue;
    }
    if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
      // A conversation read back may have lost the call's turn (deleted, or past the last 1,000): only the
      // request's own outputs are held to it.
      if (param === 'input' && !calls.made.has(item.call_id)) {
        const kind = item.type === 'function_call_output' ? 'function call' : 'custom tool call';
        throw new ApiError('invalid_request', `No tool call found for ${kind} output with call_id ${quoted(item.call_id)}.`, { param: 'input' });
      }
      calls.open.delete(item.call_id);
      if (typeof item.output === 'string') {
        messages.push({ role: 'tool', tool_call_id: item.call_id, content: item.output });
        continue;
      }
      const parts = userParts(item.output, `${where}.output`);
      const texts = parts.flatMap((part) => (part.type === 'text' ? [part.text] : []));
      const attached = parts.filter((part) => part.type !== 'text');
      // Not spread as arguments: a body holds more parts than a call takes (past about 120,000, a RangeError).
      for (const part of attached) media.push(part);
      // A tool message is never empty (some servers refuse one): an output of images alone says where they went.
      const content = texts.length > 0 || attached.length === 0 ? texts.join('\n') : '(returned in the next user message)';
      messages.push({ role: 'tool', tool_call_id: item.call_id, content });
      continue;
    }
    if (item.role === 'user') {
      // Text alone goes as a string, which every upstream reads (some take no content arrays).
      const textOnly = typeof item.content === 'string' || item.content.every((part) => part.type === 'input_text' || part.type === 'output_text');
      const content = typeof item.content === 'string' ? item.content : textOnly ? textOf(item.content, `${where}.content`) : userParts(item.content, `${where}.content`);
      messages.push({ role: 'user', content });
    } else if (item.role === 'assistant') {
      const content = typeof item.content === 'string' ? item.content : textOf(item.content, `${where}.content`);
      const refusal = typeof item.content === 'string' ? undefined : item.content.find((part) => part.type === 'refusal');
      messages.push({ role: 'assistant', content, ...(refusal?.type === 'refusal' && { refusal: refusal.refusal }) });
    } else {
      const content = typeof item.content === 'string' ? item.content : textOf(item.content, `${where}.content`);
      messages.push({ role: item.role, content });
    }
  }
  flushMedia();
}

/** The text of text parts; images and files are only read in a user message. */
function textOf(parts: readonly ResponseContentPart[], param: string): string {
  const texts: string[] = [];
  for (const [i, part] of parts.entries()) {
    if (part.type === 'input_text' || part.type === 'output_text') texts.push(part.text);
    else if (part.type !== 'refusal') {
      throw new ApiError('invalid_value', `Invalid value for '${param}[${i}].type': '${part.type}' is only accepted in a user message.`, {
        param: `${param}[${i}].type`,
      });
    }
  }
  return texts.join('\n');
}

type UserPart = Extract<ChatMessage, { role: 'user' }>['content'] extends string | (infer P)[] ? P : never;

/** Content parts as a chat user message's; `where` names the list (`input[2].content`) in errors. */
function userParts(parts: readonly ResponseContentPart[], where: string): UserPart[] {
  return parts.map((part, i): UserPart => {
    const param = `${where}[${i}]`;
    switch (part.type) {
      case 'input_text':
      case 'output_text':
        return { type: 'text', text: part.text };
      case 'input_image':
        if (!part.image_url) {
          throw new ApiError('invalid_value', `'${param}' needs an 'image_url' (a URL or a data: URL); uploaded file ids are not served by svc.`, {
            param: `${param}.image_url`,
          });
        }
        return { type: 'image_url', image_url: { url: part.image_url, ...(part.detail && { detail: part.detail }) } };
      case 'input_file':
        if (!part.file_data) {
          throw new ApiError('invalid_value', `'${param}' needs 'file_data'; uploaded file ids are not served by svc.`, {
            param: `${param}.file_data`,
          });
        }
        return { type: 'file', file: { file_data: part.file_data, ...(part.filename && { filename: part.filename }) } };
      case 'refusal':
        throw new ApiError('invalid_value', `Invalid value for '${param}.type': 'refusal' is only accepted in an assistant message.`, {
          param: `${param}.type`,
        });
    }
  });
}

/** What a response object takes from its request, before anything is generated. */
export interface ResponseBase {
  id: string;
  createdAt: number;
  request: ResponseCreateRequest;
}

/**
 * A response object in progress (status `in_progress`, no output): the body of `response.created`, and the
 * frame every later state fills in.
 */
export function pendingResponse({ id, createdAt, request }: ResponseBase): ResponseObject {
  const format = request.text?.format ?? { type: 'text' as const };
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status: 'in_progress',
    completed_at: null,
    background: request.background ?? false,
    error: null,
    incomplete_details: null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? DEFAULT_MAX_TOKENS,
    metadata: request.metadata ?? {},
    model: SVC_MODEL,
    output: [],
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: request.reasoning?.effort ?? null, summary: null },
    store: request.store ?? true,
    temperature: request.temperature ?? DEFAULT_TEMPERATURE,
    text: { format },
    tool_choice: request.tool_choice ?? 'auto',
    tools: request.tools === undefined ? [] : declaredTools(request),
    top_p: request.top_p ?? 1,
    truncation: 'disabled',
    usage: null,
    user: request.user ?? null,
  };
}

/** A chat finish reason as a response's status. */
export function finishedStatus(finishReason: string | null | undefined): Pick<ResponseObject, 'status' | 'incomplete_details'> {
  if (finishReason === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** Chat usage in the Responses API's names. */
export function responseUsage(usage: Usage): ResponseUsage {
  const details = usage as { prompt_tokens_details?: { cached_tokens?: unknown } | null; completion_tokens_details?: { reasoning_tokens?: unknown } | null };
  // The upstream's breakdowns are kept only as counts (the upstream module drops others): 0 stands for any other.
  const cached = details.prompt_tokens_details?.cached_tokens;
  const reasoning = details.completion_tokens_details?.reasoning_tokens;
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: isTokenCount(cached) ? cached : 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: isTokenCount(reasoning) ? reasoning : 0 },
    total_tokens: usage.total_tokens,
  };
}

/**
 * The finished response for a chat completion: its message as a `message` item, each tool call as a
 * `function_call` item, usage renamed, and svc's result as in chat.
 *
 * @param newItemId makes an output item's id from its prefix (`rs`, `msg`, `fc`).
 */
export function completedResponse(
  base: ResponseBase,
  completion: ChatCompletion,
  completedAt: number,
  newItemId: (prefix: 'msg' | 'fc' | 'ctc' | 'rs') => string,
): ResponseObject {
  const choice = completion.choices[0];
  const status = finishedStatus(choice?.finish_reason);
  const itemStatus = status.status === 'completed' ? 'completed' : 'incomplete';
  const output: ResponseOutputItem[] = [];
  const message = choice?.message;
  // Thinking mode's (or a reasoning upstream's) reasoning text, as the reasoning item OpenAI puts first.
  if (message?.reasoning_content) {
    output.push({ type: 'reasoning', id: newItemId('rs'), summary: [{ type: 'summary_text', text: message.reasoning_content }], status: itemStatus });
  }
  // An answer given only as audio (`content: null`, the words in `audio.transcript`) is its transcript, as in chat.
  const text = answerText(message);
  if (message && (text || message.refusal)) {
    output.push({
      type: 'message',
      id: newItemId('msg'),
      status: itemStatus,
      role: 'assistant',
      content: message.refusal
        ? [{ type: 'refusal', refusal: message.refusal }]
        : [{ type: 'output_text', text, annotations: [], logprobs: [] }],
    });
  }
  for (const call of message?.tool_calls ?? []) {
    if (call.type === 'custom') {
      output.push({ type: 'custom_tool_call', id: newItemId('ctc'), call_id: call.id, name: call.custom.name, input: call.custom.input, status: 'completed' });
      continue;
    }
    output.push({
      type: 'function_call',
      id: newItemId('fc'),
      call_id: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
      status: 'completed',
    });
  }
  return {
    ...pendingResponse(base),
    ...status,
    completed_at: completedAt,
    output,
    usage: responseUsage(completion.usage),
    svc: completion.svc,
  };
}

/** The assistant's text in a response (what grounding and the audit payload read). */
export function outputText(output: readonly ResponseOutputItem[]): string {
  const texts: string[] = [];
  for (const item of output) {
    if (item.type !== 'message') continue;
    for (const part of item.content) if (part.type === 'output_text') texts.push(part.text);
  }
  return texts.join('');
}
