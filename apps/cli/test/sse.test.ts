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

  it('handles CRLF, multi-line data, other fields and a last event without a blank line', async () => {
    expect(await collect(['event: x\r\ndata: {\r\ndata:  "b": 1}\r\n\r\n', 'id: 7\ndata:last'])).toEqual(['{\n "b": 1}', 'last']);
  });
});
