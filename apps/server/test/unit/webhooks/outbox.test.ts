// The outbox hands committed rows to the worker only after the responses waiting on them were written: a
// response is never behind the signing and sending of its own webhook. Real SQLite store; the worker is a
// recorder of what the outbox tells it.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CompletedRequest } from '../../../src/audit/audit-sink.js';
import type { ApiKeyRecord } from '../../../src/storage/keys-store.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { OutboxSink, type OutboxWorker } from '../../../src/webhooks/outbox.js';

let dir: string;
let store: Store;
let key: ApiKeyRecord;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-outbox-'));
  store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
  const user = await store.users.create({ email: 'outbox@example.test', passwordHash: 'x', now: Date.now() });
  key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: randomBytes(8).toString('hex'), now: Date.now(), webhookUrl: 'https://hooks.example.test/in' });
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function completed(requestId: string): CompletedRequest {
  const now = Date.now();
  return {
    requestId,
    key,
    startedAt: now - 5,
    finishedAt: now,
    statusCode: 200,
    streaming: false,
    messages: [{ role: 'user', content: 'hi' }],
    responseText: 'hello',
    svc: null,
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  };
}

/** Records the order of events: the outbox's calls and the moments the test marks. */
function recordingWorker(free: number, events: string[]): OutboxWorker {
  return {
    reserve(count) {
      const take = Math.min(count, free);
      events.push(`reserve ${count} → ${take}`);
      return { take, lease: { until: Date.now() + 60_000, by: 'worker-test' } };
    },
    adopt(rows) {
      events.push(`adopt ${rows.map((r) => r.request_id).join(',')}`);
    },
    unreserve(count) {
      events.push(`unreserve ${count}`);
    },
    wake() {
      events.push('wake');
    },
  };
}

