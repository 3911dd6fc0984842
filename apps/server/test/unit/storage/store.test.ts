import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/storage/store.js';
import { storeVariants } from '../../support/databases.js';

const variants = await storeVariants('storage suite');

describe.each(variants)('storage on %s', (_name, url) => {
  let store: Store;
  beforeAll(async () => {
    store = await openStore(url);
  });
  afterAll(async () => {
    await store?.close();
  });

  it('migrates idempotently and answers ping', async () => {
    const again = await openStore(url);
    expect(await again.unready()).toBeNull();
    await again.close();
    expect(await store.unready()).toBeNull();
  });

  it('creates users with UUID ids and finds them by case-insensitive email', async () => {
    const user = await store.users.create({ email: ' Ana@Example.com ', passwordHash: 'h', now: 1 });
    expect(user.id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await store.users.byEmail('ANA@example.COM'))?.id).toBe(user.id);
    await expect(store.users.create({ email: 'ana@example.com', passwordHash: 'h', now: 2 })).rejects.toThrow();
    expect(await store.users.count()).toBeGreaterThanOrEqual(1);
  });

  it("lists users with their active keys and never a hash; replaces a hash only while unchanged; ends one user's sessions only", async () => {
    const tag = `l-${Date.now()}`;
    const older = await store.users.create({ email: `${tag}-a@example.com`, passwordHash: 'scrypt$hash-a', now: 1_700_000_000_000 });
    const newer = await store.users.create({ email: `${tag}-b@example.com`, passwordHash: 'scrypt$hash-b', now: 1_700_000_000_001 });
    for (const n of [1, 2, 3]) await store.keys.create({ userId: older.id, name: `k${n}`, prefix: 'sk-svc-…', keyHash: `${tag}-${n}`, now: 1 });
    const revoked = await store.keys.create({ userId: older.id, name: 'gone', prefix: 'sk-svc-…', keyHash: `${tag}-gone`, now: 1 });
    await store.keys.revoke(revoked.id, 2);
    const listed = (await store.users.list()).filter((u) => u.email.startsWith(tag));
    expect(listed).toEqual([
      { id: older.id, email: older.email, created_at: 1_700_000_000_000, active_keys: 3 },
      { id: newer.id, email: newer.email, created_at: 1_700_000_000_001, active_keys: 0 },
    ]);
    expect(JSON.stringify(await store.users.list())).not.toContain('scrypt');

    // Replaced only while still the hash the caller read.
    expect(await store.users.replacePasswordHash(newer.id, 'scrypt$stale', 'scrypt$x')).toBe(false);
    expect(await store.users.replacePasswordHash(newer.id, 'scrypt$hash-b', 'scrypt$stronger-b')).toBe(true);
    expect((await store.users.byId(newer.id))?.password_hash).toBe('scrypt$stronger-b');

    for (const [token, user] of [['a1', older], ['a2', older], ['b1', newer]] as const) {
      await store.sessions.create({ tokenHash: `${tag}-${token}`, userId: user.id, csrfToken: 'c', now: 1, expiresAt: Date.now() + 60_000 });
    }
    expect(await store.sessions.deleteForUser(older.id)).toBe(2);
    expect(await store.sessions.byHash(`${tag}-a1`, Date.now())).toBeUndefined();
    expect(await store.sessions.byHash(`${tag}-b1`, Date.now())).toBeDefined();
  });

  it('stores keys by hash, updates settings, revokes once, and records last delivery status', async () => {
    const user = await store.users.create({ email: `k-${Date.now()}@example.com`, passwordHash: 'h', now: 1 });
    const key = await store.keys.create({ userId: user.id, name: 'k', prefix: 'sk-svc-abcd…wxyz', keyHash: `hash-${user.id}`, now: 1_700_000_000_000 });
    expect((await store.keys.byHash(`hash-${user.id}`))?.id).toBe(key.id);
    expect(await store.keys.byHash('nope')).toBeUndefined();
    const updated = await store.keys.update(key.id, { webhook_url: 'https://h.example/x', rate_limit_rpm: 10 }, 2_000_000_000_000);
    expect(updated).toMatchObject({ webhook_url: 'https://h.example/x', rate_limit_rpm: 10, updated_at: 2_000_000_000_000 });
    expect(typeof updated!.created_at).toBe('number');
    await store.keys.setLastDelivery(key.id, { at: 5, outcome: 'failure', statusCode: 500, error: 'HTTP 500', test: false });
    expect(await store.keys.byId(key.id)).toMatchObject({ last_delivery_at: 5, last_delivery_outcome: 'failure', last_delivery_status_code: 500, last_delivery_test: 0 });
    // Failing since the first failure after a success; a success clears it.
    expect((await store.keys.byId(key.id))!.last_delivery_failing_since).toBe(5);
    await store.keys.setLastDelivery(key.id, { at: 9, outcome: 'failure', statusCode: null, error: 'connection refused', test: false });
    expect((await store.keys.byId(key.id))!.last_delivery_failing_since).toBe(5);
    await store.keys.setLastDelivery(key.id, { at: 12, outcome: 'success', statusCode: 200, error: null, test: true });
    expect((await store.keys.byId(key.id))!.last_delivery_failing_since).toBeNull();
    expect((await store.keys.byId(key.id))!.last_delivery_test).toBe(1);
    await store.keys.setLastDelivery(key.id, { at: 15, outcome: 'failure', statusCode: 500, error: 'HTTP 500', test: false });
    expect((await store.keys.byId(key.id))!.last_delivery_failing_since).toBe(15);
    expect(await store.keys.revoke(key.id, 3)).toBe(true);
    expect(await store.keys.revoke(key.id, 4)).toBe(false);
    expect((await store.keys.list(user.id)).map((k) => k.revoked_at)).toEqual([3]);
  });

  it('adds usage per key and day', async () => {
    const user = await store.users.create({ email: `u-${Date.now()}@example.com`, passwordHash: 'h', now: 1 });
    const inc = { keyId: 'key_1', userId: user.id, day: '2026-11-01', requests: 1, inputTokens: 10, outputTokens: 5 };
    await store.usage.add([inc, { ...inc, day: '2026-11-02' }]);
    await store.usage.add([{ ...inc, requests: 2, inputTokens: 1, outputTokens: 1 }]);
    const rows = await store.usage.byDay(user.id, '2026-10-01');
    expect(rows.map((r) => [r.day, r.requests, r.input_tokens, r.output_tokens])).toEqual([
      ['2026-11-01', 3, 11, 6],
      ['2026-11-02', 1, 10, 5],
    ]);
    expect(await store.usage.byDay(user.id, '2026-11-02')).toHaveLength(1);
  });

  it("lists a day's keys by id, whatever order their rows were written in", async () => {
    const user = await store.users.create({ email: `o-${Date.now()}@example.com`, passwordHash: 'h', now: 1 });
    const inc = (keyId: string, day: string) => ({ keyId, userId: user.id, day, requests: 1, inputTokens: 1, outputTokens: 1 });
    await store.usage.add([inc('key_o2', '2026-11-05')]);
    await store.usage.add([inc('key_o1', '2026-11-05')]);
    await store.usage.add([inc('key_o0', '2026-11-04')]);
    const rows = await store.usage.byDay(user.id, '2026-11-04');
    expect(rows.map((r) => [r.day, r.key_id])).toEqual([
      ['2026-11-04', 'key_o0'],
      ['2026-11-05', 'key_o1'],
      ['2026-11-05', 'key_o2'],
    ]);
  });

  it('adds errors, latency buckets and grounding outcomes per key and day', async () => {
    const user = await store.users.create({ email: `q-${Date.now()}@example.com`, passwordHash: 'h', now: 1 });
    const inc = { keyId: 'key_q', userId: user.id, day: '2026-11-03', requests: 2, inputTokens: 1, outputTokens: 1, errors4xx: 1, errors5xx: 0, groundingChecked: 1, ungrounded: 1, latency: [1, 0, 0, 1, 0, 0, 0, 0, 0] };
    await store.usage.add([inc]);
    await store.usage.add([{ ...inc, errors4xx: 0, errors5xx: 2, latency: [0, 0, 0, 0, 0, 0, 0, 0, 2] }]);
    const [row] = await store.usage.byDay(user.id, '2026-11-03');
    expect(row).toMatchObject({ requests: 4, errors_4xx: 1, errors_5xx: 2, grounding_checked: 2, ungrounded: 2 });
    expect([row!.latency_0, row!.latency_3, row!.latency_8].map(Number)).toEqual([1, 1, 2]);
  });
});
