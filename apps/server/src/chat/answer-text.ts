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

/** `audio.transcript` of a message, or a streamed delta's piece of it, when it is a string. */
export function audioTranscript(fields: Record<string, unknown>): string | undefined {
  const audio = fields.audio;
  return isRecord(audio) && typeof audio.transcript === 'string' ? audio.transcript : undefined;
}
