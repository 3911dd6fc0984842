import { isRecord } from '../is-record.js';

/**
 * The text of an answer, as the grounding check and the audit's `response_text` take it: its `content`, or, for
 * an answer given only as audio (OpenAI's audio models answer `content: null` beside `audio.transcript`), the
 * audio's transcript.
 *
 * @example
 * answerText({ content: null, audio: { id: 'audio_1', data: '…', transcript: 'Paris.' } }); // 'Paris.'
 */
export function answerText(message: { content?: string | null; [field: string]: unknown } | undefined): string {
  if (!message) return '';
  if (typeof message.content === 'string' && message.content !== '') return message.content;
  return audioTranscript(message) ?? '';
}

/**
 * What the model refused with, as the audit's `refusal` takes it: the message's `refusal` (OpenAI answers a
 * refused request `content: null` beside it), or undefined when it has none.
 *
 * @example
 * refusalText({ content: null, refusal: "I can't help with that." }); // "I can't help with that."
 */
export function refusalText(message: { refusal?: unknown } | undefined): string | undefined {
  const refusal = message?.refusal;
  return typeof refusal === 'string' && refusal !== '' ? refusal : undefined;
}

/** `audio.transcript` of a message, or a streamed delta's piece of it, when it is a string. */
export function audioTranscript(fields: Record<string, unknown>): string | undefined {
  const audio = fields.audio;
  return isRecord(audio) && typeof audio.transcript === 'string' ? audio.transcript : undefined;
}
