import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import { outputAsInput, type ResponseInputItem, type ResponseObject } from '@svc/protocol';
import type { Database } from './schema.js';

/** A stored response: what `GET /v1/responses/{id}` and `/input_items` read. */
export interface StoredResponse {
  response: ResponseObject;
  inputItems: ResponseInputItem[];
}

/** A stored row this long (characters of JSON) is written in a turn of the event loop of its own. */
const LARGE_ROW_CHARS = 1024 * 1024;

/** How far back `previous_response_id` is followed; a longer chain is refused rather than read without end. */
export const MAX_CONVERSATION_DEPTH = 1_000;

/**
 * Responses of the Responses API, each visible only to the key that created it: every read and delete takes
 * the key's id, so another key's response id reads as not found.
 */
export class ResponsesStore {
  constructor(private readonly db: Kysely<Database>) {}

  /** Stores the response; resolves with its JSON as stored, which is also what the client is sent. */
  async save(keyId: string, response: ResponseObject, inputItems: readonly ResponseInputItem[]): Promise<string> {
    const items = JSON.stringify(inputItems);
    const body = JSON.stringify(response);
    // On SQLite the insert runs synchronously, tens of milliseconds for megabytes (9 MiB of `instructions`
    // is stored twice over: input and echo). A large row gets turns of its own, so the serialising, the
    // insert and what the request does next (the answer, the audit) don't add up into one long stall.
    const large = items.length + body.length >= LARGE_ROW_CHARS;
    if (large) await yieldToEventLoop();
    await this.db
      .insertInto('responses')
      .values({
        id: response.id,
        key_id: keyId,
        previous_response_id: response.previous_response_id,
        created_at: response.created_at,
        input_items: items,
        response: body,
      })
      .execute();
    if (large) await yieldToEventLoop();
    return body;
  }

  async get(keyId: string, id: string): Promise<StoredResponse | undefined> {
    const row = await this.db
      .selectFrom('responses')
      .select(['response', 'input_items'])
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .executeTakeFirst();
    return row && { response: JSON.parse(row.response) as ResponseObject, inputItems: JSON.parse(row.input_items) as ResponseInputItem[] };
  }

  /** Whether a response was deleted (false: no such response for this key). */
  async delete(keyId: string, id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('responses').where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /**
   * The conversation that ends with response `id`, oldest first: each response's input items, then its output.
   * `undefined` when `id` is not a response of this key; a chain that reaches a purged or deleted response ends there.
   */
  async conversation(keyId: string, id: string): Promise<ResponseInputItem[] | undefined> {
    // One recursive query walks the chain (both SQLite and Postgres have WITH RECURSIVE); the depth bound
    // stops a cycle, which ids made by svc cannot form, and an unbounded read.
    const rows = await sql<{ input_items: string; response: string; depth: number }>`
      with recursive chain(id, previous_response_id, input_items, response, depth) as (
        select id, previous_response_id, input_items, response, 0 from responses where id = ${id} and key_id = ${keyId}
        union all
        select r.id, r.previous_response_id, r.input_items, r.response, chain.depth + 1
        from responses r join chain on r.id = chain.previous_response_id
        where r.key_id = ${keyId} and chain.depth < ${MAX_CONVERSATION_DEPTH}
      )
      select input_items, response, depth from chain order by depth desc`.execute(this.db);
    if (rows.rows.length === 0) return undefined;
    const items: ResponseInputItem[] = [];
    for (const row of rows.rows) {
      items.push(...(JSON.parse(row.input_items) as ResponseInputItem[]));
      items.push(...outputAsInput((JSON.parse(row.response) as ResponseObject).output));
    }
    return items;
  }

  /** Removes responses created before `cutoff` (ms since the epoch); returns how many. */
  async purgeOlderThan(cutoff: number): Promise<number> {
    const result = await this.db.deleteFrom('responses').where('created_at', '<', Math.floor(cutoff / 1000)).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
