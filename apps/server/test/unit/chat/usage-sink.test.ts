import { describe, expect, it } from 'vitest';
import pino from 'pino';
import type { UsageIncrement, UsageStore } from '../../../src/storage/usage-store.js';
import type { CompletedRequest } from '../../../src/audit/audit-sink.js';
import { UsageSink } from '../../../src/chat/usage-sink.js';

function sinkWithStore() {
  const written: UsageIncrement[] = [];
  const store = { add: async (batch: UsageIncrement[]) => void written.push(...batch) } as unknown as UsageStore;
  return { sink: new UsageSink(store, pino({ level: 'silent' }), 60_000), written };
}

const at = (finishedAt: number) =>
  ({ finishedAt, key: { id: 'k1', user_id: 'u1' }, usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } }) as unknown as CompletedRequest;

describe('UsageSink', () => {
  it('counts each request on its UTC day, across midnight and before 1970', async () => {
    const { sink, written } = sinkWithStore();
    const midnight = Date.UTC(2026, 10, 23);
    for (const t of [midnight - 1, midnight, midnight + 1, midnight - 1, Date.UTC(1969, 11, 31, 23), Date.UTC(1970, 0, 1)]) await sink.record(at(t));
    await sink.close();
    const byDay = Object.fromEntries(written.map((w) => [w.day, w.requests]));
    expect(byDay).toEqual({ '2026-11-22': 2, '2026-11-23': 2, '1969-12-31': 1, '1970-01-01': 1 });
    expect(written.every((w) => w.inputTokens === 2 * w.requests && w.outputTokens === 3 * w.requests)).toBe(true);
  });

  it('counts errors by status class, latency buckets and ungrounded answers among the checked ones', async () => {
    const { sink, written } = sinkWithStore();
    const day = Date.UTC(2026, 10, 23, 12);
    const request = (statusCode: number, latencyMs: number, svc: { checked: boolean; grounded: boolean } | null) =>
      ({ ...at(day), startedAt: day - latencyMs, statusCode, svc }) as unknown as CompletedRequest;
    await sink.record(request(200, 80, { checked: true, grounded: true }));
    await sink.record(request(200, 700, { checked: true, grounded: false }));
    await sink.record(request(200, 90, { checked: false, grounded: true }));
    await sink.record(request(429, 5, null));
    await sink.record(request(502, 40_000, null));
    await sink.close();
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({ requests: 5, errors4xx: 1, errors5xx: 1, groundingChecked: 2, ungrounded: 1, latency: [3, 0, 0, 1, 0, 0, 0, 0, 1] });
  });

  it('writes one batch at a time: a write the database holds is not joined by another', async () => {
    let writing = 0;
    let most = 0;
    const written: number[] = [];
    const releases: Array<() => void> = [];
    const store = {
      add: async (batch: UsageIncrement[]) => {
        writing += 1;
        most = Math.max(most, writing);
        await new Promise<void>((resolve) => releases.push(resolve));
        written.push(batch.reduce((n, inc) => n + inc.requests, 0));
        writing -= 1;
      },
    } as unknown as UsageStore;
    const sink = new UsageSink(store, pino({ level: 'silent' }), 60_000);
    const day = Date.UTC(2026, 10, 30);
    await sink.record(at(day));
    const first = sink.flush();
    await sink.record(at(day));
    await sink.record(at(day));
    const second = sink.flush(); // the next second's flush, while the first write still waits
    while (releases.length < 1) await new Promise((resolve) => setImmediate(resolve));
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(releases).toHaveLength(1);
    releases.shift()!();
    await first;
    while (releases.length < 1) await new Promise((resolve) => setImmediate(resolve));
    releases.shift()!();
    await second;
    await sink.close();
    expect(most).toBe(1);
    expect(written).toEqual([1, 2]);
  });
});
