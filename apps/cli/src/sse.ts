import { CliError } from './errors.js';

/**
 * The most characters one event may hold, its lines unfinished included: above the 32 MiB svc streams in all, so
 * only a stream that is not svc's (a line without end) reaches it, and it is refused instead of held until the
 * process runs out of memory.
 */
const MAX_EVENT_CHARS = 64 * 1024 * 1024;

/**
 * The `data` of each Server-Sent Event in a byte stream (multi-line data joined with `\n`, comments and
 * other fields skipped), as OpenAI-style streams send them. An event over `maxEventChars` is a `CliError`.
 *
 * @example
 * for await (const data of sseData(response.body)) if (data !== '[DONE]') handle(JSON.parse(data));
 */
export async function* sseData(body: AsyncIterable<Uint8Array | string>, maxEventChars = MAX_EVENT_CHARS): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const lineEnd = /\r\n|\r|\n/g;
  let buffer = '';
  // The event's data lines so far, joined as they come: no list of a million one-character lines.
  let data: string | undefined;
  for await (const chunk of body) {
    // Searched from where the last search ended: a long line arriving in many chunks is read once, not once per chunk.
    // A CR the last chunk ended with is searched again: with the LF this one may start with, it is one line end.
    lineEnd.lastIndex = buffer.endsWith('\r') ? buffer.length - 1 : buffer.length;
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let lineStart = 0;
    let match: RegExpExecArray | null;
    while ((match = lineEnd.exec(buffer)) !== null) {
      // A CR ending the chunk: its LF, if any, comes with the next one.
      if (match[0] === '\r' && match.index === buffer.length - 1) break;
      const line = buffer.slice(lineStart, match.index);
      lineStart = match.index + match[0].length;
      if (line === '') {
        if (data !== undefined) yield data;
        data = undefined;
      } else if (line.startsWith('data:')) {
        const value = line.slice(line.startsWith('data: ') ? 6 : 5);
        data = data === undefined ? value : `${data}\n${value}`;
      }
    }
    buffer = buffer.slice(lineStart);
    if (buffer.length + (data?.length ?? 0) > maxEventChars) {
      throw new CliError(`the server sent a stream event over ${maxEventChars >= 1024 * 1024 ? `${maxEventChars / 1024 / 1024} MiB` : `${maxEventChars} characters`}, more than svc sends (is --base-url an svc server?)`);
    }
  }
  buffer += decoder.decode();
  if (buffer.endsWith('\r')) buffer = buffer.slice(0, -1);
  if (buffer.startsWith('data:')) {
    const value = buffer.slice(buffer.startsWith('data: ') ? 6 : 5);
    data = data === undefined ? value : `${data}\n${value}`;
  }
  if (data !== undefined) yield data;
}
