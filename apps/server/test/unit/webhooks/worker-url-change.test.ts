// A key's webhook URL changed or removed after the worker claimed a delivery, while its payload is still to be read
// (the read waits for its turn of the event loop; on Postgres it is a round trip): the attempt goes where the key
// now says, never to the URL the user replaced. Real SQLite and Postgres stores, real sender, a real receiver per URL.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestPostgres } from '../../support/databases.js';
import { eventually, startReceiver, type Receiver } from '../../support/webhooks.js';
import { SecretBox } from '../../../src/crypto/secret-box.js';
import { newDeliveryId } from '../../../src/storage/outbox-store.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import type { ApiKeyRecord } from '../../../src/storage/keys-store.js';
import { applyUrlChange } from '../../../src/webhooks/actions.js';
import { createSender, type Sender } from '../../../src/webhooks/sender.js';
import { DeliveryWorker } from '../../../src/webhooks/worker.js';

const postgres = await createTestPostgres('worker-url-change');
const variants: Array<[string, () => { url: string; cleanup(): void }]> = [
  [
    'sqlite',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'svc-url-change-'));
      return { url: `sqlite:${join(dir, 'svc.db')}`, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
    },
  ],
];
if (postgres) variants.push(['postgres', () => ({ url: postgres.url, cleanup: () => {} })]);

afterAll(async () => {
  await postgres?.drop();
});

describe.each(variants)('DeliveryWorker on %s: a URL change committed between the claim and the payload read', (_name, open) => {
  let store: Store;
  let cleanup: () => void;
  let old: Receiver;
  let next: Receiver;
  let sender: Sender;
  let worker: DeliveryWorker | undefined;

  beforeEach(async () => {
    const db = open();
    cleanup = db.cleanup;
    store = await openStore(db.url, { poolSize: 4 });
    old = await startReceiver();
    next = await startReceiver();
    sender = createSender({ timeoutMs: 5_000, allowPrivate: true });
  });

  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    await sender.close();
    await old.close();
    await next.close();
    await store.close();
    cleanup();
  });

  /**
   * A key pointed at the old receiver with one delivery waiting to be claimed, and a worker whose first claim of it
   * is answered only once `change` (what the dashboard's Save does) has committed: the claim returned the old URL.
   */
  async function claimedThenChanged(change: (key: ApiKeyRecord) => Promise<void>) {
    const user = await store.users.create({ email: `u-${randomBytes(4).toString('hex')}@example.test`, passwordHash: 'x', now: Date.now() });
    const key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: randomBytes(8).toString('hex'), now: Date.now(), webhookUrl: old.url });
    const id = newDeliveryId();
    await store.deliveries.insertMany([{ id, keyId: key.id, userId: user.id, event: 'llm.request.completed', requestId: `chatcmpl-${id}`, url: old.url, payload: `{"id":"${id}"}`, now: Date.now() }]);
    const { deliveries } = store;
    const claimDue = deliveries.claimDue.bind(deliveries);
    let changed = false;
    deliveries.claimDue = async (...args: Parameters<typeof claimDue>) => {
      const rows = await claimDue(...args);
      if (!changed && rows.some((r) => r.id === id)) {
        expect(rows.find((r) => r.id === id)!.url).toBe(old.url);
        changed = true;
        await change(key);
      }
      return rows;
    };
    let reads = 0;
    const payloadOf = deliveries.payloadOf.bind(deliveries);
    deliveries.payloadOf = (readId: string) => {
      if (readId === id) reads += 1;
      return payloadOf(readId);
    };
    worker = new DeliveryWorker({
      deliveries,
      keys: store.keys,
      sender,
      secretBox: new SecretBox(randomBytes(32)),
      logger: pino({ level: 'silent' }),
      clock: Date.now,
      timeoutMs: 5_000,
      retryScheduleMs: [50, 50],
    });
    worker.start();
    await eventually(() => changed && reads >= 1);
    return { id, key, reads: () => reads };
  }

  async function changeUrl(key: ApiKeyRecord, url: string | null) {
    const now = Date.now();
    await store.keys.update(key.id, { webhook_url: url }, now);
    await applyUrlChange(store.deliveries, key, url, now);
  }

  it('changed: the attempt goes to the new URL, none to the old one', async () => {
    const { id } = await claimedThenChanged((key) => changeUrl(key, next.url));
    const done = await eventually(async () => {
      const row = await store.deliveries.byId(id);
      return row?.status === 'delivered' ? row : undefined;
    });
    expect(old.received.map((r) => r.headers['x-svc-delivery'])).toEqual([]);
    expect(next.received.map((r) => r.headers['x-svc-delivery'])).toEqual([id]);
    expect(done.url).toBe(next.url);
    expect((await store.deliveries.get(done.key_id, id))!.attempts.map((a) => a.status_code)).toEqual([200]);
  });

  it('removed: nothing is sent and the delivery stays cancelled, with no attempt', async () => {
    const { id } = await claimedThenChanged((key) => changeUrl(key, null));
    // Stopping waits for the attempts in flight: the claimed row's, had one started, is sent and recorded by now.
    await worker!.stop();
    worker = undefined;
    expect(old.received).toEqual([]);
    const row = await store.deliveries.get((await store.deliveries.byId(id))!.key_id, id);
    expect(row!.delivery).toMatchObject({ status: 'cancelled', last_error: "cancelled: the key's webhook URL was removed" });
    expect(row!.attempts).toEqual([]);
  });
});
