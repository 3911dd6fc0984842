import { describe, expect, it } from 'vitest';
import { createDeduper, deliveryId, type DedupeStore } from './deduper.js';

const later = <T>(value: T, ms = 5) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));

describe('createDeduper', () => {
  it('claims an id once; a duplicate is refused until the id is released', async () => {
    const dedupe = createDeduper();
    expect(await dedupe.claim('whd_1')).toBe(true);
    expect(await dedupe.claim('whd_1')).toBe(false);
    expect(await dedupe.claim('whd_2')).toBe(true);
    await dedupe.release('whd_1');
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('forgets an id after ttlSeconds', async () => {
    let now = 1_000_000;
    const dedupe = createDeduper({ ttlSeconds: 60, now: () => now });
    expect(await dedupe.claim('whd_1')).toBe(true);
    now += 59_999;
    expect(await dedupe.claim('whd_1')).toBe(false);
    now += 1;
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it('keeps at most maxEntries ids, dropping the least recently seen', async () => {
    const dedupe = createDeduper({ maxEntries: 2 });
    await dedupe.claim('a');
    await dedupe.claim('b');
    expect(await dedupe.claim('a')).toBe(false); // seen again: now the most recent
    await dedupe.claim('c'); // drops b
    expect(await dedupe.claim('a')).toBe(false);
    expect(await dedupe.claim('b')).toBe(true);
  });

  it('processes one of many concurrent deliveries with the same id, with the memory store', async () => {
    const dedupe = createDeduper();
    const claims = await Promise.all(Array.from({ length: 10 }, () => dedupe.claim('whd_same')));
    expect(claims.filter(Boolean)).toHaveLength(1);
  });

  it('processes one of many concurrent deliveries with an asynchronous store, even one whose check-and-set is not atomic', async () => {
    const ids = new Set<string>();
    const calls: Array<[string, number]> = [];
    const store: DedupeStore = {
      // Reads, waits, then writes: two interleaved calls would both see the id absent.
      async setIfAbsent(id, ttlSeconds) {
        calls.push([id, ttlSeconds]);
        const present = ids.has(id);
        await later(undefined);
        ids.add(id);
        return !present;
      },
      delete: async (id) => void ids.delete(await later(id)),
    };
    const dedupe = createDeduper({ store, ttlSeconds: 3600 });
    const claims = await Promise.all(Array.from({ length: 10 }, () => dedupe.claim('whd_same')));
    expect(claims.filter(Boolean)).toHaveLength(1);
    expect(calls).toEqual([['whd_same', 3600]]);
    expect(await dedupe.claim('whd_same')).toBe(false);
    await dedupe.release('whd_same');
    expect(await dedupe.claim('whd_same')).toBe(true);
  });

  it('passes a store failure on, and lets the id be claimed again', async () => {
    let fail = true;
    const dedupe = createDeduper({
      store: { setIfAbsent: async () => (fail ? Promise.reject(new Error('store down')) : true), delete: () => {} },
    });
    await expect(dedupe.claim('whd_1')).rejects.toThrow('store down');
    fail = false;
    expect(await dedupe.claim('whd_1')).toBe(true);
  });

  it.each([
    ['a zero ttlSeconds', { ttlSeconds: 0 }],
    ['a fractional ttlSeconds', { ttlSeconds: 1.5 }],
    ['a zero maxEntries', { maxEntries: 0 }],
    ['a store without delete', { store: { setIfAbsent: () => true } }],
    ['a store that is not one', { store: null }],
  ])('rejects %s when created', (_, options) => {
    // @ts-expect-error misuse on purpose
    expect(() => createDeduper(options)).toThrow(TypeError);
  });

  it('rejects an id that is not a non-empty string', async () => {
    const dedupe = createDeduper();
    await expect(dedupe.claim('')).rejects.toThrow(TypeError);
    // @ts-expect-error misuse on purpose
    await expect(dedupe.claim(42)).rejects.toThrow(TypeError);
  });
});

describe('deliveryId', () => {
  it('is webhook-id, else X-Svc-Delivery, else undefined', () => {
    expect(deliveryId({ 'webhook-id': 'whd_a', 'x-svc-delivery': 'whd_a' })).toBe('whd_a');
    expect(deliveryId(new Headers({ 'x-svc-delivery': 'whd_b' }))).toBe('whd_b');
    expect(deliveryId({ 'webhook-id': '' })).toBeUndefined();
    expect(deliveryId(new Headers())).toBeUndefined();
  });
});

describe('createDeduper in flight', () => {
  it('says an id is processing from its claim until complete or release, and only for the deduper that claimed it', async () => {
    const store = new Map<string, number>();
    const shared = { setIfAbsent: (id: string) => (store.has(id) ? false : (store.set(id, 1), true)), delete: (id: string) => void store.delete(id) };
    const here = createDeduper({ store: shared });
    const elsewhere = createDeduper({ store: shared });
    expect(await here.claim('whd_1')).toBe(true);
    expect(here.processing('whd_1')).toBe(true);
    expect(elsewhere.processing('whd_1')).toBe(false);
    here.complete('whd_1');
    expect(here.processing('whd_1')).toBe(false);
    expect(await here.claim('whd_1')).toBe(false);
    expect(await here.claim('whd_2')).toBe(true);
    await here.release('whd_2');
    expect(here.processing('whd_2')).toBe(false);
    expect(await elsewhere.claim('whd_2')).toBe(true);
  });
});
