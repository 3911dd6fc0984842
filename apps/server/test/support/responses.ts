import type { ResponseObject } from '@svc/protocol';

/** A completed response object as the server stores it; `text` becomes its one message. */
export function storedResponse(options: { id: string; createdAt: number; previous?: string | null; text?: string }): ResponseObject {
  const { id, createdAt, previous = null, text } = options;
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status: 'completed',
    completed_at: createdAt,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: 4096,
    metadata: {},
    model: 'svc01',
    output:
      text === undefined
        ? []
        : [{ type: 'message', id: `msg_${id}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] }],
    parallel_tool_calls: true,
    previous_response_id: previous,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 0.1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: null,
    user: null,
  };
}
