import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { constructEvent, createGapTracker, type GapReport } from '@svc/verify';
import { createTestPostgres } from './support/databases.js';
import { adminCommand, SERVER_BIN, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { eventually, startReceiver, type ReceivedDelivery, type Receiver } from './support/webhooks.js';

// design §5: every audit delivery of a key carries `sequence`, 1, 2, 3, … without gaps or repeats.

const postgres = await createTestPostgres('webhooks-sequence');
const servers: ServerProcess[] = [];
const receivers: Receiver[] = [];
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(() => {
  if (!existsSync(SERVER_BIN)) throw new Error(`${SERVER_BIN} is missing: build first (npx turbo run build --filter=@svc/server)`);
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
  await Promise.all(receivers.splice(0).map((r) => r.close()));
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

afterAll(async () => {
  await postgres?.drop();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

const payloadOf = (raw: Buffer | string) => JSON.parse(raw.toString()) as { request_id: string; sequence?: number };

/** POSTs `count` chat completions with `key`, `concurrency` at a time, round-robin over `urls`; the ids answered 200. */
async function chatLoad(urls: string[], key: string, count: number, concurrency = 8): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const res = await fetch(`${urls[i % urls.length]}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: `Say ${i}` }] }),
        });
        const body = (await res.json()) as { id: string };
        expect(res.status).toBe(200);
        ids.push(body.id);
      }
    }),
  );
  return ids;
}

/** 1..n. */
const oneTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const sortedSequences = (list: ReceivedDelivery[]) => list.map((d) => payloadOf(d.raw).sequence ?? 0).sort((a, b) => a - b);

describe.skipIf(!postgres)('sequence across two instances on one Postgres database', () => {
  it('two keys, 250 requests each sent concurrently through both instances: each key gets exactly 1..250', async () => {
    const env = serverEnv({
      SVC_DATABASE_URL: postgres!.url,
      SVC_SECRET_KEY: randomBytes(32).toString('base64'),
      SVC_RATE_LIMIT_RPM: '100000',
      SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,400ms,800ms,1s,1s,1s',
    });
    adminCommand(['migrate'], env);
    adminCommand(['users', 'create', '--email', 'seq@example.com', '--password', 'long-enough-pw'], env);
    servers.push(await startServerProcess(env), await startServerProcess(env));
    const urls = servers.map((s) => s.url);
    const keys = await Promise.all(
      [0, 1].map(async () => {
        const r = await receiver();
        const { key } = JSON.parse(adminCommand(['keys', 'create', '--email', 'seq@example.com', '--json', '--webhook-url', r.url], env)) as { key: string };
        return { key, receiver: r };
      }),
    );
    const N = 250;
    await Promise.all(keys.map(({ key }) => chatLoad(urls, key, N, 12)));
    for (const { receiver: r } of keys) {
      await r.waitFor((list) => new Set(list.map((d) => d.headers['x-svc-delivery'])).size >= N, 60_000);
      const byDelivery = new Map(r.received.map((d) => [String(d.headers['x-svc-delivery']), d]));
      expect(byDelivery.size).toBe(N);
      expect(sortedSequences([...byDelivery.values()])).toEqual(oneTo(N));
    }
  }, 180_000);
});

describe('sequence across a SIGKILL and a restart on SQLite', () => {
  it('continues after the last recorded delivery: no repeats, no holes among the recorded ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-sequence-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'svc.db');
    const env = serverEnv({ SVC_DATABASE_URL: `sqlite:${file}`, SVC_RATE_LIMIT_RPM: '100000', SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms' });
    const r = await receiver();
    adminCommand(['users', 'create', '--email', 'seq@example.com', '--password', 'long-enough-pw'], env);
    const { key, id: keyId } = JSON.parse(adminCommand(['keys', 'create', '--email', 'seq@example.com', '--json', '--webhook-url', r.url], env)) as { key: string; id: string };

    const first = await startServerProcess(env);
    servers.push(first);
    // Load that keeps going until the kill: requests are cut mid-way, some recorded, some not.
    const load = chatLoad([first.url], key, 100_000, 8).catch(() => undefined);
    await r.waitFor((list) => list.length >= 60, 30_000);
    await first.stop('SIGKILL');
    await load;

    const second = await startServerProcess(env);
    servers.push(second);
    const after = await chatLoad([second.url], key, 40, 4);

    const sqlite = new Database(file, { readonly: true });
    cleanups.push(() => void sqlite.close());
    const rows = sqlite.prepare('select payload from webhook_deliveries where key_id = ?').all(keyId) as Array<{ payload: string }>;
    const recorded = rows.map((row) => payloadOf(row.payload).sequence ?? 0).sort((a, b) => a - b);
    expect(recorded).toEqual(oneTo(rows.length));
    // The deliveries recorded after the restart come after every one recorded before it.
    const afterRestart = rows.map((row) => payloadOf(row.payload)).filter((p) => after.includes(p.request_id)).map((p) => p.sequence!);
    expect(Math.min(...afterRestart)).toBe(rows.length - after.length + 1);

    // Everything recorded is delivered (the restart resumes the pending ones), each number once.
    await r.waitFor((list) => new Set(list.map((d) => d.headers['x-svc-delivery'])).size >= rows.length, 30_000);
    const byDelivery = new Map(r.received.map((d) => [String(d.headers['x-svc-delivery']), d]));
    expect(sortedSequences([...byDelivery.values()])).toEqual(oneTo(rows.length));
  }, 120_000);
});

describe('a receiver that acknowledges a delivery without keeping it', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('the @svc/verify gap tracker reports the dropped number, and the hole closes on redelivery; test deliveries take no number', async () => {
    const SECRET = 'whsec_sequence-gap';
    const r = await receiver();
    server = await startTestServer();
    const { token, key } = await server.createKey({ webhookUrl: r.url, signingSecret: SECRET });
    // The flaky receiver's side: verify, then track — except delivery 3, answered 200 and lost.
    const gaps = createGapTracker({ start: 1 });
    const reports: GapReport[] = [];
    let processed = 0;
    const handle = async (raw: Buffer, header: string) => {
      const event = constructEvent(raw, header, SECRET);
      processed++;
      if (event.sequence === 3 && processed === 3) return;
      reports.push(await gaps.track(event.user_id, event.sequence!));
    };

    // A test delivery has no number and takes none.
    const test = await fetch(`${server.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(await test.json()).toMatchObject({ success: true });
    expect(payloadOf(r.received[0]!.raw)).not.toHaveProperty('sequence');

    for (let i = 1; i <= 5; i++) {
      await chatLoad([server.url], token, 1, 1);
      const [delivery] = await r.waitFor((list) => list.length >= i + 1).then((list) => list.slice(i));
      await handle(delivery!.raw, String(delivery!.headers['x-svc-signature']));
    }
    const three = [{ from: 3, to: 3 }];
    expect(reports.map((report) => report.missing)).toEqual([[], [], three, three]);
    expect(reports[2]).toMatchObject({ skipped: three, skippedCount: 1 });

    // The receiver finds the delivery by its number and asks for it again: same bytes, the hole closes.
    const { store } = server.running;
    const listed = await Promise.all((await store.deliveries.list(key.id, { limit: 10 })).rows.map(async (row) => (await store.deliveries.byId(row.id))!));
    const lost = listed.find((row) => payloadOf(row.payload).sequence === 3)!;
    await eventually(async () => (await server!.running.store.deliveries.byId(lost.id))?.status === 'delivered');
    const res = await fetch(`${server.url}/v1/webhooks/deliveries/${lost.id}/redeliver`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(res.status, await res.text()).toBe(202);
    const [again] = await r.waitFor((list) => list.length >= 7).then((list) => list.slice(6));
    expect(again!.raw.equals(Buffer.from(lost.payload))).toBe(true);
    await handle(again!.raw, String(again!.headers['x-svc-signature']));
    expect(reports.at(-1)).toMatchObject({ missing: [], missingCount: 0, late: true });
  });
});
