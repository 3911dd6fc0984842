import { z } from 'zod';

/** Key–value pairs `metadata` may have (OpenAI's rule, with keys up to 64 characters and values up to 512). */
export const MAX_METADATA_PAIRS = 16;

/** `metadata`: at most MAX_METADATA_PAIRS key–value pairs, keys up to 64 characters, values up to 512. */
export const MetadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((v) => Object.keys(v).length <= MAX_METADATA_PAIRS, { message: `metadata may have at most ${MAX_METADATA_PAIRS} key-value pairs` });

/** Token biases `logit_bias` may hold (OpenAI's rule: "at most 300"). */
export const MAX_LOGIT_BIAS_ENTRIES = 300;

/** The only public model name; it maps onto the configured upstream model. */
export const SVC_MODEL = 'svc01';

export const TextPartSchema = z.looseObject({ type: z.literal('text'), text: z.string() });
export const ImagePartSchema = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({ url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() }),
});
export const AudioPartSchema = z.looseObject({
  type: z.literal('input_audio'),
  input_audio: z.looseObject({ data: z.string(), format: z.string() }),
});
export const FilePartSchema = z.looseObject({
  type: z.literal('file'),
  file: z.looseObject({ file_data: z.string().optional(), file_id: z.string().optional(), filename: z.string().optional() }),
});
export const RefusalPartSchema = z.looseObject({ type: z.literal('refusal'), refusal: z.string() });

const textContent = z.union([z.string(), z.array(TextPartSchema)]);
const userContent = z.union([
  z.string(),
  z.array(z.discriminatedUnion('type', [TextPartSchema, ImagePartSchema, AudioPartSchema, FilePartSchema])),
]);

export const FunctionToolCallSchema = z.looseObject({
  id: z.string(),
  type: z.literal('function'),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});
export type FunctionToolCall = z.infer<typeof FunctionToolCallSchema>;

/** A call of a custom tool (GPT-5's free-form tools): its `input` is the model's text, not JSON arguments. */
export const CustomToolCallSchema = z.looseObject({
  id: z.string(),
  type: z.literal('custom'),
  custom: z.looseObject({ name: z.string(), input: z.string() }),
});
export type CustomToolCall = z.infer<typeof CustomToolCallSchema>;

export const ToolCallSchema = z.discriminatedUnion('type', [FunctionToolCallSchema, CustomToolCallSchema]);
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const SystemMessageSchema = z.looseObject({ role: z.literal('system'), content: textContent, name: z.string().optional() });
export const DeveloperMessageSchema = z.looseObject({ role: z.literal('developer'), content: textContent, name: z.string().optional() });
export const UserMessageSchema = z.looseObject({ role: z.literal('user'), content: userContent, name: z.string().optional() });
export const AssistantMessageSchema = z.looseObject({
  role: z.literal('assistant'),
  content: z.union([z.string(), z.array(z.union([TextPartSchema, RefusalPartSchema]))]).nullable().optional(),
  name: z.string().optional(),
  refusal: z.string().nullable().optional(),
  tool_calls: z.array(ToolCallSchema).optional(),
  function_call: z.looseObject({ name: z.string(), arguments: z.string() }).nullable().optional(),
  reasoning_content: z.string().nullable().optional(),
});
export const ToolMessageSchema = z.looseObject({ role: z.literal('tool'), content: textContent, tool_call_id: z.string() });
export const FunctionMessageSchema = z.looseObject({ role: z.literal('function'), content: z.string().nullable(), name: z.string() });

export const ChatMessageSchema = z.discriminatedUnion('role', [
  SystemMessageSchema,
  DeveloperMessageSchema,
  UserMessageSchema,
  AssistantMessageSchema,
  ToolMessageSchema,
  FunctionMessageSchema,
]);
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

/** JSON Schema object, kept as an open record. */
export const JsonSchemaObject = z.record(z.string(), z.unknown());

export const FunctionToolSchema = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1-64 characters of a-z, A-Z, 0-9, _ or -'),
    description: z.string().optional(),
    parameters: JsonSchemaObject.optional(),
    strict: z.boolean().nullable().optional(),
  }),
});
export type FunctionTool = z.infer<typeof FunctionToolSchema>;

/**
 * OpenAI's custom tool (GPT-5): the model calls it with free text, unconstrained (`format` absent or
 * `{"type": "text"}`) or following a grammar (`{"type": "grammar", "grammar": {"definition", "syntax": "lark" | "regex"}}`).
 */
