import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import { outputAsInput, type ResponseInputItem, type ResponseObject } from '@svc/protocol';
import { MAX_BODY_BYTES } from '../config.js';
import { pace, turns } from '../turns.js';
import type { Database } from './schema.js';

/**
 * The ids of the chain that ends with response `id` (the CTE `chain(id, previous_response_id, depth)`), for
 * this key only. One recursive query walks it (SQLite and Postgres both have WITH RECURSIVE); the depth bound
 * stops a cycle, which ids made by svc cannot form, and an unbounded walk. It reads no item or response column.
 */
function chain(keyId: string, id: string) {
  return sql`chain(id, previous_response_id, depth) as (
        select id, previous_response_id, 0 from responses where id = ${id} and key_id = ${keyId}
        union all
        select r.id, r.previous_response_id, chain.depth + 1
        from responses r join chain on r.id = chain.previous_response_id
        where r.key_id = ${keyId} and chain.depth < ${MAX_CONVERSATION_DEPTH}
      )`;
}

/** The conversation behind a `previous_response_id`, oldest first, and its size in characters of JSON. */
export interface Conversation {
  items: ResponseInputItem[];
  chars: number;
}

/** How far back `previous_response_id` is followed: a longer chain is read from its last this many turns. */
export const MAX_CONVERSATION_DEPTH = 1_000;

/**
 * The most a conversation read back through `previous_response_id` may hold (characters of its items'
 * JSON): what one request body may send inline. Without it, a chain of a thousand large turns would be read
 * into memory at once, gigabytes for one request.
 */
export const MAX_CONVERSATION_CHARS = MAX_BODY_BYTES;

/** The conversation behind `previous_response_id` holds more than `MAX_CONVERSATION_CHARS`. */
export class ConversationTooLongError extends Error {
  constructor(readonly chars: number) {
    super(`The conversation holds ${chars} characters; at most ${MAX_CONVERSATION_CHARS} are read back.`);
    this.name = 'ConversationTooLongError';
  }
}

/**
 * Responses of the Responses API, each visible only to the key that created it: every read and delete takes
 * the key's id, so another key's response id reads as not found.
 */
export class ResponsesStore {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Stores the response; resolves with its JSON as stored, which is also what the client is sent.
   * `historyChars` is the size of the conversation it followed (`Conversation.chars`, 0 for none).
   */
  async save(
    keyId: string,
    response: ResponseObject,
    inputItems: readonly ResponseInputItem[],
    historyChars = 0,
    turn: () => boolean = turns(),
  ): Promise<string> {
    // Each serialisation of megabytes (20,000 input items, 9 MiB of echoed `instructions`) and, on SQLite, the
    // synchronous insert are steps of tens of milliseconds: `turn` is the request's clock, and each of them, and
    // what the request does next (the answer, the audit), gets a turn of its own when the one before took one.
    const items = JSON.stringify(inputItems);
    await pace(turn);
    const output = JSON.stringify(outputAsInput(response.output));
    const body = JSON.stringify(response);
    await pace(turn);
    await this.db
      .insertInto('responses')
      .values({
        id: response.id,
        key_id: keyId,
        previous_response_id: response.previous_response_id,
        created_at: response.created_at,
        input_items: items,
        response: body,
        output_items: output,
        history_chars: historyChars + items.length + output.length,
      })
      .execute();
    await pace(turn);
    return body;
  }

  /** The response's JSON as it was answered, for this key; undefined when there is none. */
  async responseJson(keyId: string, id: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('responses').select('response').where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst();
    return row?.response;
  }

  /** The response's own input items, for this key; undefined when there is no such response. */
  async inputItems(keyId: string, id: string): Promise<ResponseInputItem[] | undefined> {
    const row = await this.db.selectFrom('responses').select('input_items').where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst();
    return row && (JSON.parse(row.input_items) as ResponseInputItem[]);
  }

  /** Whether a response was deleted (false: no such response for this key). */
  async delete(keyId: string, id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('responses').where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /**
   * The conversation that ends with response `id`, oldest first: each response's input items, then its output.
   * `undefined` when `id` is not a response of this key; a chain that reaches a purged or deleted response ends
   * there. Throws `ConversationTooLongError` past `MAX_CONVERSATION_CHARS`, before reading the chain.
   */
  async conversation(keyId: string, id: string): Promise<Conversation | undefined> {
    const head = await this.db.selectFrom('responses').select('history_chars').where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst();
    if (!head) return undefined;
    // The head's count covers the whole chain (a deleted or purged link only shortens it); rows stored
    // before it was kept are measured in the database, without bringing them into memory.
    const chars = head.history_chars ?? (await this.measure(keyId, id));
    if (chars > MAX_CONVERSATION_CHARS) throw new ConversationTooLongError(chars);
    const rows = await sql<{ input_items: string; output_items: string | null; response: string | null }>`
      with recursive ${chain(keyId, id)}
      select r.input_items, r.output_items, case when r.output_items is null then r.response end as response
      from chain join responses r on r.id = chain.id order by chain.depth desc`.execute(this.db);
    const items: ResponseInputItem[] = [];
    const turn = turns();
    for (const row of rows.rows) {
      for (const item of JSON.parse(row.input_items) as ResponseInputItem[]) items.push(item);
      const output =
        row.output_items === null ? outputAsInput((JSON.parse(row.response!) as ResponseObject).output) : (JSON.parse(row.output_items) as ResponseInputItem[]);
      for (const item of output) items.push(item);
      if (turn()) await yieldToEventLoop();
    }
    return { items, chars };
  }

  /** Characters of a chain's stored items, counted in the database: for chains of rows stored before 008. */
  private async measure(keyId: string, id: string): Promise<number> {
    const result = await sql<{ chars: number | string | null }>`
      with recursive ${chain(keyId, id)}
      select sum(length(r.input_items) + length(coalesce(r.output_items, r.response))) as chars
      from chain join responses r on r.id = chain.id`.execute(this.db);
    return Number(result.rows[0]?.chars ?? 0);
  }

  /** Removes responses created before `cutoff` (ms since the epoch); returns how many. */
  async purgeOlderThan(cutoff: number): Promise<number> {
    const result = await this.db.deleteFrom('responses').where('created_at', '<', Math.floor(cutoff / 1000)).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
