import { describe, expect, it } from 'vitest';
import { sseData } from '../src/sse.js';

async function collect(pieces: string[]): Promise<string[]> {
  async function* body() {
    for (const piece of pieces) yield new TextEncoder().encode(piece);
  }
  const out: string[] = [];
  for await (const data of sseData(body())) out.push(data);
  return out;
}

describe('sseData', () => {
  it('yields the data of each event, across chunk boundaries and multi-byte characters', async () => {
    const text = 'data: {"a":"café"}\n\n: keep-alive\n\ndata: [DONE]\n\n';
    const bytes = new TextEncoder().encode(text);
    async function* body() {
      for (let i = 0; i < bytes.length; i += 3) yield bytes.subarray(i, i + 3);
    }
    const out: string[] = [];
    for await (const data of sseData(body())) out.push(data);
    expect(out).toEqual(['{"a":"café"}', '[DONE]']);
  });

  it('reads a CRLF split between two chunks as one line end, not a line end and a blank line ending the event', async () => {
    expect(await collect(['data: {\r', '\ndata:  "b": 1}\r', '\n\r', '\n', 'data: last\r'])).toEqual(['{\n "b": 1}', 'last']);
  });

  it('handles CRLF, multi-line data, other fields and a last event without a blank line', async () => {
    expect(await collect(['event: x\r\ndata: {\r\ndata:  "b": 1}\r\n\r\n', 'id: 7\ndata:last'])).toEqual(['{\n "b": 1}', 'last']);
  });
});

describe('sseData against a stream that is not svc’s', () => {
  /** A body that has no end for a reader with a limit: `head`, then `piece` 300 times; counts the chunks read. */
  function endless(head: string, piece: string) {
    const pulled = { chunks: 0 };
    async function* body() {
      yield new TextEncoder().encode(head);
      const bytes = new TextEncoder().encode(piece);
      for (let i = 0; i < 300; i++) {
        pulled.chunks++;
        yield bytes;
      }
    }
    return { body: body(), pulled };
  }

  it.each([
    ['a data line without end', 'data: {"x":"', 'a'.repeat(4096)],
    ['data lines without the blank line that ends an event', '', 'data: x\n'.repeat(4096)],
    ['a comment line without end', ': ', 'a'.repeat(4096)],
  ])('%s: refused once the event passes the limit, having read only that far', async (_name, head, piece) => {
    const { body, pulled } = endless(head, piece);
    const read = async () => {
      for await (const _data of sseData(body, 100_000)) {
        // no event ever ends
      }
    };
    await expect(read()).rejects.toThrow('the server sent a stream event over 100000 characters, more than svc sends (is --base-url an svc server?)');
    expect(pulled.chunks).toBeLessThan(60);
  });

  it('events under the limit pass, however many', async () => {
    const events = Array.from({ length: 1000 }, (_, i) => `data: ${i}\n\n`);
    const out: string[] = [];
    async function* body() {
      for (const e of events) yield new TextEncoder().encode(e);
    }
    for await (const data of sseData(body(), 100)) out.push(data);
    expect(out).toHaveLength(1000);
  });
});
