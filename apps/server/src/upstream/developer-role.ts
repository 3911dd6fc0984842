import { isReasoningModel } from './token-limit.js';
import type { UpstreamBody } from './upstream.js';

/**
 * `body` with its `developer` messages sent as `system` messages, unless the model is one of OpenAI's reasoning
 * families (token-limit.ts), for which `developer` is the native role. OpenAI's other models take `system` as
 * they take `developer`; Ollama's OpenAI-compatible API drops a `developer` message without a word (the model
 * never sees the instructions), and servers with a strict role list (vLLM and llama.cpp builds, many chat
 * templates) refuse it with a 400. `body` itself when it has none.
 *
 * @example
 * developerAsSystem({ model: 'llama3.1', messages: [{ role: 'developer', content: 'Be brief.' }] })
 * // → { model: 'llama3.1', messages: [{ role: 'system', content: 'Be brief.' }] }
 */
export function developerAsSystem(body: UpstreamBody): UpstreamBody {
  const { messages } = body;
  let first = -1;
  for (let i = 0; i < messages.length; i++) {
    if (isDeveloper(messages[i])) {
      first = i;
      break;
    }
  }
  if (first === -1 || isReasoningModel(body.model)) return body;
  const out = messages.slice();
  for (let i = first; i < out.length; i++) if (isDeveloper(out[i])) out[i] = { ...(out[i] as object), role: 'system' };
  return { ...body, messages: out };
}

function isDeveloper(message: unknown): boolean {
  return typeof message === 'object' && message !== null && (message as { role?: unknown }).role === 'developer';
}
