import { z } from 'zod';
import { JsonSchemaObject, MetadataSchema, SvcRequestConfigSchema } from './chat-request.js';
import { SvcResultSchema } from './chat-response.js';

// The OpenAI Responses API (`POST /v1/responses`), the subset svc serves over an upstream's chat completions.
// Objects are loose, as in the chat schema: fields a client sends that svc does not use pass through unread.

const InputTextPartSchema = z.looseObject({ type: z.literal('input_text'), text: z.string() });
const OutputTextPartSchema = z.looseObject({ type: z.literal('output_text'), text: z.string() });
const InputImagePartSchema = z.looseObject({
  type: z.literal('input_image'),
  image_url: z.string().nullable().optional(),
  file_id: z.string().nullable().optional(),
  detail: z.enum(['auto', 'low', 'high']).optional(),
});
const InputFilePartSchema = z.looseObject({
  type: z.literal('input_file'),
  file_data: z.string().optional(),
  file_id: z.string().nullable().optional(),
  filename: z.string().optional(),
});
const RefusalPartSchema = z.looseObject({ type: z.literal('refusal'), refusal: z.string() });

export const ResponseContentPartSchema = z.discriminatedUnion('type', [
  InputTextPartSchema,
  OutputTextPartSchema,
  InputImagePartSchema,
  InputFilePartSchema,
  RefusalPartSchema,
]);
export type ResponseContentPart = z.infer<typeof ResponseContentPartSchema>;

/** A message item; `type` may be left out, as the SDKs' `EasyInputMessage` does. */
export const ResponseMessageItemSchema = z.looseObject({
  type: z.literal('message').optional(),
  id: z.string().optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(ResponseContentPartSchema)]),
  status: z.string().optional(),
});

export const FunctionCallItemSchema = z.looseObject({
  type: z.literal('function_call'),
  id: z.string().optional(),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status: z.string().optional(),
});

export const FunctionCallOutputItemSchema = z.looseObject({
  type: z.literal('function_call_output'),
  id: z.string().nullable().optional(),
  call_id: z.string(),
  output: z.union([z.string(), z.array(ResponseContentPartSchema)]),
  status: z.string().nullable().optional(),
});

/** A call of a custom tool (GPT-5's free-form tools) from an earlier turn: its `input` is the model's text. */
export const CustomToolCallItemSchema = z.looseObject({
  type: z.literal('custom_tool_call'),
  id: z.string().optional(),
  call_id: z.string(),
  name: z.string(),
  input: z.string(),
  status: z.string().optional(),
});

/** What the application's run of a custom tool returned, for the call with `call_id`. */
export const CustomToolCallOutputItemSchema = z.looseObject({
  type: z.literal('custom_tool_call_output'),
  id: z.string().nullable().optional(),
  call_id: z.string(),
  output: z.union([z.string(), z.array(ResponseContentPartSchema)]),
});

/** A reasoning item a client hands back from an earlier response: accepted, and not sent upstream. */
export const ReasoningItemSchema = z.looseObject({ type: z.literal('reasoning'), id: z.string().optional() });

export const ResponseInputItemSchema = z.union([
  ResponseMessageItemSchema,
  FunctionCallItemSchema,
  FunctionCallOutputItemSchema,
  CustomToolCallItemSchema,
  CustomToolCallOutputItemSchema,
  ReasoningItemSchema,
]);
export type ResponseInputItem = z.infer<typeof ResponseInputItemSchema>;

/**
 * An output item of an earlier stored response, named by its id (`type` may be left out, as in OpenAI's API): the
 * AI SDK's responses provider sends an earlier turn's message and reasoning so. Strict, so that a malformed
 * message with an `id` is refused for what is wrong with it, not looked up.
 */
export const ItemReferenceSchema = z.strictObject({ type: z.literal('item_reference').nullable().optional(), id: z.string() });
export type ItemReference = z.infer<typeof ItemReferenceSchema>;

/** An item of a request's `input` as sent: an input item, or a reference to a stored one. */
export const ResponseRequestItemSchema = z.union([ResponseInputItemSchema, ItemReferenceSchema]);
export type ResponseRequestItem = z.infer<typeof ResponseRequestItemSchema>;

export const ResponseFunctionToolSchema = z.looseObject({
  type: z.literal('function'),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1-64 characters of a-z, A-Z, 0-9, _ or -'),
  description: z.string().nullable().optional(),
  parameters: JsonSchemaObject.nullable().optional(),
  strict: z.boolean().nullable().optional(),
});
export type ResponseFunctionTool = z.infer<typeof ResponseFunctionToolSchema>;

