import { messageText } from '@svc/protocol';
import { countTokensBounded, loadTokenizer } from '../tokens/tokenizer.js';
import { turns } from '../turns.js';
import type { Usage } from '@svc/protocol';

interface MessageLike {
  role?: unknown;
  content?: unknown;
}

function asMessages(messages: unknown): MessageLike[] {
  return Array.isArray(messages) ? messages.filter((m): m is MessageLike => typeof m === 'object' && m !== null) : [];
}

/** The roles whose messages are grounding sources: earlier assistant turns are not evidence. */
function isSourceRole(role: unknown): boolean {
  return role === 'system' || role === 'developer' || role === 'user' || role === 'tool';
}

/** Grounding sources: every system, developer, user and tool message; earlier assistant turns are not evidence. */
export function groundingSources(messages: unknown): string[] {
  return groundingSourceMessages(messages).texts;
}

/** The grounding sources and, for each, the index of its message in the request's `messages`. */
export function groundingSourceMessages(messages: unknown): { texts: string[]; messageIndex: number[] } {
  const texts: string[] = [];
  const messageIndex: number[] = [];
  const list = Array.isArray(messages) ? (messages as unknown[]) : [];
  for (let i = 0; i < list.length; i++) {
    const m = list[i];
    if (typeof m !== 'object' || m === null) continue;
    const { role, content } = m as MessageLike;
    if (!isSourceRole(role)) continue;
    const text = messageText(content);
    if (text.trim() === '') continue;
    texts.push(text);
    messageIndex.push(i);
  }
  return { texts, messageIndex };
}

/**
 * The content parts of the grounding sources that are not text (`image_url`, `file`, `input_audio`, …), with the
 * index of their message: what the model saw there the check cannot see.
 */
export function unreadableSourceParts(messages: unknown): { message_index: number; type: string }[] {
  const out: { message_index: number; type: string }[] = [];
  const list = Array.isArray(messages) ? (messages as unknown[]) : [];
  for (let i = 0; i < list.length; i++) {
    const m = list[i];
    if (typeof m !== 'object' || m === null) continue;
    const { role, content } = m as MessageLike;
    if (!isSourceRole(role) || !Array.isArray(content)) continue;
    for (const part of content) {
      const type = part && typeof part === 'object' ? (part as { type?: unknown }).type : undefined;
      if (typeof type === 'string' && type !== 'text') out.push({ message_index: i, type });
    }
  }
  return out;
}

/** The index in `messages` of the last user message (the question), or -1. */
export function lastUserIndex(messages: unknown): number {
  const list = Array.isArray(messages) ? (messages as unknown[]) : [];
  for (let i = list.length - 1; i >= 0; i--) {
    const m = list[i];
    if (typeof m === 'object' && m !== null && (m as MessageLike).role === 'user') return i;
  }
  return -1;
}

/** The last user message's text (the question the answer responds to). */
export function lastUserText(messages: unknown): string | undefined {
  const at = lastUserIndex(messages);
  return at === -1 ? undefined : messageText((messages as MessageLike[])[at]!.content);
}

// OpenAI's chat format adds a few tokens of framing per message and for the reply.
const TOKENS_PER_MESSAGE = 3;
const REPLY_PRIMING_TOKENS = 3;

/**
 * Token counts (o200k_base) for when upstream reports no usage. Each text is counted with
 * `countTokensBounded`: exactly up to 128 Ki characters, estimated beyond, yielding to the event loop as it
 * goes — a 10 MiB message or a 500 MB streamed answer costs a bounded, interleaved amount of CPU. All the
 * texts share one clock of turns (`turn`), so 20,000 short messages yield too.
 */
export async function countUsage(messages: unknown, completionTexts: string[], turn: () => boolean = turns()): Promise<Usage> {
  await loadTokenizer();
  let prompt = REPLY_PRIMING_TOKENS;
  for (const m of asMessages(messages)) {
    prompt += TOKENS_PER_MESSAGE + (await countTokensBounded(`${typeof m.role === 'string' ? m.role : ''}\n${messageText(m.content)}`, turn));
  }
  let completion = 0;
  for (const text of completionTexts) completion += await countTokensBounded(text ?? '', turn);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}
