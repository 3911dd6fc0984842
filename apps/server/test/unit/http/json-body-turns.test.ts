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

/** Counts turns of the event loop (one per check phase) while `work` runs; the turn of each JSON.parse call. */
async function parseTurns(work: () => Promise<unknown>): Promise<number[]> {
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  const turns: number[] = [];
  const parse = JSON.parse;
  vi.spyOn(JSON, 'parse').mockImplementation((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    turns.push(turn);
    return parse(text, reviver);
  });
  await work();
  ticking = false;
  return turns;
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
    expect(turns).toHaveLength(2);
    expect(turns[1]).toBeGreaterThan(turns[0]!);
  });

  it('parses small bodies at once, in the turn they finish in', async () => {
    const bodies = [request('{"name":"a"}'), request('{"name":"b"}')];
    const turns = await parseTurns(() => {
      const parsed = bodies.map(({ req }) => readJsonBody(req));
      for (const { send } of bodies) send();
      return Promise.all(parsed);
    });
    expect(turns).toHaveLength(2);
    expect(turns[1]).toBe(turns[0]);
  });
});
