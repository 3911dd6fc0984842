import { describe, expect, it } from 'vitest';
import { MAX_EVENT_CHARS, SseLimitError, SseParser } from '../../../src/upstream/sse.js';

const events = (parser: SseParser, pieces: string[]) => [...pieces.flatMap((p) => parser.push(p)), ...parser.end()];

describe('SseParser', () => {
  it('reads events split anywhere, a CRLF split between pieces included', () => {
    const stream = 'data: {"a":1}\r\n\r\n: comment\r\nevent: error\r\ndata: one\r\ndata: two\r\n\r\ndata: [DONE]\n\n';
    const whole = events(new SseParser(), [stream]);
    expect(whole).toEqual([
      { event: 'message', data: '{"a":1}' },
      { event: 'error', data: 'one\ntwo' },
      { event: 'message', data: '[DONE]' },
    ]);
    for (let cut = 1; cut < stream.length; cut++) expect(events(new SseParser(), [stream.slice(0, cut), stream.slice(cut)])).toEqual(whole);
    expect(events(new SseParser(), [...stream])).toEqual(whole);
  });

  it('a line that arrives in 100,000 pieces is one event', () => {
    const parser = new SseParser();
    const pieces = ['data: ', ...Array.from({ length: 100_000 }, () => 'xy'), '\n\n'];
    expect(events(parser, pieces)).toEqual([{ event: 'message', data: 'xy'.repeat(100_000) }]);
  });

  it('an event whose end does not come is refused past the limit, not held', () => {
    const parser = new SseParser(1000);
    parser.push('data: ');
    for (let i = 0; i < 99; i++) parser.push('0123456789');
    expect(() => parser.push('0123456789')).toThrow(SseLimitError);
  });

  it('so is a line past the limit that arrives whole, and an event of many data lines', () => {
    expect(() => new SseParser(1000).push(`data: ${'x'.repeat(1000)}`)).toThrow(SseLimitError);
    const parser = new SseParser(1000);
    expect(() => {
      for (let i = 0; i < 20; i++) parser.push(`data: ${'x'.repeat(60)}\n`);
    }).toThrow(/longer than 1000 characters/);
  });

  it('by default an event of 16 MiB less a little is read, and a line one character past 16 MiB refused', () => {
    expect(new SseParser().push(`data: ${'x'.repeat(MAX_EVENT_CHARS - 10)}\n\n`)).toHaveLength(1);
    expect(() => new SseParser().push('x'.repeat(16 * 1024 * 1024 + 1))).toThrow(SseLimitError);
  });

  it("reads an `error:` line (llama.cpp's failure mid-stream) as the data of an error event", () => {
    expect(events(new SseParser(), ['data: {"a":1}\n\nerror: {"code":500,"message":"context full"}\n\n'])).toEqual([
      { event: 'message', data: '{"a":1}' },
      { event: 'error', data: '{"code":500,"message":"context full"}' },
    ]);
  });

  it('reads fields as the standard does: one space after the colon dropped, a line without colon a field of its own', () => {
    const stream = 'data:a\n\ndata:  b\n\ndata\n\nevent:error\ndata: c\n\ndat: d\ndatas: e\nDATA: f\n\n:data: g\n\ndata: h\ndata\ndata: i\n\n';
    expect(events(new SseParser(), [stream])).toEqual([
      { event: 'message', data: 'a' },
      { event: 'message', data: ' b' },
      { event: 'message', data: '' },
      { event: 'error', data: 'c' },
      { event: 'message', data: 'h\n\ni' },
    ]);
  });

  it('an empty read between a CR and its LF changes nothing', () => {
    expect(events(new SseParser(), ['data: a\r', '', '\ndata: b\n\n'])).toEqual([{ event: 'message', data: 'a\nb' }]);
  });
});
