/** One server-sent event: its `event` name (default "message") and its joined `data` lines. */
export interface SseEvent {
  event: string;
  data: string;
}

/**
 * Characters one event (or one line) may have: an upstream's frame is a token or a tool call's arguments, kilobytes;
 * one that never ends would otherwise be held, and grow, until the upstream timeout.
 */
export const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/** A line or an event of the stream passed the parser's limit. */
export class SseLimitError extends Error {
  constructor(readonly limit: number) {
    super(`Upstream sent a stream event longer than ${limit} characters.`);
    this.name = 'SseLimitError';
  }
}

/**
 * Incremental parser for `text/event-stream` (WHATWG HTML §9.2): feed it decoded text in any pieces —
 * frames may be split anywhere, even inside a `\r\n` — and it returns the events completed so far.
 * Comment lines (`:`), `id:` and `retry:` are ignored; several `data:` lines join with `\n`. One field beyond the
 * standard: an `error:` line is the data of an `error` event, as llama.cpp's server sends a failure mid-stream
 * (`error: {"code":500,"message":…}`), which the standard would drop and leave a bare end of stream.
 *
 * @example
 * const parser = new SseParser();
 * parser.push('data: {"a"'); // []
 * parser.push(':1}\n\n');     // [{ event: 'message', data: '{"a":1}' }]
 */
export class SseParser {
  /** The start of a line whose end has not come yet. */
  private buffer = '';
  /** Pieces of that line read since without a line break: kept apart until one comes (see `push`). */
  private pieces: string[] = [];
  /** Characters of the line so far (`buffer` and `pieces`). */
  private lineLength = 0;
  /**
   * The event's first `data` line, and the lines after it: nearly every event has one line, and keeping it
   * apart makes no array per event (nor a join of one).
   */
  private data: string | null = null;
  private moreData: string[] | null = null;
  private dataLength = 0;
  private event = '';
  /** The previous piece ended in `\r`: a `\n` starting the next piece belongs to that line end. */
  private pendingCr = false;

  constructor(private readonly maxEventChars = MAX_EVENT_CHARS) {}

  /** Throws `SseLimitError` when a line or an event grows past `maxEventChars`. */
  push(text: string): SseEvent[] {
    // An empty read says nothing, not even that a `\n` did not follow a pending `\r`.
    if (text === '') return [];
    if (this.pendingCr && text.startsWith('\n')) text = text.slice(1);
    this.pendingCr = false;
    // A piece without a line break only lengthens the line: it is set aside, not appended and searched, so a
    // line that arrives in a thousand reads is searched once, not a thousand times over its growing length.
    if (text.indexOf('\n') === -1 && text.indexOf('\r') === -1) {
      this.lineLength += text.length;
      if (this.lineLength > this.maxEventChars) throw new SseLimitError(this.maxEventChars);
      if (text !== '') this.pieces.push(text);
      return [];
    }
    if (this.pieces.length > 0) {
      this.buffer += this.pieces.join('');
      this.pieces = [];
    }
    this.buffer += text;
    // Made with its first event: a read is nearly always one frame, and an array grown by push from empty
    // reserves room for 17.
    let events: SseEvent[] | null = null;
    let start = 0;
    // The next `\r` is looked up again only once passed: most streams have none, and searching the rest of
    // the buffer for one at every line would be quadratic in the lines of a read.
    let cr = this.buffer.indexOf('\r');
    for (;;) {
      if (cr !== -1 && cr < start) cr = this.buffer.indexOf('\r', start);
      const lf = this.buffer.indexOf('\n', start);
      if (cr === -1 && lf === -1) break;
      let end: number;
      let next: number;
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr;
        if (cr + 1 === this.buffer.length) {
          // A lone `\r` at the end: the line is complete, but a `\n` may follow in the next piece.
          this.pendingCr = true;
          next = cr + 1;
        } else {
          next = this.buffer[cr + 1] === '\n' ? cr + 2 : cr + 1;
        }
      } else {
        end = lf;
        next = lf + 1;
      }
      const event = this.line(this.buffer.slice(start, end));
      if (event) {
        if (events === null) events = [event];
        else events.push(event);
      }
      start = next;
    }
    this.buffer = this.buffer.slice(start);
    this.lineLength = this.buffer.length;
    if (this.lineLength > this.maxEventChars) throw new SseLimitError(this.maxEventChars);
    return events ?? [];
  }

  /**
   * End of input: the last line and event are dispatched even without their line break and blank line
   * (the standard drops them, but some servers end with `data: [DONE]\n`; a cut-off JSON frame still
   * fails to parse downstream).
   */
  end(): SseEvent[] {
    const events: SseEvent[] = [];
    if (this.pieces.length > 0) {
      this.buffer += this.pieces.join('');
      this.pieces = [];
    }
    if (this.buffer !== '') {
      const event = this.line(this.buffer);
      if (event) events.push(event);
      this.buffer = '';
    }
    this.lineLength = 0;
    const last = this.line('');
    if (last) events.push(last);
    return events;
  }

  private line(line: string): SseEvent | null {
    if (line === '') {
      const { data, moreData } = this;
      if (data === null) {
        this.event = '';
        return null;
      }
      const event = { event: this.event || 'message', data: moreData === null ? data : [data, ...moreData].join('\n') };
      this.data = null;
      this.moreData = null;
      this.dataLength = 0;
      this.event = '';
      return event;
    }
    if (line.charCodeAt(0) === 58 /* : */) return null;
    // Every frame passes here: the field is compared in place and the value sliced once (no space after the
    // colon, or one), not sliced apart into strings of their own.
    const colon = line.indexOf(':');
    const fieldEnd = colon === -1 ? line.length : colon;
    const valueStart = colon === -1 ? line.length : line.charCodeAt(colon + 1) === 32 /* space */ ? colon + 2 : colon + 1;
    const error = isField(line, fieldEnd, 'error');
    if (error || isField(line, fieldEnd, 'data')) {
      if (error) this.event = 'error';
      const value = line.slice(valueStart);
      this.dataLength += value.length + 1;
      if (this.dataLength > this.maxEventChars) throw new SseLimitError(this.maxEventChars);
      if (this.data === null) this.data = value;
      else (this.moreData ??= []).push(value);
    } else if (isField(line, fieldEnd, 'event')) this.event = line.slice(valueStart);
    return null;
  }
}

/** Whether `line`'s field (its characters before `fieldEnd`) is `name`. */
function isField(line: string, fieldEnd: number, name: string): boolean {
  return fieldEnd === name.length && line.startsWith(name);
}
