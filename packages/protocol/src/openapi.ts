import { OpenAPIRegistry, OpenApiGeneratorV31, zodToOpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { AUDIT_EVENT, AuditPayloadSchema } from './audit-payload.js';
import {
  ChatCompletionRequestSchema,
  ChatMessageSchema,
  CustomToolSchema,
  FunctionToolSchema,
  SvcRequestConfigSchema,
  ToolCallSchema,
  ToolChoiceSchema,
} from './chat-request.js';
import {
  ChatCompletionChunkSchema,
  ChatCompletionSchema,
  ChoiceSchema,
  ChunkChoiceSchema,
  FlaggedSpanSchema,
  ModelListSchema,
  ModelSchema,
  SvcResultSchema,
  UsageSchema,
} from './chat-response.js';
import { ERROR_CODES, ErrorBodySchema, type ErrorCode } from './errors.js';
import { ResponseCreateWireRequestSchema, ResponseInputItemSchema, ResponseObjectSchema } from './responses.js';
import {
  DeliveryAttemptSchema,
  DeliveryDetailSchema,
  DeliveryListQuerySchema,
  DeliveryListSchema,
  DeliverySchema,
  DeliveryStatusSchema,
  WebhookTestResultSchema,
  WebhookTestRequestSchema,
  BulkRedeliverRequestSchema,
  BulkRedeliverResultSchema,
} from './webhooks.js';
import { DELIVERY_ID_PATTERN, DELIVERY_LIST_LIMITS, REDELIVERY_MAX } from './delivery-list-query.js';

/** The generated document: a plain JSON object (OpenAPI 3.1.0). */
export type OpenApiDocument = ReturnType<OpenApiGeneratorV31['generateDocument']>;

export interface OpenApiOptions {
  /** `info.version`: the version of the API description. Default `1.0.0` (the `/v1` API). */
  version?: string;
  /** `servers[0].url`. Default `http://127.0.0.1:8080` (the embedded default). */
  serverUrl?: string;
}

/**
 * Names the protocol schemas as OpenAPI components, so that every use of one becomes a `$ref`. Stored in
 * zod-to-openapi's own registry (keyed by schema instance): the protocol schemas stay as they are and
 * zod's global registry is left alone.
 */
const COMPONENTS: ReadonlyArray<[string, z.ZodType, string]> = [
  ['ChatCompletionRequest', ChatCompletionRequestSchema, 'The chat-completions request body: every standard field typed, unknown fields passed upstream.'],
  ['ChatMessage', ChatMessageSchema, 'One message of the conversation.'],
  ['FunctionTool', FunctionToolSchema, 'A tool the model may call; `parameters` is a JSON Schema.'],
  ['CustomTool', CustomToolSchema, 'A tool the model calls with free text (`input`), unconstrained or following a grammar.'],
  ['ToolChoice', ToolChoiceSchema, 'Tool selection behaviour. Default `auto`.'],
  ['ToolCall', ToolCallSchema, 'A tool call made by the model.'],
  ['SvcRequestConfig', SvcRequestConfigSchema, 'Service-specific config. `thinking` (default false) enables deep reasoning (temperature fixed at 1.0); `dehallucinate` (default true) runs the grounding check.'],
  ['ChatCompletion', ChatCompletionSchema, 'A non-streamed chat completion; `svc` carries the grounding result.'],
  ['Choice', ChoiceSchema, 'One choice of a completion.'],
  ['Usage', UsageSchema, 'Token counts (from upstream, else counted with the o200k_base tokenizer).'],
  ['SvcResult', SvcResultSchema, 'Grounding result. `checked` is true only when the check ran; `grounded`/`score` are `true`/`1` when not checked. `score` is 0..1, 1 = fully supported.'],
  ['FlaggedSpan', FlaggedSpanSchema, 'A span of the first choice\'s `message.content` the check could not support; UTF-16 offsets, `text` = `content.slice(start, end)`.'],
  ['ChatCompletionChunk', ChatCompletionChunkSchema, 'One streamed frame (`data: <chunk>`). The frame with the first choice\'s `finish_reason` also carries `svc`; a `choices: []` usage frame follows only with `stream_options.include_usage`.'],
  ['ChunkChoice', ChunkChoiceSchema, 'One choice delta of a streamed frame.'],
  ['Model', ModelSchema, 'A model this service answers to.'],
  ['ModelList', ModelListSchema, 'The models this service answers to (`svc01`).'],
  ['ErrorBody', ErrorBodySchema, 'Every error: `{ "error": { message, type, code, param } }`. `param` is null when none, and absent only on the test-webhook no-URL error.'],
  ['WebhookTestResult', WebhookTestResultSchema, 'Outcome of the synchronous test delivery; `status_code`, `error` and `response_body` (the first 2 KB of the answer) only when `success` is false.'],
  ['WebhookTestRequest', WebhookTestRequestSchema, 'Optional body of the test endpoint: the sample payload to send (`ok` by default).'],
  ['Delivery', DeliverySchema, 'A webhook delivery in the outbox. `request_status_code` is the status the original request got from svc.'],
  ['BulkRedeliverRequest', BulkRedeliverRequestSchema, 'Which deliveries of the calling key to send again, by the terms a deliveries list takes: state, request id, creation time range (`since` inclusive, `until` exclusive), the last attempt\'s HTTP code (`500` or `5xx`).'],
  ['BulkRedeliverResult', BulkRedeliverResultSchema, 'How many deliveries matched (at most `limit`) and how many were made due again.'],
  ['DeliveryStatus', DeliveryStatusSchema, 'Delivery state.'],
  ['DeliveryAttempt', DeliveryAttemptSchema, 'One attempt: time, status code, duration, error, first 2 KB of the response body.'],
  ['DeliveryDetail', DeliveryDetailSchema, 'A delivery with its attempts and the exact payload bytes that are signed and sent.'],
  ['DeliveryList', DeliveryListSchema, 'A page of deliveries, newest first; pass `next_cursor` as `before` for the next page.'],
  ['AuditPayload', AuditPayloadSchema, 'The `llm.request.completed` audit payload. `test` is present (and true) only on test deliveries; `sequence` only on the others.'],
];

const ERROR_MESSAGES: Record<ErrorCode, string> = {
  invalid_json: "We could not parse the JSON body of your request. Send valid JSON with 'Content-Type: application/json'.",
  missing_required_parameter: "Missing required parameter: 'messages'.",
  invalid_type: "Invalid type for 'temperature': expected a number, but got a string.",
  invalid_value: "Invalid value for 'temperature': must be between 0 and 2.",
  model_not_found: "The model 'gpt-4' does not exist. Use 'svc01'.",
  upstream_invalid_request: "The upstream model rejected the request: 'top_p' is not supported with this model.",
  invalid_request: 'No webhook URL is configured for this API key. Set one in the dashboard under Settings, API Keys, then try again.',
  missing_api_key: 'You did not provide an API key. Send it as "Authorization: Bearer <API_KEY>".',
  invalid_api_key: 'Incorrect API key provided.',
  not_found: "No webhook delivery 'whd_…' exists for this API key.",
  request_too_large: 'The request body is larger than the 10 MiB limit.',
  rate_limit_exceeded: 'Rate limit reached: 600 requests per minute for this API key. Retry after 12s.',
  upstream_rate_limited: 'Upstream rate limit reached: Rate limit reached for requests. Retry after the time in `retry-after`.',
  too_many_requests_in_flight: 'This server is answering its maximum of 4096 requests at once. Retry after 1 s.',
  upstream_error: 'Upstream failed: the model is overloaded.',
  upstream_timeout: 'Upstream did not complete within 120000 ms.',
  upstream_unavailable: 'Could not reach the upstream or the connection was lost.',
  upstream_invalid_response: 'Upstream sent a stream frame that is not JSON.',
  internal_error: 'The server had an error while processing your request. Please retry.',
  database_unavailable: "The server's database is unavailable right now. Please retry shortly.",
};

const STATUS_TEXT: Record<number, string> = {
  400: 'Invalid request',
  401: 'Missing or invalid API key',
  404: 'Not found',
  413: 'Request body over 10 MiB',
  429: 'Rate limit exceeded (see `retry-after`)',
  500: 'Internal error',
  503: "The server's database is unavailable (a full disk, a lock, a restart); retry after `retry-after`",
  502: 'Upstream failure',
};

const header = (description: string, schema: { type: 'string' | 'integer'; pattern?: string; example?: string | number }) => ({ description, schema });

/** Sent on every authenticated response (design §4). */
const RATE_LIMIT_HEADERS = {
  'x-ratelimit-limit-requests': header('Requests per minute allowed for this key.', { type: 'integer', example: 600 }),
  'x-ratelimit-remaining-requests': header('Requests left in the current window.', { type: 'integer', example: 599 }),
  'x-ratelimit-reset-requests': header('Time until the window resets, in OpenAI\'s duration form.', { type: 'string', example: '12s' }),
};
const REQUEST_ID_HEADER = {
  'x-request-id': header('Request id; for chat completions also the completion `id` and the webhook `request_id`.', { type: 'string', example: 'chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9' }),
};

/** Error responses for `codes`, grouped by status, with one named example per code. */
function errorResponses(codes: readonly ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const { status } = ERROR_CODES[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<number, object> = {};
  for (const [status, list] of byStatus) {
    responses[status] = {
      description: `${STATUS_TEXT[status] ?? 'Error'}. Codes: ${list.map((c) => `\`${c}\``).join(', ')}.`,
      headers: {
        ...REQUEST_ID_HEADER,
        ...(status === 503 ? { 'retry-after': header('Seconds to wait before retrying.', { type: 'integer', example: 5 }) } : {}),
        ...(status === 429
          ? {
              'retry-after': header('Seconds to wait before retrying.', { type: 'integer', example: 12 }),
              'retry-after-ms': header('Milliseconds to wait before retrying (svc\'s own limit; what the OpenAI SDKs read first).', { type: 'integer', example: 11250 }),
            }
          : {}),
      },
      content: {
        'application/json': {
          schema: ErrorBodySchema,
          examples: Object.fromEntries(
            list.map((code) => {
              const { type } = ERROR_CODES[code];
              const noParam = code === 'invalid_request';
              const error = { message: ERROR_MESSAGES[code], type, code, ...(noParam ? {} : { param: paramOf(code) }) };
              return [code, { summary: code, value: { error } }];
            }),
          ),
        },
      },
    };
  }
  return responses;
}

function paramOf(code: ErrorCode): string | null {
  switch (code) {
    case 'missing_required_parameter':
      return 'messages';
    case 'invalid_type':
    case 'invalid_value':
      return 'temperature';
    case 'model_not_found':
      return 'model';
    case 'not_found':
      return 'id';
    default:
      return null;
  }
}

const AUTH_ERRORS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limit_exceeded', 'internal_error', 'database_unavailable'];

const json = (schema: z.ZodType, description: string, headers: object = {}) => ({
  description,
  headers: { ...REQUEST_ID_HEADER, ...RATE_LIMIT_HEADERS, ...headers },
  content: { 'application/json': { schema } },
});

const listQuery = DeliveryListQuerySchema.shape;

const DeliveryIdParams = z.object({
  id: z.string().regex(DELIVERY_ID_PATTERN).meta({ description: 'Delivery id (`whd_` + 32 hex).', example: 'whd_0f8e6c2a9b7d4e1f8a3c5b7d9e1f2a3b' }),
});

/**
 * Builds the OpenAPI 3.1 document of the public API from the `@svc/protocol` schemas: every route, the
 * bearer scheme, every error code of design §4, and the audit webhook as a `webhooks` entry.
 *
 * @example
 * const doc = buildOpenApiDocument();
 * writeFileSync('docs/openapi.json', JSON.stringify(doc, null, 2));
 */
export function buildOpenApiDocument(options: OpenApiOptions = {}): OpenApiDocument {
  for (const [refId, schema, description] of COMPONENTS) {
    zodToOpenAPIRegistry.add(schema, { _internal: { refId }, description });
  }
  const registry = new OpenAPIRegistry();
  const bearer = registry.registerComponent('securitySchemes', 'ApiKey', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key: `Authorization: Bearer <API_KEY>`. Create one with `svc-server keys create` or in the dashboard.',
  });
  registry.registerComponent('securitySchemes', 'MetricsToken', {
    type: 'http',
    scheme: 'bearer',
    description: 'The value of `SVC_METRICS_TOKEN`. When it is unset, `/metrics` answers only to loopback clients (no token) and is a 404 for everyone else.',
  });
  const apiKey = [{ [bearer.name]: [] }];

  registry.registerPath({
    method: 'post',
    path: '/v1/chat/completions',
    operationId: 'createChatCompletion',
    tags: ['Chat'],
    summary: 'Create a chat completion',
    description:
      'OpenAI-compatible chat completions plus the optional `svc` config object. `model` must be `svc01`; `max_tokens` defaults to 4096 and `temperature` to 0.1 (1.0 in thinking mode); upstream, the limit goes as `max_completion_tokens` to OpenAI reasoning models (o1, o3, o4-mini, gpt-5, …, which also get no temperature but 1) and as `max_tokens` to others. ' +
      'An upstream\'s own 400/413/422 about the request comes back as a 400 with its message, code and param; its 429 as a 429 `upstream_rate_limited`. ' +
      'With `stream: true` the answer is sent as server-sent events: `data: <ChatCompletionChunk>` frames, then `data: [DONE]`. ' +
      'An error after the stream started is sent as one `data: <ErrorBody>` frame and the stream closes. ' +
      'After the request, the audit webhook `llm.request.completed` is sent if the key has a webhook URL.',
    security: apiKey,
    request: { body: { required: true, content: { 'application/json': { schema: ChatCompletionRequestSchema } } } },
    responses: {
      200: {
        description: 'The completion (`application/json`), or, with `stream: true`, a stream of SSE frames (`text/event-stream`).',
        headers: {
          ...REQUEST_ID_HEADER,
          ...RATE_LIMIT_HEADERS,
          'x-svc-checked': header('Non-streamed only: `svc.checked`, for clients that hide unknown body fields.', { type: 'string', example: 'true' }),
          'x-svc-grounded': header('Non-streamed only: `svc.grounded`.', { type: 'string', example: 'true' }),
          'x-svc-score': header('Non-streamed only: `svc.score`.', { type: 'string', example: '0.93' }),
        },
        content: {
          'application/json': { schema: ChatCompletionSchema },
          'text/event-stream': {
            schema: z.union([ChatCompletionChunkSchema, ErrorBodySchema]).meta({
              description:
                'The JSON of one `data:` line: a ChatCompletionChunk, or an ErrorBody when the stream fails after it started. The stream ends with `data: [DONE]`.',
            }),
          },
        },
      },
      ...errorResponses([
        'invalid_json',
        'missing_required_parameter',
        'invalid_type',
        'invalid_value',
        'model_not_found',
        'invalid_request',
        'upstream_invalid_request',
        'request_too_large',
        'upstream_rate_limited',
        'upstream_error',
        'upstream_timeout',
        'upstream_unavailable',
        'upstream_invalid_response',
        'too_many_requests_in_flight',
        ...AUTH_ERRORS,
      ]),
    },
  });

  registry.registerPath({
    method: 'get',
    path: '/v1/models',
    operationId: 'listModels',
    tags: ['Models'],
    summary: 'List models',
    security: apiKey,
    responses: { 200: json(ModelListSchema, 'The model list (`svc01`).'), ...errorResponses(AUTH_ERRORS) },
  });

  registry.registerPath({
    method: 'get',
    path: '/v1/models/{model}',
    operationId: 'retrieveModel',
    tags: ['Models'],
    summary: 'Retrieve a model',
    security: apiKey,
    request: { params: z.object({ model: z.string().meta({ description: 'Model id.', example: 'svc01' }) }) },
    responses: { 200: json(ModelSchema, 'The model (`svc01`).'), ...errorResponses(['model_not_found', ...AUTH_ERRORS]) },
  });

  const ResponseIdParams = z.object({ response_id: z.string().meta({ description: 'A response id.', example: 'resp_0123456789abcdef' }) });
  registry.registerPath({
    method: 'post',
    path: '/v1/responses',
    operationId: 'createResponse',
    tags: ['Responses'],
    summary: 'Create a response (OpenAI Responses API)',
    description:
      'The Responses API for `svc01`, served over the same upstream chat completions, grounding check, rate limit and audit webhook as chat. ' +
      '`input` is a string or items (messages, `function_call`, `function_call_output`, `item_reference` to a stored output item); function `tools` only (a built-in tool type such as `web_search` is a 400). ' +
      'Stored per key unless `store: false`, for `previous_response_id` and `GET`; purged after `SVC_RETENTION_DAYS`. ' +
      'With `stream: true`: server-sent events `event: <type>` / `data: <event>` in OpenAI\'s order (`response.created`, `response.in_progress`, `response.output_item.added`, `response.content_part.added`, `response.output_text.delta`, …, `response.completed`), each with a `sequence_number`; a stream that fails after it started ends with `response.failed`.',
    security: apiKey,
    request: { body: { required: true, content: { 'application/json': { schema: ResponseCreateWireRequestSchema } } } },
    responses: {
      200: {
        description: 'The response (`application/json`), or, with `stream: true`, its events (`text/event-stream`).',
        headers: { ...REQUEST_ID_HEADER, ...RATE_LIMIT_HEADERS },
        content: {
          'application/json': { schema: ResponseObjectSchema },
          'text/event-stream': {
            schema: z.looseObject({ type: z.string(), sequence_number: z.int().min(0) }).meta({ description: 'The JSON of one event\'s `data:` line.' }),
          },
        },
      },
      ...errorResponses([
        'invalid_json',
        'missing_required_parameter',
        'invalid_type',
        'invalid_value',
        'model_not_found',
        'not_found',
        'upstream_invalid_request',
        'request_too_large',
        'upstream_rate_limited',
        'upstream_error',
        'upstream_timeout',
        'upstream_unavailable',
        'upstream_invalid_response',
        'too_many_requests_in_flight',
        ...AUTH_ERRORS,
      ]),
    },
  });
  registry.registerPath({
    method: 'get',
    path: '/v1/responses/{response_id}',
    operationId: 'retrieveResponse',
    tags: ['Responses'],
    summary: 'Retrieve a stored response, or stream a background response again',
    description:
      'Without `stream` (or with `stream=false`): the response as stored. With `stream=true` (the SDKs\' `retrieve(id, { stream: true, starting_after })`): the events of a response created with `background: true` and `stream: true`, from any process or instance — those numbered after `starting_after` (all of them without it) as they were sent, then the rest as they come, until its last event (`response.completed`, `.incomplete` or `.failed`); one that already ended is replayed and the stream closes. ' +
      'A response created otherwise is a 400 `invalid_value` naming `stream`, as is one whose kept events passed `SVC_RESPONSE_STREAM_MAX_BYTES` (a reader following it when that happens gets an `error` event). The events are kept as long as the response, and deleted with it.',
    security: apiKey,
    request: {
      params: ResponseIdParams,
      query: z.object({
        stream: z.enum(['true', 'false']).optional().meta({ description: '`true`: the events of a background stream again (`text/event-stream`).' }),
        starting_after: z.int().min(0).optional().meta({ description: 'With `stream=true`: the `sequence_number` of the last event received; the stream starts after it.' }),
      }),
    },
    responses: {
      200: {
        description: 'The response (`application/json`), or, with `stream=true`, its events (`text/event-stream`).',
        headers: { ...REQUEST_ID_HEADER, ...RATE_LIMIT_HEADERS },
        content: {
          'application/json': { schema: ResponseObjectSchema },
          'text/event-stream': {
            schema: z.looseObject({ type: z.string(), sequence_number: z.int().min(0) }).meta({ description: 'The JSON of one event\'s `data:` line.' }),
          },
        },
      },
      ...errorResponses(['invalid_value', 'not_found', ...AUTH_ERRORS]),
    },
  });
  registry.registerPath({
    method: 'delete',
    path: '/v1/responses/{response_id}',
    operationId: 'deleteResponse',
    tags: ['Responses'],
    summary: 'Delete a stored response',
    security: apiKey,
    request: { params: ResponseIdParams },
    responses: {
      200: json(z.object({ id: z.string(), object: z.literal('response'), deleted: z.literal(true) }), 'Deleted.'),
      ...errorResponses(['not_found', ...AUTH_ERRORS]),
    },
  });
  registry.registerPath({
    method: 'post',
    path: '/v1/responses/{response_id}/cancel',
    operationId: 'cancelResponse',
    tags: ['Responses'],
    summary: 'Cancel a background response',
    description:
      'OpenAI\'s cancel for a response created with `background: true`, from any process or instance. One still running is stopped and returned `cancelled`; one already in its final status is returned as it is (cancelling twice returns it again, as OpenAI does). A response created without `background` is a 400.',
    security: apiKey,
    request: { params: ResponseIdParams },
    responses: {
      200: json(ResponseObjectSchema, 'The response, `cancelled` or in the final status it reached first.'),
      ...errorResponses(['not_found', 'invalid_request', ...AUTH_ERRORS]),
    },
  });
  registry.registerPath({
    method: 'get',
    path: '/v1/responses/{response_id}/input_items',
    operationId: 'listResponseInputItems',
    tags: ['Responses'],
    summary: "List a stored response's input items",
    security: apiKey,
    request: {
      params: ResponseIdParams,
      query: z.object({
        order: z.enum(['asc', 'desc']).optional().meta({ description: 'Default `desc` (newest first).' }),
        limit: z.int().min(1).max(100).optional().meta({ description: 'Default 20.' }),
        after: z.string().optional().meta({ description: 'An item id: the page starts after it.' }),
      }),
    },
    responses: {
      200: json(
        z.object({
          object: z.literal('list'),
          data: z.array(ResponseInputItemSchema),
          first_id: z.string().nullable(),
          last_id: z.string().nullable(),
          has_more: z.boolean(),
        }),
        'The items the response was generated from, each with its id and `status` (`completed` unless it was sent with another): the conversation carried over by `previous_response_id`, then the request\'s own input items.',
      ),
      ...errorResponses(['not_found', 'invalid_value', ...AUTH_ERRORS]),
    },
  });

  registry.registerPath({
    method: 'post',
    path: '/v1/webhooks/test',
    operationId: 'testWebhook',
    tags: ['Webhooks'],
    summary: 'Send a test delivery',
    description:
      'Sends one test payload (`test: true`, `request_id: "test-<id>"`) to the webhook URL of the calling key, synchronously, signed like real deliveries. ' +
      '200 with `success: false` when the receiver did not answer 2xx. The optional body picks the sample: `ok` (default), `failed` (a 502 with no answer), `ungrounded` (a flagged answer), `streamed`.',
    security: apiKey,
    request: { body: { required: false, content: { 'application/json': { schema: WebhookTestRequestSchema } } } },
    responses: {
      200: json(WebhookTestResultSchema, 'The outcome of the attempt.'),
      ...errorResponses(['invalid_request', 'invalid_value', ...AUTH_ERRORS]),
    },
  });

  registry.registerPath({
    method: 'get',
    path: '/v1/webhooks/deliveries',
    operationId: 'listDeliveries',
    tags: ['Webhooks'],
    summary: 'List deliveries of the calling key',
    security: apiKey,
    request: {
      query: z.object({
        limit: listQuery.limit.meta({ description: `Page size, 1–${DELIVERY_LIST_LIMITS.max}. Default ${DELIVERY_LIST_LIMITS.default}.` }),
        status: listQuery.status.meta({ description: 'Only deliveries in this state.' }),
        before: listQuery.before.meta({ description: 'A delivery id (`next_cursor` of the previous page): only older deliveries.' }),
        request_id: listQuery.request_id.meta({ description: 'Only deliveries of this request (`chatcmpl-…`, or `test-…` for a test send).' }),
        since: listQuery.since.meta({ description: 'Only deliveries created at or after this time (ISO 8601).' }),
        until: listQuery.until.meta({ description: 'Only deliveries created before this time (ISO 8601).' }),
        last_status_code: listQuery.last_status_code.meta({ description: "Only deliveries whose last attempt got this HTTP status (`503`) or one of its class (`5xx`)." }),
      }),
    },
    responses: {
      200: json(DeliveryListSchema, 'Deliveries, newest first.'),
      ...errorResponses(['invalid_value', ...AUTH_ERRORS]),
    },
  });

  registry.registerPath({
    method: 'get',
    path: '/v1/webhooks/deliveries/{id}',
    operationId: 'getDelivery',
    tags: ['Webhooks'],
    summary: 'Show a delivery with its attempts and payload',
    security: apiKey,
    request: { params: DeliveryIdParams },
    responses: {
      200: json(DeliveryDetailSchema, 'The delivery.'),
      ...errorResponses(['not_found', ...AUTH_ERRORS]),
    },
  });

  registry.registerPath({
    method: 'post',
    path: '/v1/webhooks/deliveries/{id}/redeliver',
    operationId: 'redeliverDelivery',
    tags: ['Webhooks'],
    summary: 'Send a delivery again now',
    description: 'Queues a new attempt now, with the same bytes and the same delivery id (receivers de-duplicate on `X-Svc-Delivery`).',
    security: apiKey,
    request: { params: DeliveryIdParams },
    responses: {
      202: json(DeliverySchema, 'The delivery, pending again.'),
      ...errorResponses(['not_found', 'invalid_request', ...AUTH_ERRORS]),
    },
  });

  registry.registerPath({
    method: 'post',
    path: '/v1/webhooks/deliveries/redeliver',
    operationId: 'redeliverDeliveries',
    tags: ['Webhooks'],
    summary: 'Send every matching delivery again',
    description:
      `Queues a new attempt now for each delivery of the calling key that matches the filter (same bytes, same delivery ids), newest first, at most ${REDELIVERY_MAX} per call: call again for more. ` +
      '`dry_run: true` only counts. Not counted against the chat rate limit.',
    security: apiKey,
    request: { body: { required: false, content: { 'application/json': { schema: BulkRedeliverRequestSchema } } } },
    responses: {
      200: json(BulkRedeliverResultSchema, 'How many matched and were redelivered.'),
      ...errorResponses(['invalid_value', 'invalid_request', ...AUTH_ERRORS]),
    },
  });

  registry.registerPath({
    method: 'post',
    path: '/v1/webhooks/deliveries/{id}/cancel',
    operationId: 'cancelDelivery',
    tags: ['Webhooks'],
    summary: 'Stop a pending delivery',
    description:
      'Marks a pending delivery `cancelled` (no more attempts; `last_error` gives the reason). An attempt already in flight finishes and is logged. Redeliver resumes it.',
    security: apiKey,
    request: { params: DeliveryIdParams },
    responses: {
      200: json(DeliverySchema, 'The delivery, cancelled.'),
      ...errorResponses(['not_found', 'invalid_request', ...AUTH_ERRORS]),
    },
  });

  const status = z.object({ status: z.string() });
  for (const [path, summary] of [
    ['/healthz', 'Process is up'],
    ['/readyz', 'Database is reachable (503 when not)'],
  ] as const) {
    registry.registerPath({
      method: 'get',
      path,
      tags: ['Operations'],
      summary,
      security: [],
      responses: {
        200: { description: summary, content: { 'application/json': { schema: status } } },
        ...(path === '/readyz' ? { 503: { description: 'Database unreachable', content: { 'application/json': { schema: status } } } } : {}),
      },
    });
  }
  registry.registerPath({
    method: 'get',
    path: '/v1/openapi.json',
    operationId: 'getOpenApiDocument',
    tags: ['Operations'],
    summary: 'This document',
    security: [],
    responses: { 200: { description: 'The OpenAPI 3.1 document.', content: { 'application/json': { schema: z.record(z.string(), z.unknown()) } } } },
  });
  registry.registerPath({
    method: 'get',
    path: '/metrics',
    operationId: 'getMetrics',
    tags: ['Operations'],
    summary: 'Prometheus metrics',
    description: 'Prometheus text exposition format. Needs `Authorization: Bearer $SVC_METRICS_TOKEN`; when `SVC_METRICS_TOKEN` is unset, only loopback clients are answered.',
    security: [{ MetricsToken: [] }],
    responses: {
      200: { description: 'Metrics', content: { 'text/plain; version=0.0.4': { schema: z.string() } } },
      401: { description: 'Missing or wrong metrics token (`missing_api_key`, `invalid_api_key`).', content: { 'application/json': { schema: ErrorBodySchema } } },
      404: { description: 'No metrics token is configured and the client is not on loopback (`not_found`).', content: { 'application/json': { schema: ErrorBodySchema } } },
    },
  });

  registry.registerWebhook({
    method: 'post',
    path: AUDIT_EVENT,
    operationId: 'llmRequestCompleted',
    tags: ['Webhooks'],
    summary: 'Audit payload of a completed request',
    description:
      'POSTed to the webhook URL of the key after every chat-completion request made with a valid key (400 and 502 included; 401 and 429 not), and by `POST /v1/webhooks/test` with `test: true`. ' +
      'At-least-once: any 2xx acknowledges; anything else (or no answer within `SVC_WEBHOOK_TIMEOUT_MS`) is retried per `SVC_WEBHOOK_RETRY_SCHEDULE`, honouring a longer `Retry-After`. ' +
      'Verify `X-Svc-Signature` over the raw body bytes before parsing, comparing in constant time (`@svc/verify`).',
    request: {
      headers: z.object({
        'X-Svc-Event': z.literal(AUDIT_EVENT).meta({ description: 'The event name.' }),
        'X-Svc-Delivery': z.string().regex(/^whd_[0-9a-f]{32}$/).meta({
          description: 'Delivery id, the same on every attempt and redelivery: de-duplicate on it.',
          example: 'whd_0f8e6c2a9b7d4e1f8a3c5b7d9e1f2a3b',
        }),
        'X-Svc-Signature': z.string().regex(/^sha256=[0-9a-f]{64}$/).optional().meta({
          description:
            'Present only when the key has a signing secret: `sha256=` + lowercase hex HMAC-SHA256 of the raw request body bytes, keyed with the secret\'s UTF-8 bytes.',
          example: 'sha256=5d41402abc4b2a76b9719d911017c592ae7d3c1c0b1c2f6f0e7a3a6b9f0c1d2e',
        }),
        'User-Agent': z.string().meta({ description: '`svc-webhooks/<version>`.', example: 'svc-webhooks/0.1.0' }),
      }),
      body: { required: true, content: { 'application/json': { schema: AuditPayloadSchema } } },
    },
    responses: {
      200: { description: 'Any 2xx status acknowledges the delivery; the body is ignored (the first 2 KB are kept in the attempt log).' },
      default: { description: 'Any other status, a timeout or a connection failure is a failed attempt and is retried.' },
    },
  });

  // Every named schema becomes a component, also those only reached from `webhooks` (which the generator skips).
  const definitions = [...registry.definitions, ...COMPONENTS.map(([, schema]) => ({ type: 'schema' as const, schema }))];
  return new OpenApiGeneratorV31(definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'svc API',
      version: options.version ?? '1.0.0',
      description:
        'OpenAI-compatible chat completions with a grounding check (`svc`), and audit webhooks. Every `/v1` route needs `Authorization: Bearer <API_KEY>`.',
    },
    servers: [{ url: options.serverUrl ?? 'http://127.0.0.1:8080', description: 'The embedded default (SVC_HOST:SVC_PORT).' }],
    security: apiKey,
    tags: [
      { name: 'Chat' },
      { name: 'Models' },
      { name: 'Webhooks' },
      { name: 'Operations', description: 'Health, readiness, this document and metrics; no API key.' },
    ],
  });
}
