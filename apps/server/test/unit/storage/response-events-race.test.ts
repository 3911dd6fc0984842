import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/storage/store.js';
import { createTestPostgres, queryPostgres } from '../../support/databases.js';
import { storedResponse } from '../../support/responses.js';

const pgDb = await createTestPostgres('response-events-race');

/** Whether a statement like `pattern` waits for a lock now. */
async function waitsForLock(url: string, pattern: string): Promise<boolean> {
  const waiting = "select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like $1";
  return Number((await queryPostgres<{ n: string | number }>(url, waiting, [pattern]))[0]?.n) > 0;
}

describe.skipIf(!pgDb)('a batch of kept events written while its response is deleted (Postgres)', () => {
  let store: Store;
  beforeAll(async () => {
    store = await openStore(pgDb!.url);
  });
  afterAll(async () => {
    await store?.close();
    await pgDb?.drop();
  });

  it('leaves no event row behind the DELETE, whichever commits first', async () => {
    const url = pgDb!.url;
    const running = { ...storedResponse({ id: 'resp_race', previous: null, createdAt: 7_000, text: '' }), status: 'in_progress' as const, background: true, output: [] };
    await store.responses.save('key_r', running, [{ type: 'message', id: 'in_race', role: 'user', content: 'Hi' }], 0, undefined, {
      owner: 'a-runner',
      until: Date.now() + 3_600_000,
      keepsEvents: true,
    });
    // Another session holds the batch's key uncommitted: the write, its response already read, waits on it, as a
    // large batch's write is under way while the DELETE runs on another instance.
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await other.query('begin');
      await other.query("insert into response_events (response_id, seq, last_seq, created_at, text) values ('resp_race', 0, 0, 7000, 'x')");
      const appending = store.responseEvents.append('resp_race', { seq: 0, lastSeq: 0, text: 'event: response.created\ndata: {}\n\n' });
      await expect.poll(() => waitsForLock(url, 'insert into "response_events"%')).toBe(true);
      // The DELETE: done at once (before the write ends), or waiting for the write.
      let deleted = false;
      const deleting = store.responses.delete('key_r', 'resp_race').then((found) => ((deleted = true), found));
      await expect.poll(async () => deleted || (await waitsForLock(url, 'delete from "responses"%'))).toBe(true);
      await other.query('rollback');
      await appending;
      expect(await deleting).toBe(true);
    } finally {
      await other.end();
    }
    expect(await store.handle.db.selectFrom('response_events').select('seq').where('response_id', '=', 'resp_race').execute()).toEqual([]);
  });
});
