import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.js';
import type { Dialect } from './database.js';

/** Events of a background stream written in one flush: their text as sent, numbered `seq` to `lastSeq`. */
export interface EventBatch {
  seq: number;
  lastSeq: number;
  text: string;
}

/** What a reader of a response's kept stream needs of its row, read for one key. */
export interface StreamState {
  /** `kept`: its events are kept; `cut`: they were given up (past the limit); null: a response whose stream is not kept. */
  events: 'kept' | 'cut' | null;
  /** Its run goes on (a background response not yet at its final status). */
  running: boolean;
}

/**
 * The events of background streams (`response_events`), kept so that a client whose connection dropped reads them
 * again, from any instance. Rows are written only for a response whose row says its events are kept (`stream_events`
 * = `kept`): a batch that comes after the response was deleted, or after its events were given up, writes nothing.
 * Reads go by response id alone: callers read `state` for the key first (another key's response is not found there).
 *
 * @example
 * await events.append('resp_1', { seq: 0, lastSeq: 1, text: 'event: response.created\ndata: {…}\n\n…' });
 * const batches = await events.after('resp_1', 1, 100);
 */
export class ResponseEventsStore {
  /** `dialect`: `db`'s, which `append`'s lock on its response's row is written for. */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
  ) {}

  /** Writes a batch; whether it was written (not when the response is gone or its events were given up). */
  async append(responseId: string, batch: EventBatch): Promise<boolean> {
    // The batch's values in the select list carry a cast: Postgres would otherwise type them as text.
    const response = this.db
      .selectFrom('responses')
      .select([
        'id',
        sql<number>`cast(${batch.seq} as integer)`.as('seq'),
        sql<number>`cast(${batch.lastSeq} as integer)`.as('last_seq'),
        'created_at',
        sql<string>`cast(${batch.text} as text)`.as('text'),
      ])
      .where('id', '=', responseId)
      .where('stream_events', '=', 'kept');
    // On Postgres the row is held until the batch is in: a DELETE (or purge) of the response waits for it, and then
    // deletes it with the response's other events. Read unlocked, it was deleted meanwhile (another instance) and the
    // batch, committed after the DELETE had cleared the events, stayed with no response.
    const result = await this.db
      .insertInto('response_events')
      .columns(['response_id', 'seq', 'last_seq', 'created_at', 'text'])
      .expression(this.dialect === 'postgres' ? response.forKeyShare() : response)
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
  }

  /** Gives up the response's kept events (past the limit, or a batch lost): none are kept any more, and its row says so. */
  async cut(responseId: string): Promise<void> {
    await this.db.updateTable('responses').set({ stream_events: 'cut' }).where('id', '=', responseId).where('stream_events', '=', 'kept').execute();
    await this.db.deleteFrom('response_events').where('response_id', '=', responseId).execute();
  }

  /** The stream state of response `id` of this key; undefined when there is no such response. */
  async state(keyId: string, id: string): Promise<StreamState | undefined> {
    const row = await this.db
      .selectFrom('responses')
      .select(['stream_events', 'background_lease_until'])
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .executeTakeFirst();
    if (!row) return undefined;
    return { events: row.stream_events ?? null, running: row.background_lease_until != null };
  }

  /** Up to `limit` batches holding events numbered after `after`, in order. */
  async after(responseId: string, after: number, limit: number): Promise<EventBatch[]> {
    const rows = await this.db
      .selectFrom('response_events')
      .select(['seq', 'last_seq', 'text'])
      .where('response_id', '=', responseId)
      .where('last_seq', '>', after)
      .orderBy('seq')
      .limit(limit)
      .execute();
    return rows.map((row) => ({ seq: Number(row.seq), lastSeq: Number(row.last_seq), text: row.text }));
  }

  /** The number of the response's last kept event, -1 when none is kept. */
  async lastSeq(responseId: string): Promise<number> {
    const row = await this.db.selectFrom('response_events').select((eb) => eb.fn.max('last_seq').as('last')).where('response_id', '=', responseId).executeTakeFirst();
    return row?.last == null ? -1 : Number(row.last);
  }
}
