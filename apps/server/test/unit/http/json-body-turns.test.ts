import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readJsonBody } from '../../../src/http/json-body.js';

/** A request whose body is `json`, arriving in 64 KiB chunks and ending in the same tick as the others'. */
function request(json: string): { req: IncomingMessage; send: () => void } {
  const body = Buffer.from(json);
  const req = Object.assign(new PassThrough(), { headers: { 'content-length': String(body.length), 'content-type': 'application/json' } });
  return {
    req: req as unknown as IncomingMessage,
    send: () => {
      for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.subarray(i, i + 64 * 1024));
      req.end();
    },
  };
}

/** Counts turns of the event loop (one per check phase) while `work` runs; the turn of each JSON.parse call and the length of its text. */
async function parseTurns(work: () => Promise<unknown>): Promise<Array<{ turn: number; length: number }>> {
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  const calls: Array<{ turn: number; length: number }> = [];
  const parse = JSON.parse;
  vi.spyOn(JSON, 'parse').mockImplementation((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    calls.push({ turn, length: text.length });
    return parse(text, reviver);
  });
  await work();
  ticking = false;
  return calls;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('readJsonBody', () => {
  it('parses two large bodies that finish together in turns of their own, so other requests go between', async () => {
    const text = (name: string) => JSON.stringify({ name, text: 'The tower is 330 metres tall. '.repeat(70_000) });
    const bodies = [request(text('a')), request(text('b'))];
    const turns = await parseTurns(() => {
      const parsed = bodies.map(({ req }) => readJsonBody(req));
      for (const { send } of bodies) send();
      return Promise.all(parsed);
    });
    const large = turns.filter((call) => call.length > 1024 * 1024);
    expect(large).toHaveLength(2);
    expect(large[1]!.turn).toBeGreaterThan(large[0]!.turn);
  });

  it('parses a body of 250,000 messages a part at a time, never in one JSON.parse of its 9 MiB', async () => {
    const messages = Array.from({ length: 250_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}` }));
    const body = request(JSON.stringify({ model: 'svc01', messages }));
    const turns = await parseTurns(() => {
      const parsed = readJsonBody(body.req);
      body.send();
      return parsed;
    });
    expect(Math.max(...turns.map((call) => call.length))).toBeLessThan(256 * 1024);
    expect(new Set(turns.map((call) => call.turn)).size).toBeGreaterThan(1);
  });

  it('parses small bodies at once, in the turn they finish in', async () => {
    const bodies = [request('{"name":"a"}'), request('{"name":"b"}')];
    const turns = await parseTurns(() => {
      const parsed = bodies.map(({ req }) => readJsonBody(req));
      for (const { send } of bodies) send();
      return Promise.all(parsed);
    });
    expect(turns).toHaveLength(2);
    expect(turns[1]!.turn).toBe(turns[0]!.turn);
  });
});
