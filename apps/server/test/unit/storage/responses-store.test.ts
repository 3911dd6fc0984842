import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResponseInputItem } from '@svc/protocol';
import { openStore, type Store } from '../../../src/storage/store.js';
import { createTestPostgres } from '../../support/databases.js';
import { storedResponse } from '../../support/responses.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-responses-'));
const pgDb = await createTestPostgres('responses store');
const variants: Array<[string, string]> = [['sqlite', `sqlite:${join(dir, 'svc.db')}`]];
if (pgDb) variants.push(['postgres', pgDb.url]);

afterAll(async () => {
  await pgDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const response = (id: string, previous: string | null, createdAt: number, text: string) => storedResponse({ id, previous, createdAt, text });
const ask = (text: string): ResponseInputItem[] => [{ type: 'message', id: `in_${text}`, role: 'user', content: text }];

describe.each(variants)('responses on %s', (_name, url) => {
  let store: Store;
  beforeAll(async () => {
    store = await openStore(url);
  });
  afterAll(async () => {
    await store?.close();
  });

  it('reads back a response and its input items, for its own key only', async () => {
    await store.responses.save('key_a', response('resp_1', null, 1_000, 'One.'), ask('first'));
    expect(await store.responses.get('key_a', 'resp_1')).toEqual({ response: response('resp_1', null, 1_000, 'One.'), inputItems: ask('first') });
    expect(await store.responses.get('key_b', 'resp_1')).toBeUndefined();
    expect(await store.responses.conversation('key_b', 'resp_1')).toBeUndefined();
    expect(await store.responses.delete('key_b', 'resp_1')).toBe(false);
  });

  it('walks previous_response_id back to the first turn, oldest first', async () => {
    await store.responses.save('key_a', response('resp_2', 'resp_1', 1_001, 'Two.'), ask('second'));
    await store.responses.save('key_a', response('resp_3', 'resp_2', 1_002, 'Three.'), ask('third'));
    const items = await store.responses.conversation('key_a', 'resp_3');
    expect(items?.map((item) => ('id' in item ? item.id : undefined))).toEqual(['in_first', 'msg_resp_1', 'in_second', 'msg_resp_2', 'in_third', 'msg_resp_3']);
    expect(items?.[1]).toEqual({ type: 'message', id: 'msg_resp_1', role: 'assistant', content: [{ type: 'output_text', text: 'One.', annotations: [], logprobs: [] }] });
  });

  it('does not follow a chain into another key\'s responses', async () => {
    await store.responses.save('key_b', response('resp_b', 'resp_3', 1_003, 'B.'), ask('b'));
    expect((await store.responses.conversation('key_b', 'resp_b'))?.length).toBe(2);
  });

  it('deletes, and purges by age', async () => {
    expect(await store.responses.delete('key_a', 'resp_3')).toBe(true);
    expect(await store.responses.get('key_a', 'resp_3')).toBeUndefined();
    expect(await store.responses.purgeOlderThan(1_001_000)).toBe(1);
    expect(await store.responses.get('key_a', 'resp_1')).toBeUndefined();
    expect(await store.responses.get('key_a', 'resp_2')).toBeDefined();
  });
});
