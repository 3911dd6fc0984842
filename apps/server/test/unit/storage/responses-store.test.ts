import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ResponseInputItem, ResponseObject } from '@svc/protocol';
import { openStore, type Store } from '../../../src/storage/store.js';
import { ConversationTooLongError, MAX_CONVERSATION_CHARS, PURGE_PARTS_BATCH, PURGE_RESPONSES_BATCH, RESPONSE_PART_CHARS } from '../../../src/storage/responses-store.js';
import { storeVariants } from '../../support/databases.js';
import { storedResponse } from '../../support/responses.js';

const variants = await storeVariants('responses store');

const response = (id: string, previous: string | null, createdAt: number, text: string) => storedResponse({ id, previous, createdAt, text });
const ask = (text: string): ResponseInputItem[] => [{ type: 'message', id: `in_${text}`, role: 'user', content: text }];
/** A user turn of `text` whose id stays short. */
const say = (id: string, text: string): ResponseInputItem[] => [{ type: 'message', id: `in_${id}`, role: 'user', content: text }];
const ids = (items: readonly ResponseInputItem[] | undefined) => items?.map((item) => ('id' in item ? item.id : undefined));

describe.each(variants)('responses on %s', (_name, url) => {
  let store: Store;
  beforeAll(async () => {
    store = await openStore(url);
  });
  afterAll(async () => {
    await store?.close();
  });

  it('reads back a response as stored, and its input items, for its own key only', async () => {
    const json = await store.responses.save('key_a', response('resp_1', null, 1_000, 'One.'), ask('first'));
    expect(JSON.parse(json)).toEqual(response('resp_1', null, 1_000, 'One.'));
    expect(await store.responses.responseJson('key_a', 'resp_1')).toBe(json);
    expect(await store.responses.inputItems('key_a', 'resp_1')).toEqual(ask('first'));
    expect(await store.responses.responseJson('key_b', 'resp_1')).toBeUndefined();
    expect(await store.responses.inputItems('key_b', 'resp_1')).toBeUndefined();
    expect(await store.responses.conversation('key_b', 'resp_1')).toBeUndefined();
    expect(await store.responses.delete('key_b', 'resp_1')).toBe(false);
  });

  it('walks previous_response_id back to the first turn, oldest first, and counts its characters', async () => {
    const first = await store.responses.conversation('key_a', 'resp_1');
    await store.responses.save('key_a', response('resp_2', 'resp_1', 1_001, 'Two.'), ask('second'), first!.chars);
    const second = await store.responses.conversation('key_a', 'resp_2');
    await store.responses.save('key_a', response('resp_3', 'resp_2', 1_002, 'Three.'), ask('third'), second!.chars);
    const conversation = await store.responses.conversation('key_a', 'resp_3');
    expect(ids(conversation?.items)).toEqual(['in_first', 'msg_resp_1', 'in_second', 'msg_resp_2', 'in_third', 'msg_resp_3']);
    expect(conversation?.items[1]).toEqual({ type: 'message', id: 'msg_resp_1', role: 'assistant', content: [{ type: 'output_text', text: 'One.', annotations: [], logprobs: [] }] });
    // The count is the characters of the items' JSON, turn by turn: what the chain would be sent as.
    const perTurn = (n: number) => JSON.stringify(conversation!.items.slice(2 * n, 2 * n + 1)).length + JSON.stringify(conversation!.items.slice(2 * n + 1, 2 * n + 2)).length;
    expect(first!.chars).toBe(perTurn(0));
    expect(conversation!.chars).toBe(perTurn(0) + perTurn(1) + perTurn(2));
  });

  it('does not follow a chain into another key\'s responses', async () => {
    await store.responses.save('key_b', response('resp_b', 'resp_3', 1_003, 'B.'), ask('b'));
    expect((await store.responses.conversation('key_b', 'resp_b'))?.items.length).toBe(2);
  });

  it('refuses a conversation past MAX_CONVERSATION_CHARS from its last turn alone, before reading the chain', async () => {
    // Three turns of 4 MiB each: the third's conversation holds 12 MiB against a limit of 10 MiB.
    const big = 'x'.repeat(4 * 1024 * 1024);
    let previous: string | null = null;
    let chars = 0;
    for (const id of ['resp_big1', 'resp_big2', 'resp_big3']) {
      await store.responses.save('key_c', response(id, previous, 2_000, 'Noted.'), say(id, big), chars);
      if (id !== 'resp_big3') chars = (await store.responses.conversation('key_c', id))!.chars;
      previous = id;
    }
    expect(chars).toBeLessThan(MAX_CONVERSATION_CHARS);
    const refused = await store.responses.conversation('key_c', 'resp_big3').catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ConversationTooLongError);
    expect((refused as ConversationTooLongError).chars).toBeGreaterThan(MAX_CONVERSATION_CHARS);
    // Deleting a turn in the middle shortens what is read, but the last turn's count still says 12 MiB:
    // the count is what the chain held when the turn was answered, an upper bound of what is left.
    expect(await store.responses.delete('key_c', 'resp_big2')).toBe(true);
    await expect(store.responses.conversation('key_c', 'resp_big3')).rejects.toBeInstanceOf(ConversationTooLongError);
  });

  it('reads, measures and limits rows stored before the count and the output items were kept', async () => {
    await store.responses.save('key_d', response('resp_old1', null, 3_000, 'Old one.'), ask('old first'));
    await store.responses.save('key_d', response('resp_old2', 'resp_old1', 3_001, 'Old two.'), ask('old second'));
    await sql`update responses set output_items = null, history_chars = null where key_id = 'key_d'`.execute(store.handle.db);
    const conversation = await store.responses.conversation('key_d', 'resp_old2');
    expect(ids(conversation?.items)).toEqual(['in_old first', 'msg_resp_old1', 'in_old second', 'msg_resp_old2']);
    // Measured in the database from the whole stored rows: at least the items' own JSON.
    expect(conversation!.chars).toBeGreaterThan(JSON.stringify(conversation!.items).length);
    const big = 'y'.repeat(6 * 1024 * 1024);
    await store.responses.save('key_d', response('resp_old3', null, 3_002, 'Big.'), say('old3', big));
    await store.responses.save('key_d', response('resp_old4', 'resp_old3', 3_003, 'Big.'), say('old4', big));
    await sql`update responses set output_items = null, history_chars = null where key_id = 'key_d'`.execute(store.handle.db);
    await expect(store.responses.conversation('key_d', 'resp_old4')).rejects.toBeInstanceOf(ConversationTooLongError);
  });

  it('keeps a column longer than a part in parts, and reads it back whole', async () => {
    // Quotes and line breaks, escaped a slice at a time; emoji (surrogate pairs), one across each part boundary.
    const line = 'The "tower" is 330 m tall.\n';
    const head = JSON.stringify({ ...response('resp_long', null, 4_000, 'Long.'), instructions: '' }).indexOf('"instructions":""') + '"instructions":"'.length;
    const pad = 'x'.repeat(RESPONSE_PART_CHARS - 1 - head);
    const instructions = `${pad}${'😀'.repeat(RESPONSE_PART_CHARS / 2)}${line.repeat(RESPONSE_PART_CHARS / line.length)}`;
    const long = { ...response('resp_long', null, 4_000, 'Long.'), instructions };
    const input = say('long', line.repeat(Math.ceil((1.5 * RESPONSE_PART_CHARS) / line.length)));
    const json = await store.responses.save('key_e', long, input);
    expect(json).toBe(JSON.stringify(long));
    expect(json.codePointAt(RESPONSE_PART_CHARS - 1)).toBe(0x1f600); // a pair across the first part boundary
    const row = await store.handle.db.selectFrom('responses').select(['response', 'input_items', 'output_items']).where('id', '=', 'resp_long').executeTakeFirstOrThrow();
    expect(row.response).toMatch(/^parts:\d+$/);
    expect(row.input_items).toMatch(/^parts:\d+$/);
    const parts = await store.handle.db.selectFrom('response_parts').select(['field', 'seq']).where('response_id', '=', 'resp_long').orderBy('field').orderBy('seq').execute();
    // A part that would end inside a pair takes its second half too, so the count may round up past the length.
    const count = (text: string) => Math.floor(text.length / RESPONSE_PART_CHARS) + 1;
    const expected = [...Array.from({ length: count(JSON.stringify(input)) }, (_, i) => `input_items:${i}`), ...Array.from({ length: count(json) }, (_, i) => `response:${i}`)];
    expect(expected.length).toBeGreaterThanOrEqual(5);
    expect(parts.map((p) => `${p.field}:${p.seq}`)).toEqual(expected);
    expect(await store.responses.responseJson('key_e', 'resp_long')).toBe(json);
    expect(await store.responses.inputItems('key_e', 'resp_long')).toEqual(input);
    expect(await store.responses.responseJson('key_f', 'resp_long')).toBeUndefined();
    const conversation = await store.responses.conversation('key_e', 'resp_long');
    expect(conversation?.items[0]).toEqual(input[0]);
    expect(conversation?.chars).toBe(JSON.stringify(input).length + JSON.stringify([conversation!.items[1]]).length);
    // A read that finds a part gone (deleted or purged meanwhile) answers that the response is gone.
    const first = await store.handle.db.selectFrom('response_parts').selectAll().where('response_id', '=', 'resp_long').where('field', '=', 'response').where('seq', '=', 1).executeTakeFirstOrThrow();
    await store.handle.db.deleteFrom('response_parts').where('response_id', '=', 'resp_long').where('field', '=', 'response').where('seq', '=', 1).execute();
    expect(await store.responses.responseJson('key_e', 'resp_long')).toBeUndefined();
    await store.handle.db.insertInto('response_parts').values(first).execute();
    expect(await store.responses.responseJson('key_e', 'resp_long')).toBe(json);
    // Deleted with its response, by its own key only.
    expect(await store.responses.delete('key_f', 'resp_long')).toBe(false);
    expect(await store.responses.delete('key_e', 'resp_long')).toBe(true);
    expect(await store.handle.db.selectFrom('response_parts').select('seq').where('response_id', '=', 'resp_long').execute()).toEqual([]);
  });

  it('reads 100,000 input items back a part at a time, never their 10 MB of JSON in one parse', async () => {
    const input = Array.from({ length: 100_000 }, (_, i) => say(String(i), `Item ${i} is a tower of ${i} metres.`)[0]!);
    await store.responses.save('key_g', response('resp_many', null, 5_000, 'Many.'), input);
    // One JSON.parse of all of them is one step of the event loop: a second and more on a loaded host.
    const parse = vi.spyOn(JSON, 'parse');
    try {
      expect(await store.responses.inputItems('key_g', 'resp_many')).toEqual(input);
      const longest = Math.max(0, ...parse.mock.calls.map(([text]) => String(text).length));
      expect(longest).toBeLessThan(256 * 1024);
    } finally {
      parse.mockRestore();
    }
  });

  it("finds a response's output items by id for its own key (what an item_reference names), not a failed one's, and forgets them with it", async () => {
    // Older (created_at in seconds) than every other test's rows, and all gone at the end: the purges below count theirs alone.
    await store.responses.save('key_r', response('resp_r1', null, 5, 'Kept.'), ask('r1'));
    await store.responses.save('key_r', { ...response('resp_r2', null, 5, 'Cut'), status: 'failed' }, ask('r2'));
    const found = await store.responses.outputItems('key_r', ['msg_resp_r1', 'msg_resp_r2', 'msg_nope', 'msg_resp_r1']);
    const kept = { type: 'message', id: 'msg_resp_r1', role: 'assistant', content: [{ type: 'output_text', text: 'Kept.', annotations: [], logprobs: [] }] };
    expect([...found.entries()]).toEqual([['msg_resp_r1', { item: kept, chars: JSON.stringify(kept).length }]]);
    expect((await store.responses.outputItems('key_other', ['msg_resp_r1'])).size).toBe(0);
    expect(await store.responses.delete('key_r', 'resp_r1')).toBe(true);
    expect((await store.responses.outputItems('key_r', ['msg_resp_r1'])).size).toBe(0);
    expect(await store.responses.delete('key_r', 'resp_r2')).toBe(true);
    // Items past what one request may hold are not all read: a few bytes of references could name gigabytes.
    const big = 'x'.repeat(MAX_CONVERSATION_CHARS / 2);
    await store.responses.save('key_r', response('resp_r4', null, 5, big), ask('r4'));
    await store.responses.save('key_r', response('resp_r5', null, 5, big), ask('r5'));
    expect((await store.responses.outputItems('key_r', ['msg_resp_r4'])).size).toBe(1);
    await expect(store.responses.outputItems('key_r', ['msg_resp_r4', 'msg_resp_r5'])).rejects.toBeInstanceOf(ConversationTooLongError);
    for (const id of ['resp_r4', 'resp_r5']) expect(await store.responses.delete('key_r', id)).toBe(true);
    await store.responses.save('key_r', response('resp_r3', null, 3, 'Aged.'), ask('r3'));
    expect((await store.responses.outputItems('key_r', ['msg_resp_r3'])).size).toBe(1);
    expect(await store.responses.purgeOlderThan(4_000)).toBe(1);
    expect(await store.handle.db.selectFrom('response_items').select('id').where('key_id', '=', 'key_r').execute()).toEqual([]);
  });

  it('deletes, and purges by age', async () => {
    expect(await store.responses.delete('key_a', 'resp_3')).toBe(true);
    expect(await store.responses.responseJson('key_a', 'resp_3')).toBeUndefined();
    expect(await store.responses.purgeOlderThan(1_001_000)).toBe(1);
    expect(await store.responses.responseJson('key_a', 'resp_1')).toBeUndefined();
    expect(await store.responses.responseJson('key_a', 'resp_2')).toBeDefined();
  });

  it('keeps an old background response still running, its parts and its audit still to record with it, until its run ended', async () => {
    const instructions = 'x'.repeat(RESPONSE_PART_CHARS + 1);
    const running = { ...response('resp_running_aged', null, 4_000, ''), status: 'in_progress' as const, background: true, output: [], instructions };
    const audit = { requestId: 'req_running_aged', startedAt: 4_000_000, streaming: true };
    const lease = { owner: 'a-runner', until: 99_000_000 };
    await store.responses.save('key_p', running, ask('running aged'), 0, undefined, { ...lease, audit });
    const ended = { ...response('resp_running_aged', null, 4_000, 'Done.'), background: true, instructions };
    const outcome = { statusCode: 200, finishedAt: 4_500_000, responseText: 'Done.', svc: null, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } };
    // Its end stored with the audit its runner is recording (or died recording).
    await store.responses.settle('key_p', ended, lease, undefined, { ...audit, outcome });
    await store.responses.purgeOlderThan(6_000_000);
    expect(await store.responses.runOf('key_p', 'resp_running_aged')).toMatchObject({ owner: 'a-runner', audit: { requestId: 'req_running_aged', outcome } });
    expect(JSON.parse((await store.responses.responseJson('key_p', 'resp_running_aged'))!)).toMatchObject({ status: 'completed', instructions });
    expect((await store.responses.outputItems('key_p', ['msg_resp_running_aged'])).size).toBe(1);
    // Its run ended: purged as any other.
    expect(await store.responses.auditRecorded('key_p', 'resp_running_aged', 'a-runner')).toBe(true);
    await store.responses.purgeOlderThan(6_000_000);
    expect(await store.responses.responseJson('key_p', 'resp_running_aged')).toBeUndefined();
    expect(await store.handle.db.selectFrom('response_parts').select('seq').where('response_id', '=', 'resp_running_aged').execute()).toEqual([]);
  });

  it('purges the parts of old responses, and parts whose response was never written', async () => {
    const instructions = 'x'.repeat(RESPONSE_PART_CHARS + 1);
    await store.responses.save('key_g', { ...response('resp_aged', null, 5_000, 'Aged.'), instructions }, ask('aged'));
    await store.responses.save('key_g', { ...response('resp_young', null, 9_000, 'Young.'), instructions }, ask('young'));
    const orphan = (id: string, createdAt: number) => ({ response_id: id, field: 'response', seq: 0, text: 'x', created_at: createdAt });
    await store.handle.db.insertInto('response_parts').values([orphan('resp_lost', 5_000), orphan('resp_being_saved', 9_000)]).execute();
    await store.responses.purgeOlderThan(6_000_000);
    const left = await store.handle.db.selectFrom('response_parts').select('response_id').distinct().orderBy('response_id').execute();
    expect(left.map((p) => p.response_id)).toEqual(['resp_being_saved', 'resp_young']);
    expect(JSON.parse((await store.responses.responseJson('key_g', 'resp_young'))!).instructions).toBe(instructions);
  });

  it("keeps a background stream's events only while its row says so, in order; they go with its delete, its cut and its purge (not while it runs)", async () => {
    const running = (id: string, createdAt: number) => ({ ...response(id, null, createdAt, ''), status: 'in_progress' as const, background: true, output: [] });
    const lease = { owner: 'a-runner', until: 99_000_000 };
    const batch = (seq: number, lastSeq: number) => ({ seq, lastSeq, text: `event: e${seq}\ndata: {}\n\n` });
    await store.responses.save('key_e', running('resp_events', 7_000), ask('streamed'), 0, undefined, { ...lease, keepsEvents: true });
    await store.responses.save('key_e', running('resp_not_kept', 7_000), ask('not streamed'), 0, undefined, lease);
    expect(await store.responseEvents.append('resp_events', batch(0, 1))).toBe(true);
    expect(await store.responseEvents.append('resp_events', batch(2, 4))).toBe(true);
    expect(await store.responseEvents.append('resp_not_kept', batch(0, 1))).toBe(false);
    expect(await store.responseEvents.append('resp_never_stored', batch(0, 1))).toBe(false);
    expect(await store.responseEvents.state('key_e', 'resp_events')).toEqual({ events: 'kept', running: true });
    expect(await store.responseEvents.state('key_e', 'resp_not_kept')).toEqual({ events: null, running: true });
    expect(await store.responseEvents.state('key_other', 'resp_events')).toBeUndefined();
    expect(await store.responseEvents.after('resp_events', 1, 10)).toEqual([batch(2, 4)]);
    expect(await store.responseEvents.after('resp_events', 2, 10)).toEqual([batch(2, 4)]);
    expect(await store.responseEvents.after('resp_events', -1, 1)).toEqual([batch(0, 1)]);
    expect(await store.responseEvents.lastSeq('resp_events')).toBe(4);
    // Running: kept whatever its age.
    await store.responses.purgeOlderThan(8_000_000);
    expect(await store.responseEvents.lastSeq('resp_events')).toBe(4);
    // Ended: purged with it.
    await store.responses.settle('key_e', { ...response('resp_events', null, 7_000, 'Done.'), background: true }, lease);
    await store.responses.purgeOlderThan(8_000_000);
    expect(await store.responseEvents.lastSeq('resp_events')).toBe(-1);

    await store.responses.save('key_e', running('resp_cut', 9_000), ask('cut'), 0, undefined, { ...lease, keepsEvents: true });
    expect(await store.responseEvents.append('resp_cut', batch(0, 1))).toBe(true);
    await store.responseEvents.cut('resp_cut');
    expect(await store.responseEvents.state('key_e', 'resp_cut')).toEqual({ events: 'cut', running: true });
    expect(await store.responseEvents.append('resp_cut', batch(2, 3))).toBe(false);
    expect(await store.responseEvents.lastSeq('resp_cut')).toBe(-1);

    await store.responses.save('key_e', running('resp_deleted', 9_000), ask('deleted'), 0, undefined, { ...lease, keepsEvents: true });
    expect(await store.responseEvents.append('resp_deleted', batch(0, 1))).toBe(true);
    expect(await store.responses.delete('key_e', 'resp_deleted')).toBe(true);
    expect(await store.responseEvents.lastSeq('resp_deleted')).toBe(-1);
    expect(await store.responseEvents.append('resp_deleted', batch(2, 3))).toBe(false);
    // Their runs ended: the tests after this one find none running.
    for (const id of ['resp_not_kept', 'resp_cut']) await store.responses.settle('key_e', { ...response(id, null, 9_000, 'Done.'), background: true }, lease);
  });

  it('purges in batches: every old response and part across several batches, a read started meanwhile answered before the purge ends', async () => {
    // Older (created_at in seconds) than every other test's rows: this purge takes only these.
    const old = Array.from({ length: 2 * PURGE_RESPONSES_BATCH + 37 }, (_, i) => ({
      id: `resp_batch_${i}`,
      key_id: 'key_h',
      previous_response_id: null,
      created_at: 10 + (i % 40),
      input_items: '[]',
      response: '{}',
    }));
    await store.handle.db.insertInto('responses').values(old).execute();
    const parts = Array.from({ length: 2 * PURGE_PARTS_BATCH + 5 }, (_, i) => ({ response_id: `resp_batch_${i}`, field: 'response', seq: 0, text: 'x', created_at: 10 }));
    await store.handle.db.insertInto('response_parts').values(parts).execute();
    await store.responses.save('key_h', response('resp_kept', null, 60, 'Kept.'), ask('kept'));
    const answered: string[] = [];
    const purge = store.responses.purgeOlderThan(55_000).then((n) => {
      answered.push('purge');
      return n;
    });
    const read = new Promise((resolve) => setImmediate(resolve)).then(() => store.responses.responseJson('key_h', 'resp_kept')).then(() => answered.push('read'));
    expect(await purge).toBe(old.length);
    await read;
    // SQLite has one writer: only batches let the read in between. Postgres reads never wait for row locks (MVCC),
    // so there the order only says which finished first on a busy machine.
    if (store.handle.sqlite) expect(answered).toEqual(['read', 'purge']);
    else expect(answered.sort()).toEqual(['purge', 'read']);
    const count = async (table: 'responses' | 'response_parts') =>
      Number((await store.handle.db.selectFrom(table).select((eb) => eb.fn.countAll<number | string>().as('n')).where('created_at', '<', 55).executeTakeFirstOrThrow()).n);
    expect(await count('responses')).toBe(0);
    expect(await count('response_parts')).toBe(0);
    expect(await store.responses.responseJson('key_h', 'resp_kept')).toBeDefined();
  });
  it('a background response ended at once by its owner and by an instance that found its lease lapsed (or by two such) is ended by one only', async () => {
    const running = (id: string): ResponseObject => ({ ...response(id, null, 70_000, 'unused'), status: 'in_progress', background: true, output: [], completed_at: null });
    const ended = (id: string, status: 'completed' | 'failed'): ResponseObject =>
      status === 'completed' ? { ...response(id, null, 70_000, 'Done.'), background: true } : { ...running(id), status, error: { code: 'server_error', message: 'lapsed' } };
    const settled = (results: Array<string | undefined>) => results.filter((body) => body !== undefined);

    // The owner is alive but its lease lapsed (a database hiccup held its renewals): a sweeper found it, and the
    // owner's answer arrives as the sweeper ends it.
    await store.responses.save('key_bg', running('resp_bg_owner'), ask('bg owner'), 0, undefined, { owner: 'worker-a', until: 80_000 });
    const [found] = await store.responses.orphans({ lapsedBefore: 90_000 }, 10);
    expect(found?.lease).toBe(80_000);
    const both = await Promise.all([
      store.responses.settle('key_bg', ended('resp_bg_owner', 'completed'), { owner: 'worker-a', until: 100_000 }),
      store.responses.settle('key_bg', ended('resp_bg_owner', 'failed'), { lease: found!.lease, until: 100_000 }),
    ]);
    expect(settled(both)).toHaveLength(1);
    const stored = JSON.parse((await store.responses.responseJson('key_bg', 'resp_bg_owner'))!) as ResponseObject;
    expect(stored.status).toBe(both[0] !== undefined ? 'completed' : 'failed');

    // Two instances sweeping at once find the same lapsed lease.
    await store.responses.save('key_bg', running('resp_bg_swept'), ask('bg swept'), 0, undefined, { owner: 'worker-dead', until: 80_000 });
    const sweeps = await Promise.all([
      store.responses.settle('key_bg', ended('resp_bg_swept', 'failed'), { lease: 80_000, until: 100_000 }),
      store.responses.settle('key_bg', ended('resp_bg_swept', 'failed'), { lease: 80_000, until: 100_001 }),
    ]);
    expect(settled(sweeps)).toHaveLength(1);
    expect(await store.responses.orphans({ lapsedBefore: Number.MAX_SAFE_INTEGER }, 10)).toEqual([]);
  });

  it("a read that follows a background response's parts while its end replaces them reads the end whole, never a part of each nor a 404", async () => {
    const instructions = 'x'.repeat(RESPONSE_PART_CHARS + 1);
    const running: ResponseObject = { ...response('resp_bg_parts', null, 70_000, 'unused'), status: 'in_progress', background: true, output: [], completed_at: null, instructions };
    const completed: ResponseObject = { ...response('resp_bg_parts', null, 70_000, 'y'.repeat(RESPONSE_PART_CHARS)), background: true, instructions };
    const lease = { owner: 'worker-a', until: 100_000 };
    await store.responses.save('key_bg', running, ask('bg parts'), 0, undefined, lease);
    // The read has the row (two parts) and is held before its parts; the end (three) is written meanwhile.
    const internals = store.responses as unknown as { readParts: (...args: unknown[]) => Promise<string | undefined> };
    const readParts = internals.readParts.bind(store.responses);
    let reading!: () => void;
    const held = new Promise<void>((resolve) => (reading = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    internals.readParts = async (...args) => {
      internals.readParts = readParts;
      reading();
      await released;
      return readParts(...args);
    };
    try {
      const read = store.responses.responseJson('key_bg', 'resp_bg_parts');
      await held;
      expect(await store.responses.settle('key_bg', completed, lease)).toBeDefined();
      release();
      expect(JSON.parse((await read)!)).toEqual(completed);
    } finally {
      internals.readParts = readParts;
    }
    // Nothing left of the running response's parts: the end's response beside them, its output where none was.
    const fields = await store.handle.db.selectFrom('response_parts').select('field').distinct().where('response_id', '=', 'resp_bg_parts').execute();
    expect(fields.map((row) => row.field).sort()).toEqual(['output_items', expect.stringMatching(/^response#[0-9a-f]+$/)]);
  });

  it("writes a background response's first end in parts as every version of svc reads them, and a later end beside it", async () => {
    const running: ResponseObject = { ...response('resp_bg_first', null, 70_000, 'unused'), status: 'in_progress', background: true, output: [], completed_at: null };
    const completed: ResponseObject = { ...response('resp_bg_first', null, 70_000, 'z'.repeat(RESPONSE_PART_CHARS)), background: true };
    const audit = { requestId: 'req_bg_first', startedAt: 70_000_000, streaming: false };
    const lease = { owner: 'worker-a', until: 100_000 };
    await store.responses.save('key_bg', running, ask('bg first'), 0, undefined, { ...lease, audit });
    const outcome = { statusCode: 200, finishedAt: 70_001_000, responseText: 'z', svc: null, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } };
    await store.responses.settle('key_bg', completed, lease, undefined, { ...audit, outcome });
    const columns = () => store.handle.db.selectFrom('responses').select(['response', 'output_items']).where('id', '=', 'resp_bg_first').executeTakeFirstOrThrow();
    // `parts:N` under the column's own name: an instance of the previous release (a rolling upgrade) reads it too.
    expect(await columns()).toEqual({ response: 'parts:2', output_items: 'parts:2' });
    // Its runner died before recording the audit; whoever ends it writes the end again, in parts of a new generation,
    // as a read may still be following the first end's.
    const [orphan] = await store.responses.orphans({ owner: 'worker-a' }, 10);
    expect(await store.responses.takeOver('key_bg', 'resp_bg_first', orphan!, 'worker-b', 200_000)).toBe(true);
    expect(await store.responses.settle('key_bg', completed, { owner: 'worker-b', until: 200_000 })).toBeDefined();
    expect(await columns()).toEqual({ response: expect.stringMatching(/^parts:2#[0-9a-f]+$/), output_items: expect.stringMatching(/^parts:2#[0-9a-f]+$/) });
    expect(JSON.parse((await store.responses.responseJson('key_bg', 'resp_bg_first'))!)).toEqual(completed);
    expect((await store.responses.outputItems('key_bg', [completed.output[0]!.id!])).size).toBe(1);
    const fields = await store.handle.db.selectFrom('response_parts').select('field').distinct().where('response_id', '=', 'resp_bg_first').execute();
    expect(fields).toHaveLength(2);
  });

  it('a background end that could not be stored whole (its items not indexed) is not stored, so the failed end that follows leaves nothing of the answer behind', async () => {
    const running: ResponseObject = { ...response('resp_bg_index', null, 70_000, 'unused'), status: 'in_progress', background: true, output: [], completed_at: null };
    const completed: ResponseObject = { ...response('resp_bg_index', null, 70_000, 'Done.'), background: true };
    const failed: ResponseObject = { ...running, status: 'failed', error: { code: 'server_error', message: 'could not store' } };
    const audit = { requestId: 'req_bg_index', startedAt: 70_000_000, streaming: false };
    const lease = { owner: 'worker-a', until: 100_000 };
    await store.responses.save('key_bg', running, ask('bg index'), 0, undefined, { ...lease, audit });
    const historyOf = async () =>
      Number((await store.handle.db.selectFrom('responses').select('history_chars').where('id', '=', 'resp_bg_index').executeTakeFirstOrThrow()).history_chars);
    const before = await historyOf();
    // Indexing its output item fails: another response of the key holds that item id.
    const itemId = completed.output[0]!.id!;
    await store.handle.db.insertInto('response_items').values({ key_id: 'key_bg', id: itemId, response_id: 'resp_other', created_at: 1 }).execute();
    const outcome = { statusCode: 200, finishedAt: 70_001_000, responseText: 'Done.', svc: null, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } };
    await expect(store.responses.settle('key_bg', completed, lease, undefined, { ...audit, outcome })).rejects.toThrow();
    // The refused end gave its claim back: the runner's failed end (as `endFailed` writes it) is stored at once, and
    // the answer that was never stored whole counts nothing towards the conversation's length.
    expect(await store.responses.settle('key_bg', failed, lease)).toBeDefined();
    expect(await historyOf()).toBe(before);
    expect((JSON.parse((await store.responses.responseJson('key_bg', 'resp_bg_index'))!) as ResponseObject).status).toBe('failed');
  });
});
