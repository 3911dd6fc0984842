import { z } from 'zod';
import { JsonSchemaObject, SvcRequestConfigSchema } from './chat-request.js';
import type { SvcResult } from './chat-response.js';

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

/** A reasoning item a client hands back from an earlier response: accepted, and not sent upstream. */
export const ReasoningItemSchema = z.looseObject({ type: z.literal('reasoning'), id: z.string().optional() });

export const ResponseInputItemSchema = z.union([
  ResponseMessageItemSchema,
  FunctionCallItemSchema,
  FunctionCallOutputItemSchema,
  ReasoningItemSchema,
]);
export type ResponseInputItem = z.infer<typeof ResponseInputItemSchema>;

export const ResponseFunctionToolSchema = z.looseObject({
  type: z.literal('function'),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1-64 characters of a-z, A-Z, 0-9, _ or -'),
  description: z.string().nullable().optional(),
  parameters: JsonSchemaObject.nullable().optional(),
  strict: z.boolean().nullable().optional(),
});
export type ResponseFunctionTool = z.infer<typeof ResponseFunctionToolSchema>;

export const ResponseToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), name: z.string() }),
]);

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

export const ResponseCreateRequestSchema = z.looseObject({
  model: z.string(),
  input: z.union([z.string(), z.array(ResponseInputItemSchema)]).optional(),
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
  metadata: z.record(z.string().max(64), z.string().max(512)).nullable().optional(),
  store: z.boolean().nullable().optional(),
  previous_response_id: z.string().nullable().optional(),
  stream: z.boolean().nullable().optional(),
  user: z.string().optional(),
  svc: SvcRequestConfigSchema.optional(),
});
export type ResponseCreateRequest = z.infer<typeof ResponseCreateRequestSchema>;

/** An item of a response's `output`. */
export type ResponseOutputItem =
  | {
      type: 'message';
      id: string;
      status: 'in_progress' | 'completed' | 'incomplete';
      role: 'assistant';
      content: Array<
        { type: 'output_text'; text: string; annotations: unknown[]; logprobs: unknown[] } | { type: 'refusal'; refusal: string }
      >;
    }
  | {
      type: 'function_call';
      id: string;
      call_id: string;
      name: string;
      arguments: string;
      status: 'in_progress' | 'completed' | 'incomplete';
    };

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** The response object (`object: "response"`), with svc's result beside OpenAI's fields as in chat completions. */
export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: 'in_progress' | 'completed' | 'incomplete' | 'failed';
  completed_at: number | null;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: 'max_output_tokens' | 'content_filter' } | null;
  instructions: string | null;
  max_output_tokens: number | null;
  metadata: Record<string, string>;
  model: string;
  output: ResponseOutputItem[];
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  reasoning: { effort: string | null; summary: null };
  store: boolean;
  temperature: number;
  text: { format: z.infer<typeof ResponseTextFormatSchema> };
  tool_choice: z.infer<typeof ResponseToolChoiceSchema>;
  tools: ResponseFunctionTool[];
  top_p: number;
  truncation: 'disabled';
  usage: ResponseUsage | null;
  user: string | null;
  svc?: SvcResult;
}

/** The output items as input items: what `previous_response_id` hands the next turn. */
export function outputAsInput(output: readonly ResponseOutputItem[]): ResponseInputItem[] {
  return output.map((item): ResponseInputItem => {
    if (item.type === 'function_call') {
      return { type: 'function_call', id: item.id, call_id: item.call_id, name: item.name, arguments: item.arguments };
    }
    return { type: 'message', id: item.id, role: 'assistant', content: item.content };
  });
}
