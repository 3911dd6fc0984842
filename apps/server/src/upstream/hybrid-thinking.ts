import { isRecord } from '../is-record.js';
import type { UpstreamBody } from './upstream.js';

/**
 * Hybrid models think or answer at once by a switch in their chat template, which servers that render the template
 * (vLLM, SGLang, llama.cpp's server) take as `chat_template_kwargs`: Qwen3's and Qwen3.5's hybrids (`Qwen/Qwen3-8B`,
 * `Qwen3-30B-A3B`; not the `-Instruct`, `-Thinking` or `-Coder` releases, which only answer or only think) and
 * GLM-4.5 and later read `enable_thinking` (on unless false); DeepSeek-V3.1 and V3.2 read `thinking` (off unless
 * true). Optionally behind an organisation or router prefix.
 */
const ENABLE_THINKING = /(?:^|[/:_-])(?:qwen3(?:\.\d+)?(?![^/]*-(?:instruct|thinking|coder|embedding|reranker))|glm-4\.[5-9]|glm-[5-9])/i;
const THINKING = /(?:^|[/:_-])deepseek-v3\.[12](?:$|[^\d])/i;

/**
 * Ollama's OpenAI-compatible API renders the template itself and ignores `chat_template_kwargs`: it turns a hybrid's
 * thinking off only for `reasoning_effort: "none"`. Its model names carry a `:tag` (`qwen3:8b`, `qwen3:latest`).
 */
const OLLAMA_TAG = /:[\w.-]+$/;

/**
 * How the switch is chosen (SVC_UPSTREAM_THINKING_SWITCH): `auto` by the upstream model's name; `off` never sent (a
 * host that refuses `chat_template_kwargs`, or an operator who wants the model's own default); `enable_thinking` or
 * `thinking` sent under that key whatever the name (a hybrid served as `local` or under a name of the operator's own).
 */
export type ThinkingSwitch = 'auto' | 'off' | 'enable_thinking' | 'thinking';

/**
 * `body` with the hybrid model's thinking switched as `svc.thinking` asks (off unless it is true), in the form its
 * server takes (see `ENABLE_THINKING`, `THINKING`, `OLLAMA_TAG`); `body` itself for every other model. The client's
 * own `chat_template_kwargs` keys win; its `reasoning_effort` goes on as sent while thinking is on. Without this, a hybrid
 * served for both modes (`SVC_UPSTREAM_THINKING_MODEL` left at `SVC_UPSTREAM_MODEL`) thinks on every request, and
 * `svc.thinking: false` changes only the temperature.
 *
 * @example
 * withThinkingSwitch({ model: 'Qwen/Qwen3-8B', messages }, false) // → { …, chat_template_kwargs: { enable_thinking: false } }
 * withThinkingSwitch({ model: 'qwen3:8b', messages }, false) // → { …, chat_template_kwargs: { enable_thinking: false }, reasoning_effort: 'none' }
 */
export function withThinkingSwitch(body: UpstreamBody, thinking: boolean, mode: ThinkingSwitch = 'auto'): UpstreamBody {
  const key = mode === 'off' ? null : mode !== 'auto' ? mode : ENABLE_THINKING.test(body.model) ? 'enable_thinking' : THINKING.test(body.model) ? 'thinking' : null;
  if (key === null) return body;
  const own = isRecord(body.chat_template_kwargs) ? body.chat_template_kwargs : {};
  const out: UpstreamBody = { ...body, chat_template_kwargs: { [key]: thinking, ...own } };
  // An app sets `reasoning_effort` once for both modes (docs/upstreams.md, "The token-limit rule"): with thinking off, Ollama
  // would read it as thinking on.
  if (!thinking && key === 'enable_thinking' && OLLAMA_TAG.test(body.model)) out.reasoning_effort = 'none';
  return out;
}