/**
 * OpenAI's custom tool (GPT-5) as the Responses API declares it: the model calls it with free text (`format` absent
 * or `{ type: "text" }`) or text a grammar allows (`{ type: "grammar", syntax: "lark" | "regex", definition }`).
 */
export const ResponseCustomToolSchema = z.looseObject({
  type: z.literal('custom'),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1-64 characters of a-z, A-Z, 0-9, _ or -'),
  description: z.string().nullable().optional(),
  format: z
    .discriminatedUnion('type', [
      z.looseObject({ type: z.literal('text') }),
      z.looseObject({ type: z.literal('grammar'), definition: z.string(), syntax: z.enum(['lark', 'regex']) }),
    ])
    .nullable()
    .optional(),
});
export type ResponseCustomTool = z.infer<typeof ResponseCustomToolSchema>;

/** A tool a response declares: a function, or a custom tool. */
export const ResponseToolSchema = z.union([ResponseFunctionToolSchema, ResponseCustomToolSchema]);
export type ResponseTool = z.infer<typeof ResponseToolSchema>;

export const ResponseToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), name: z.string() }),
  z.looseObject({ type: z.literal('custom'), name: z.string() }),
  // OpenAI's `ToolChoiceAllowed`: the model may call only these of `tools` (`auto`), or must call one of them (`required`).
  z.looseObject({
    type: z.literal('allowed_tools'),
    mode: z.enum(['auto', 'required']),
    tools: z.array(z.looseObject({ type: z.string(), name: z.string().optional() })).max(128),
  }),
]);
export type ResponseToolChoice = z.infer<typeof ResponseToolChoiceSchema>;

export const ResponseTextFormatSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    name: z.string(),
    schema: JsonSchemaObject,
    description: z.string().optional(),
    strict: z.boolean().nullable().optional(),
  }),
]);

/**
 * The values of a Responses request's `include` (OpenAI's `ResponseIncludable`). svc adds nothing for any of
 * them: the built-in tools' results and computer screenshots have no items here (those tools are refused),
 * input image URLs are listed as sent, logprobs stay `[]`, and reasoning is not encrypted (svc's reasoning
 * items are never sent upstream). Another value is a 400 naming `include[i]`, as OpenAI answers it.
 */
export const RESPONSE_INCLUDABLE = [
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
  'reasoning.encrypted_content',
  'message.output_text.logprobs',
] as const;

export const ResponseCreateRequestSchema = z.looseObject({
  model: z.string(),
  input: inputOf(ResponseInputItemSchema),
  instructions: z.string().nullable().optional(),
  // Any tool type is read here so that a built-in one (web search, file search, …) gets its own clear error.
  tools: z.array(z.looseObject({ type: z.string() })).max(128).optional(),
  tool_choice: ResponseToolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  text: z.looseObject({ format: ResponseTextFormatSchema.optional() }).nullable().optional(),
  max_output_tokens: z.int().min(16).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  reasoning: z
    .looseObject({ effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullable().optional() })
    .nullable()
    .optional(),
  metadata: MetadataSchema.nullable().optional(),
  store: z.boolean().nullable().optional(),
  previous_response_id: z.string().nullable().optional(),
  // Read so that a wrong value is refused as OpenAI refuses it; svc never drops items to fit ('auto'): a
  // conversation past the upstream's context gets the upstream's `context_length_exceeded`.
  truncation: z.enum(['auto', 'disabled']).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  // A background request is answered at once with its stored response `queued`, and runs in the server: polled with
  // GET /v1/responses/{id}, cancelled with POST /v1/responses/{id}/cancel (store must be true).
  background: z.boolean().nullable().optional(),
  // OpenAI's limit on calls to built-in tools ("across all built-in tool calls"); svc serves function tools only,
  // so there is nothing to limit. Read so that a wrong type is refused.
  max_tool_calls: z.int().min(0).nullable().optional(),
  include: z.array(z.enum(RESPONSE_INCLUDABLE)).max(RESPONSE_INCLUDABLE.length * 4).nullable().optional(),
  user: z.string().optional(),
  // Passed on to the upstream's chat completions, which take them under the same names.
  service_tier: z.string().nullable().optional(),
  prompt_cache_key: z.string().nullable().optional(),
  safety_identifier: z.string().nullable().optional(),
  svc: SvcRequestConfigSchema.optional(),
});
/** A Responses request with its `item_reference`s read back into the items they name: what is translated and stored. */
export type ResponseCreateRequest = z.infer<typeof ResponseCreateRequestSchema>;

