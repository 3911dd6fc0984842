import { z } from 'zod';
import { ToolCallSchema } from './chat-request.js';

/** A span of the answer that the grounding check could not support. UTF-16 offsets into the content. */
export const FlaggedSpanSchema = z.object({
  start: z.int().min(0),
  end: z.int().min(0),
  text: z.string(),
  reason: z.string(),
  score: z.number().min(0).max(1),
});
export type FlaggedSpan = z.infer<typeof FlaggedSpanSchema>;

/**
 * The passage of the request that best supports a claim: `messages[message_index]`'s text (its text parts
 * joined as the audit prompt joins them), UTF-16 offsets into it.
 */
export const EvidenceSchema = z.object({
  message_index: z.int().min(0),
  start: z.int().min(0),
  end: z.int().min(0),
  text: z.string(),
  /** Share of the claim's words, names and numbers the passage holds. */
  score: z.number().min(0).max(1),
});
export type Evidence = z.infer<typeof EvidenceSchema>;

/** One checkable sentence of the answer, how well the sources support it, and where. */
export const ClaimSchema = z.object({
  start: z.int().min(0),
  end: z.int().min(0),
  text: z.string(),
  score: z.number().min(0).max(1),
  grounded: z.boolean(),
  evidence: EvidenceSchema.nullable(),
});
export type Claim = z.infer<typeof ClaimSchema>;

/** A content part of the sources the grounding check cannot read: where it is, and its `type` (`image_url`, `file`, …). */
export const UnreadablePartSchema = z.object({ message_index: z.number().int().nonnegative(), type: z.string() });

/** The `svc` object of a response (spec §2.4, design §3); `claims` is an addition beside the spec's fields. */
export const SvcResultSchema = z.object({
  dehallucinate_requested: z.boolean(),
  grounded: z.boolean(),
  score: z.number().min(0).max(1),
  flagged_spans: z.array(FlaggedSpanSchema),
  checked: z.boolean(),
  claims: z.array(ClaimSchema).optional(),
  /**
   * Content parts of the sources the check cannot read (an image, a file, audio), by message: an answer may
   * say what the model saw in them, so it is not checked against the text alone. An addition beside the spec's fields.
   */
  unreadable_parts: z.array(UnreadablePartSchema).optional(),
});
export type SvcResult = z.infer<typeof SvcResultSchema>;

export const UsageSchema = z.looseObject({
  prompt_tokens: z.int().min(0),
  completion_tokens: z.int().min(0),
  total_tokens: z.int().min(0),
});
export type Usage = z.infer<typeof UsageSchema>;

export const FinishReasonSchema = z.enum(['stop', 'length', 'tool_calls', 'content_filter', 'function_call']);
export type FinishReason = z.infer<typeof FinishReasonSchema>;

export const ResponseMessageSchema = z.looseObject({
  role: z.literal('assistant'),
  content: z.string().nullable(),
  refusal: z.string().nullable().optional(),
  tool_calls: z.array(ToolCallSchema).optional(),
  reasoning_content: z.string().optional(),
});
export type ResponseMessage = z.infer<typeof ResponseMessageSchema>;

export const ChoiceSchema = z.looseObject({
  index: z.int().min(0),
  message: ResponseMessageSchema,
  finish_reason: FinishReasonSchema.nullable(),
  logprobs: z.unknown().nullable().optional(),
});
export type Choice = z.infer<typeof ChoiceSchema>;

/** Non-streamed chat completion (spec §2.3). */
export const ChatCompletionSchema = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.int(),
  model: z.string(),
  choices: z.array(ChoiceSchema),
  usage: UsageSchema,
  service_tier: z.string().nullable().optional(),
  system_fingerprint: z.string().nullable().optional(),
  svc: SvcResultSchema,
});
export type ChatCompletion = z.infer<typeof ChatCompletionSchema>;

/** A fragment of a call; a custom tool's call streams its `custom.input` in pieces, as a function's streams `arguments`. */
export const ToolCallDeltaSchema = z.looseObject({
  index: z.int().min(0),
  id: z.string().optional(),
  type: z.enum(['function', 'custom']).optional(),
  function: z.looseObject({ name: z.string().optional(), arguments: z.string().optional() }).optional(),
  custom: z.looseObject({ name: z.string().optional(), input: z.string().optional() }).optional(),
});
export type ToolCallDelta = z.infer<typeof ToolCallDeltaSchema>;

export const ChunkChoiceSchema = z.looseObject({
  index: z.int().min(0),
  delta: z.looseObject({
    role: z.literal('assistant').optional(),
    content: z.string().nullable().optional(),
    reasoning_content: z.string().optional(),
    refusal: z.string().nullable().optional(),
    tool_calls: z.array(ToolCallDeltaSchema).optional(),
  }),
  // OpenAI's order on the wire: a frame received in it is relayed without copying its choices.
  logprobs: z.unknown().nullable().optional(),
  finish_reason: FinishReasonSchema.nullable(),
});
export type ChunkChoice = z.infer<typeof ChunkChoiceSchema>;

/** One streamed frame (`data: <chunk>`); the frame with `finish_reason` also carries `svc`. */
export const ChatCompletionChunkSchema = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion.chunk'),
  created: z.int(),
  model: z.string(),
  choices: z.array(ChunkChoiceSchema),
  // A union, not `.nullable()`: the OpenAPI document then says `anyOf: [Usage, null]` (frames before the usage frame carry `usage: null`).
  usage: z.union([UsageSchema, z.null()]).optional(),
  service_tier: z.string().nullable().optional(),
  system_fingerprint: z.string().nullable().optional(),
  svc: SvcResultSchema.optional(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunkSchema>;

export const ModelSchema = z.object({ id: z.string(), object: z.literal('model'), created: z.int(), owned_by: z.string() });
export type Model = z.infer<typeof ModelSchema>;

export const ModelListSchema = z.object({
  object: z.literal('list'),
  data: z.array(ModelSchema),
});
export type ModelList = z.infer<typeof ModelListSchema>;