describe('OutboxSink', () => {
  it('resolves every record of a tick with one insert, and hands the rows over after the waiting code ran', async () => {
    const events: string[] = [];
    const sink = new OutboxSink(store.deliveries, recordingWorker(8, events));
    // What the chat route does once its record resolves: write the response (here: mark it).
    const responded = ['req-a', 'req-b'].map((id) => sink.record(completed(id)).then(() => events.push(`respond ${id}`)));
    await Promise.all(responded);
    expect(events).toEqual(['reserve 2 → 2', 'respond req-a', 'respond req-b']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual(['reserve 2 → 2', 'respond req-a', 'respond req-b', 'adopt req-a,req-b']);
    const { rows } = await store.deliveries.list(key.id, { limit: 10 });
    expect(rows.every((r) => r.leased_by === 'worker-test')).toBe(true);
    expect(rows.map((r) => r.request_id).sort()).toEqual(['req-a', 'req-b']);
  });

  it('rows beyond the free slots are inserted unleased and the worker is woken to claim them, also after the responses', async () => {
    const events: string[] = [];
    const sink = new OutboxSink(store.deliveries, recordingWorker(1, events));
    await Promise.all(['req-a', 'req-b', 'req-c'].map((id) => sink.record(completed(id)).then(() => events.push(`respond ${id}`))));
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual(['reserve 3 → 1', 'respond req-a', 'respond req-b', 'respond req-c', 'adopt req-a', 'wake']);
  });

  it('numbers each key’s deliveries in the order recorded, across ticks; the rows handed over carry the stored bytes', async () => {
    const adopted: string[] = [];
    const worker = { ...recordingWorker(8, []), adopt: (rows: Array<{ payload: string }>) => void adopted.push(...rows.map((r) => r.payload)) };
    const sink = new OutboxSink(store.deliveries, worker);
    await Promise.all(['req-a', 'req-b', 'req-c'].map((id) => sink.record(completed(id))));
    await sink.record(completed('req-d'));
    await new Promise((resolve) => setImmediate(resolve));
    const page = await store.deliveries.list(key.id, { limit: 10 });
    const rows = await Promise.all(page.rows.map(async (r) => (await store.deliveries.byId(r.id))!));
    const sequenceOf = Object.fromEntries(rows.map((r) => [r.request_id, JSON.parse(r.payload).sequence]));
    expect(sequenceOf).toEqual({ 'req-a': 1, 'req-b': 2, 'req-c': 3, 'req-d': 4 });
    expect(adopted.sort()).toEqual(rows.map((r) => r.payload).sort());
  });

  it('a key without a webhook URL records nothing', async () => {
    const events: string[] = [];
    const sink = new OutboxSink(store.deliveries, recordingWorker(8, events));
    await sink.record({ ...completed('req-x'), key: { ...key, webhook_url: null } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual([]);
  });

  // pg's error when the connection a query went out on was closed under it: Postgres ended it (pg_terminate_backend,
  // as an operator or a failover does), or a proxy reset it. A soak on Postgres lost the delivery of a client that
  // had left mid-stream (499) this way, and a client waiting for its answer got a 503.
  const lostConnection = () => new Error('Connection terminated unexpectedly');
  /**
   * The store, with its first insert failing as `fail` says: before the commit, or after it (the answer lost); with
   * `alsoDead`, that many more statements (inserts or reads) fail the same way, as on the other connections a
   * pg_terminate_backend of all of svc's ended at once (the pool hands them out until it has seen them closed).
   */
  const failingOnce = (fail: 'before' | 'after', error: () => Error = lostConnection, alsoDead = 0): Store['deliveries'] => {
    let failed = false;
    let dead = alsoDead;
    return new Proxy(store.deliveries, {
      get(target, name, receiver) {
        // The insert's check whether a lost commit had landed (`stateOf`) meets the dead connections too.
        if (name === 'stateOf') {
          return async (id: string) => {
            if (dead-- > 0) throw error();
            return target.stateOf(id);
          };
        }
        if (name !== 'insertSequenced') return Reflect.get(target, name, receiver);
        return async (deliveries: Parameters<Store['deliveries']['insertSequenced']>[0]) => {
          if (failed && dead-- > 0) throw error();
          if (failed) return target.insertSequenced(deliveries);
          failed = true;
          if (fail === 'after') await target.insertSequenced(deliveries);
          throw error();
        };
      },
    });
  };

  it('every connection of the pool ended at once: tried again until one answers', async () => {
    const events: string[] = [];
    const sink = new OutboxSink(failingOnce('before', lostConnection, 2), recordingWorker(8, events));
    await sink.record(completed('req-all-ended'));
    const { rows } = await store.deliveries.list(key.id, { limit: 10 });
    expect(rows.map((r) => r.request_id)).toEqual(['req-all-ended']);
  });

  it('a connection lost under the insert: sent again on another, the record resolves and its row is handed over', async () => {
    const events: string[] = [];
    const sink = new OutboxSink(failingOnce('before'), recordingWorker(8, events));
    await sink.record(completed('req-lost')).then(() => events.push('respond req-lost'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual(['reserve 1 → 1', 'respond req-lost', 'adopt req-lost']);
    const { rows } = await store.deliveries.list(key.id, { limit: 10 });
    expect(rows.map((r) => r.request_id)).toEqual(['req-lost']);
    expect(JSON.parse((await store.deliveries.byId(rows[0]!.id))!.payload).sequence).toBe(1);
  });

  it('a connection lost after the commit: not inserted twice; the worker claims the row', async () => {
    const events: string[] = [];
    const sink = new OutboxSink(failingOnce('after'), recordingWorker(8, events));
    await sink.record(completed('req-landed')).then(() => events.push('respond req-landed'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual(['reserve 1 → 1', 'unreserve 1', 'respond req-landed', 'wake']);
    const { rows } = await store.deliveries.list(key.id, { limit: 10 });
    expect(rows.map((r) => r.request_id)).toEqual(['req-landed']);
  });

  it('another database error is not retried: the record fails', async () => {
    const events: string[] = [];
    const full = () => Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const sink = new OutboxSink(failingOnce('before', full), recordingWorker(8, events));
    await expect(sink.record(completed('req-full'))).rejects.toThrow('database or disk is full');
    expect(events).toEqual(['reserve 1 → 1', 'unreserve 1']);
    expect((await store.deliveries.list(key.id, { limit: 10 })).rows).toEqual([]);
  });
});

