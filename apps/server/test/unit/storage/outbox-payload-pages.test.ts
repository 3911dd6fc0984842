// A delivery of a long RAG request: its payload (the whole prompt) is megabytes. Kept in the delivery's row, it was
// an overflow chain SQLite walked to read or write any column after it: each attempt, lease, redeliver and cancel
// rewrote the megabytes on the event loop (a bulk redeliver of 224 deliveries of 9.6 MB held it 19.6 s, another
// user's chat completion waiting 92.8 s). Counted in pages, not timed: the pages each write adds to the WAL, and
// the overflow pages of the deliveries table (what a page of the list or a status read walks).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/storage/store.js';
import { newDeliveryId, type NewDelivery } from '../../../src/storage/outbox-store.js';
import { deliveryView } from '../../../src/webhooks/delivery-shapes.js';
import { PURGE_BYTES } from '../../../src/storage/outbox-sql.js';

const T0 = 1_700_000_000_000;
const PROMPT_BYTES = 4 * 1024 * 1024;
/** More than a small row's leaf page and the index pages its columns touch; a 4 MB chain is some 500 pages of 8 KiB. */
const FEW_PAGES = 16;

describe('a delivery with a payload of megabytes, on SQLite', () => {
  let store: Store;
  let dir: string;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-payload-pages-'));
    store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function delivery(): NewDelivery {
    const id = newDeliveryId();
    const payload = JSON.stringify({ event: 'llm.request.completed', request_id: `chatcmpl-${id}`, status_code: 200, prompt: 'r'.repeat(PROMPT_BYTES) });
    return { id, keyId: 'key_a', userId: 'u', event: 'llm.request.completed', requestId: `chatcmpl-${id}`, url: 'https://example.com/h', payload, now: T0 };
  }

  /** The pages `write` adds to the WAL (emptied first): what it wrote of the database. */
  async function pagesWritten(write: () => Promise<unknown>): Promise<number> {
    const sqlite = store.handle.sqlite!;
    const [emptied] = sqlite.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    expect(emptied?.busy).toBe(0);
    await write();
    const [wal] = sqlite.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
    return wal!.log;
  }

  function overflowPages(table: string): number {
    const sqlite = store.handle.sqlite!;
    return (sqlite.prepare(`select count(*) as n from dbstat where name = ? and pagetype = 'overflow'`).get(table) as { n: number }).n;
  }

  it('its row holds no overflow chain, and a lease, an attempt, a redeliver (one or in bulk) and a cancel each write a few pages, not the payload', async () => {
    const d = delivery();
    await store.deliveries.insert(d);
    // The payload is on disk whole, beside the row: a page of the list and a status read walk none of it.
    expect(overflowPages('webhook_deliveries')).toBe(0);
    expect(overflowPages('webhook_payloads')).toBeGreaterThanOrEqual(PROMPT_BYTES / 8192);

    let claimed: string | undefined;
    expect(await pagesWritten(async () => (claimed = (await store.deliveries.claimDue(T0, 1, 60_000, 'w'))[0]?.id))).toBeLessThan(FEW_PAGES);
    expect(claimed).toBe(d.id);
    expect((await store.deliveries.payloadOf(d.id))?.payload).toBe(d.payload);
    const failure = { attemptedAt: T0 + 1, statusCode: 500, durationMs: 30, outcome: 'failure' as const, error: 'HTTP 500', responseBody: 'boom' };
    const record = () => store.deliveries.recordAttempts([{ deliveryId: d.id, result: failure, next: { status: 'failed' }, leasedBy: 'w' }]);
    expect(await pagesWritten(record)).toBeLessThan(FEW_PAGES);
    expect(await pagesWritten(() => store.deliveries.redeliverMatching('key_a', { status: 'failed', limit: 1000 }, T0 + 2))).toBeLessThan(FEW_PAGES);
    expect(await pagesWritten(() => store.deliveries.cancel('key_a', d.id, T0 + 3, 'stop'))).toBeLessThan(FEW_PAGES);
    let redelivered: Awaited<ReturnType<typeof store.deliveries.redeliver>>;
    expect(await pagesWritten(async () => (redelivered = await store.deliveries.redeliver('key_a', d.id, T0 + 4)))).toBeLessThan(FEW_PAGES);
    expect(deliveryView(redelivered!).request_status_code).toBe(200);

    expect((await store.deliveries.get('key_a', d.id))?.delivery).toMatchObject({ status: 'pending', attempts: 1, payload: d.payload });
    expect(overflowPages('webhook_deliveries')).toBe(0);
  });

  it('a purge of deliveries of megabytes goes PURGE_BYTES of payloads at a time: a read started meanwhile is answered before it ends', async () => {
    // Deleting a row walks its payload's overflow chain to free it: under PURGE_BATCH deliveries, these were one
    // transaction, and every request waited for all of their pages (1,000 prompts of 9.6 MB: gigabytes).
    const old = Array.from({ length: 2 + Math.ceil(PURGE_BYTES / PROMPT_BYTES) }, () => delivery());
    await store.deliveries.insertMany(old);
    const success = { attemptedAt: T0 + 1, statusCode: 200, durationMs: 12, outcome: 'success' as const, error: null, responseBody: 'ok' };
    await store.deliveries.recordAttempts(old.map((d) => ({ deliveryId: d.id, result: success, next: { status: 'delivered' as const }, leasedBy: null })));
    const answered: string[] = [];
    const purge = store.deliveries.purgeOlderThan(T0 + 1).then((n) => {
      answered.push('purge');
      return n;
    });
    const read = new Promise((resolve) => setImmediate(resolve)).then(() => store.deliveries.byId(old[0]!.id)).then(() => answered.push('read'));
    expect(await purge).toBe(old.length);
    await read;
    expect(answered).toEqual(['read', 'purge']);
    expect(overflowPages('webhook_payloads')).toBe(0);
  });
});
