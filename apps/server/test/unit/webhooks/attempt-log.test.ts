// The attempt log on a connection lost under its write (Postgres ended it: pg_terminate_backend, a failover, a
// proxy's reset): written again on another unless the commit had landed. Real SQLite store; the lost connection is
// pg's error, thrown by a proxy of the store.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ApiKeyRecord } from '../../../src/storage/keys-store.js';
import { newDeliveryId, type AttemptRecord } from '../../../src/storage/outbox-store.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { AttemptLog } from '../../../src/webhooks/attempt-log.js';

let dir: string;
let store: Store;
let key: ApiKeyRecord;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-attempt-log-'));
  store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
  const user = await store.users.create({ email: 'attempts@example.test', passwordHash: 'x', now: Date.now() });
  key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'svc_k', keyHash: randomBytes(8).toString('hex'), now: Date.now(), webhookUrl: 'https://hooks.example.test/in' });
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A leased delivery whose payload is a RAG prompt of megabytes. */
async function leasedDelivery(payloadBytes: number): Promise<string> {
  const id = newDeliveryId();
  const now = Date.now();
  const payload = JSON.stringify({ id, prompt: 'x'.repeat(payloadBytes) });
  await store.deliveries.insertMany([
    { id, keyId: key.id, userId: key.user_id, event: 'llm.request.completed', requestId: `chatcmpl-${id}`, url: key.webhook_url!, payload, now, lease: { until: now + 60_000, by: 'worker-test' } },
  ]);
  return id;
}

function delivered(deliveryId: string): AttemptRecord {
  return {
    deliveryId,
    result: { attemptedAt: Date.now(), statusCode: 200, durationMs: 12, outcome: 'success', error: null, responseBody: 'ok' },
    next: { status: 'delivered' },
    leasedBy: 'worker-test',
  };
}

describe('AttemptLog', () => {
  it('a connection lost after the commit (its answer lost): the attempt is counted once, and the check for it reads no payload', async () => {
    const id = await leasedDelivery(4 * 1024 * 1024);
    let lost = false;
    /** The longest payload any read of the log's handed back: the check needs the attempts, not the megabytes. */
    let payloadRead = 0;
    const deliveries = new Proxy(store.deliveries, {
      get(target, name, receiver) {
        if (name === 'recordAttempts') {
          return async (batch: Parameters<Store['deliveries']['recordAttempts']>[0]) => {
            const numbers = await target.recordAttempts(batch);
            if (lost) return numbers;
            lost = true;
            throw new Error('Connection terminated unexpectedly');
          };
        }
        const value = Reflect.get(target, name, receiver) as unknown;
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          const answer = (await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as { delivery?: { payload?: unknown } } | undefined;
          const payload = answer?.delivery?.payload;
          if (typeof payload === 'string') payloadRead = Math.max(payloadRead, payload.length);
          return answer;
        };
      },
    });
    const log = new AttemptLog(deliveries, store.keys);
    await log.record(key.id, delivered(id), { test: false });

    expect(lost).toBe(true);
    const found = await store.deliveries.get(key.id, id);
    expect(found!.delivery.status).toBe('delivered');
    expect(found!.attempts.map((a) => [Number(a.attempt), a.outcome, a.status_code])).toEqual([[1, 'success', 200]]);
    expect(payloadRead).toBe(0);
  });
});