/** A Responses request as sent: its `input` may name stored output items by `item_reference`. */
export const ResponseCreateWireRequestSchema = ResponseCreateRequestSchema.extend({ input: inputOf(ResponseRequestItemSchema) });
export type ResponseCreateWireRequest = z.infer<typeof ResponseCreateWireRequestSchema>;

function inputOf<T extends z.ZodType>(item: T) {
  return z.union([z.string(), z.array(item)]).optional();
}

/**
 * The Responses request with its input items left unread: a server validates the items one by one against
 * `ResponseRequestItemSchema` (20,000 of them are one long step for a single parse), and the rest with this.
 */
export const ResponseCreateRequestOuterSchema = ResponseCreateRequestSchema.extend({ input: inputOf(z.unknown()) });

const OutputTextSchema = z.object({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()),
  logprobs: z.array(z.unknown()),
});
const ItemStatusSchema = z.enum(['in_progress', 'completed', 'incomplete']);

const SummaryTextSchema = z.object({ type: z.literal('summary_text'), text: z.string() });

/** An item of a response's `output`: the model's reasoning (its text as a summary), the assistant's message, or one call of a function or a custom tool. */
export const ResponseOutputItemSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('reasoning'), id: z.string(), summary: z.array(SummaryTextSchema), status: ItemStatusSchema }),
  z.object({
    type: z.literal('message'),
    id: z.string(),
    status: ItemStatusSchema,
    role: z.literal('assistant'),
    content: z.array(z.union([OutputTextSchema, z.object({ type: z.literal('refusal'), refusal: z.string() })])),
  }),
  z.object({
    type: z.literal('function_call'),
    id: z.string(),
    call_id: z.string(),
    name: z.string(),
    arguments: z.string(),
    status: ItemStatusSchema,
  }),
  z.object({
    type: z.literal('custom_tool_call'),
    id: z.string(),
    call_id: z.string(),
    name: z.string(),
    input: z.string(),
    status: ItemStatusSchema,
  }),
]);
export type ResponseOutputItem = z.infer<typeof ResponseOutputItemSchema>;

export const ResponseUsageSchema = z.object({
  input_tokens: z.int().min(0),
  input_tokens_details: z.object({ cached_tokens: z.int().min(0) }),
  output_tokens: z.int().min(0),
  output_tokens_details: z.object({ reasoning_tokens: z.int().min(0) }),
  total_tokens: z.int().min(0),
});
export type ResponseUsage = z.infer<typeof ResponseUsageSchema>;

/** The response object (`object: "response"`), with svc's result beside OpenAI's fields as in chat completions. */
export const ResponseObjectSchema = z.object({
  id: z.string(),
  object: z.literal('response'),
  created_at: z.int(),
  // `queued` and `cancelled` only for a background response (OpenAI's background mode).
  status: z.enum(['queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled']),
  completed_at: z.int().nullable(),
  background: z.boolean(),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  incomplete_details: z.object({ reason: z.enum(['max_output_tokens', 'content_filter']) }).nullable(),
  instructions: z.string().nullable(),
  max_output_tokens: z.int().nullable(),
  metadata: z.record(z.string(), z.string()),
  model: z.string(),
  output: z.array(ResponseOutputItemSchema),
  parallel_tool_calls: z.boolean(),
  previous_response_id: z.string().nullable(),
  reasoning: z.object({ effort: z.string().nullable(), summary: z.null() }),
  store: z.boolean(),
  temperature: z.number(),
  text: z.object({ format: ResponseTextFormatSchema }),
  tool_choice: ResponseToolChoiceSchema,
  tools: z.array(ResponseToolSchema),
  top_p: z.number(),
  truncation: z.literal('disabled'),
  usage: ResponseUsageSchema.nullable(),
  user: z.string().nullable(),
  svc: SvcResultSchema.optional(),
});
export type ResponseObject = z.infer<typeof ResponseObjectSchema>;

/** The output items as input items: what `previous_response_id` hands the next turn. */
export function outputAsInput(output: readonly ResponseOutputItem[]): ResponseInputItem[] {
  return output.map((item): ResponseInputItem => {
    if (item.type === 'reasoning') return { type: 'reasoning', id: item.id, summary: item.summary };
    if (item.type === 'function_call') {
      return { type: 'function_call', id: item.id, call_id: item.call_id, name: item.name, arguments: item.arguments };
    }
    if (item.type === 'custom_tool_call') return { type: 'custom_tool_call', id: item.id, call_id: item.call_id, name: item.name, input: item.input };
    return { type: 'message', id: item.id, role: 'assistant', content: item.content };
  });
}
