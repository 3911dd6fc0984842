import { isRecord } from '../is-record.js';

/**
 * The text and the reasoning of an answer's `content` given as a list of parts, as Mistral's reasoning models
 * (Magistral) send it in a non-streamed message and in each streamed delta:
 * `[{"type":"thinking","thinking":[{"type":"text","text":…}]}, {"type":"text","text":…}]`. svc answers with
 * the text as `content` and the reasoning as `reasoning_content`, as it does for every other reasoning server;
 * OpenAI's clients take `content` as a string only. Text parts are joined with `separator` (a streamed delta's
 * parts are pieces of one text; a message's, paragraphs); any other part is left out.
 *
 * @example
 * contentParts([{ type: 'thinking', thinking: [{ type: 'text', text: 'Hm.' }] }, { type: 'text', text: 'Hi' }], '');
 * // { text: 'Hi', reasoning: 'Hm.' }
 */
export function contentParts(parts: readonly unknown[], separator: string): { text: string; reasoning: string } {
  const text: string[] = [];
  let reasoning = '';
  for (const part of parts) {
    if (!isRecord(part)) continue;
    if (part.type === 'text' && typeof part.text === 'string') text.push(part.text);
    else if (part.type === 'thinking') reasoning += thinkingText(part.thinking);
  }
  return { text: text.join(separator), reasoning };
}

/** A thinking part's `thinking`: text parts (Mistral's form), or a string. */
function thinkingText(thinking: unknown): string {
  if (typeof thinking === 'string') return thinking;
  if (!Array.isArray(thinking)) return '';
  let out = '';
  for (const part of thinking) if (isRecord(part) && part.type === 'text' && typeof part.text === 'string') out += part.text;
  return out;
}