export const CustomToolSchema = z.looseObject({
  type: z.literal('custom'),
  custom: z.looseObject({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1-64 characters of a-z, A-Z, 0-9, _ or -'),
    description: z.string().optional(),
    format: z
      .discriminatedUnion('type', [
        z.looseObject({ type: z.literal('text') }),
        z.looseObject({ type: z.literal('grammar'), grammar: z.looseObject({ definition: z.string(), syntax: z.enum(['lark', 'regex']) }) }),
      ])
      .optional(),
  }),
});
export type CustomTool = z.infer<typeof CustomToolSchema>;

export const ToolSchema = z.discriminatedUnion('type', [FunctionToolSchema, CustomToolSchema]);
export type Tool = z.infer<typeof ToolSchema>;

/** A tool's name, whichever its type. */
export function toolName(tool: Tool): string {
  return tool.type === 'function' ? tool.function.name : tool.custom.name;
}

export const ToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) }),
  z.looseObject({ type: z.literal('custom'), custom: z.looseObject({ name: z.string() }) }),
  // OpenAI's `ChatCompletionAllowedToolChoice`: the model may call only these of `tools` (`auto`), or must call
  // one of them (`required`); the list stays whole so that a long conversation's prompt prefix does not change.
  z.looseObject({
    type: z.literal('allowed_tools'),
    allowed_tools: z.looseObject({
      mode: z.enum(['auto', 'required']),
      tools: z
        .array(
          z.looseObject({
            type: z.string(),
            function: z.looseObject({ name: z.string() }).optional(),
            custom: z.looseObject({ name: z.string() }).optional(),
          }),
        )
        .max(128),
    }),
  }),
]);
export type ToolChoice = z.infer<typeof ToolChoiceSchema>;

export const ResponseFormatSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({
      name: z.string(),
      description: z.string().optional(),
      schema: JsonSchemaObject.optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

/** The service-specific request config (spec §2.2). */
export const SvcRequestConfigSchema = z.strictObject({
  thinking: z.boolean().optional(),
  dehallucinate: z.boolean().optional(),
});
export type SvcRequestConfig = z.infer<typeof SvcRequestConfigSchema>;

/**
 * The chat-completions request body: every standard field typed, unknown fields passed through.
 *
 * @example
 * ChatCompletionRequestSchema.parse({ model: 'svc01', messages: [{ role: 'user', content: 'Hi' }] })
 */
export const ChatCompletionRequestSchema = z.looseObject({
  model: z.string(),
  messages: messagesOf(ChatMessageSchema),
  max_tokens: z.int().min(1).nullable().optional(),
  max_completion_tokens: z.int().min(1).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  n: z.int().min(1).max(128).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullable().optional(),
  presence_penalty: z.number().min(-2).max(2).nullable().optional(),
  frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
  logit_bias: z
    .record(z.string(), z.number().min(-100).max(100))
    .refine((v) => Object.keys(v).length <= MAX_LOGIT_BIAS_ENTRIES, { message: `logit_bias may have at most ${MAX_LOGIT_BIAS_ENTRIES} entries` })
    .nullable()
    .optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.int().min(0).max(20).nullable().optional(),
  user: z.string().optional(),
  seed: z.int().nullable().optional(),
  tools: toolsOf(ToolSchema),
  tool_choice: ToolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: ResponseFormatSchema.optional(),
  reasoning_effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullable().optional(),
  metadata: MetadataSchema.nullable().optional(),
  store: z.boolean().nullable().optional(),
  service_tier: z.string().nullable().optional(),
  modalities: z.array(z.string()).nullable().optional(),
  prediction: z.looseObject({ type: z.string() }).nullable().optional(),
  svc: SvcRequestConfigSchema.optional(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

function messagesOf<T extends z.ZodType>(message: T) {
  return z.array(message).min(1);
}

function toolsOf<T extends z.ZodType>(tool: T) {
  return z.array(tool).max(128).optional();
}

/**
 * The chat request with its messages and tools left unread: a server validates them one by one against
 * `ChatMessageSchema` and `FunctionToolSchema` (100,000 messages are one long step for a single parse), and
 * the rest with this.
 */
export const ChatCompletionRequestOuterSchema = ChatCompletionRequestSchema.extend({ messages: messagesOf(z.unknown()), tools: toolsOf(z.unknown()) });

/** Spec defaults (spec §2.1, §8). */
export const DEFAULT_MAX_TOKENS = 4096;
export const DEFAULT_TEMPERATURE = 0.1;
export const THINKING_TEMPERATURE = 1.0;

/** Text of a message's content (text parts only, joined by newlines). */
export function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const parts: string[] = [];
  for (const part of content) {
    if (part && typeof part === 'object' && (part as { type?: unknown }).type === 'text') {
      const text = (part as { text?: unknown }).text;
      if (typeof text === 'string') parts.push(text);
    }
  }
  return parts.join('\n');
}
