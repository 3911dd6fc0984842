import { randomBytes } from 'node:crypto';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import { outputAsInput, type ResponseInputItem, type ResponseObject, type SvcResult, type Usage } from '@svc/protocol';
import { MAX_BODY_BYTES } from '../config.js';
import { parseStoredJsonInTurns, slices, stringifyInTurns } from '../json-in-turns.js';
import { pace, turns } from '../turns.js';
import type { Dialect } from './database.js';
import type { Database } from './schema.js';

/**
 * Characters of a JSON column kept in one row; a longer one goes to `response_parts` a part per row. On
 * SQLite one insert of 9 MB held the event loop for about 100 ms, the time growing faster than the size;
 * a part of 1 MiB is a few ms, and the request yields between parts.
 */
export const RESPONSE_PART_CHARS = 1024 * 1024;

/**
 * Stored responses a purge deletes at a time, each batch its own statement: 50,000 in one held SQLite's event
 * loop for as long (bench/delivery-store.mjs).
 */
export const PURGE_RESPONSES_BATCH = 1_000;
/** Response parts a purge deletes at a time: each may be a MiB of text to free. */
export const PURGE_PARTS_BATCH = 64;

/** Output item ids written or looked up in one statement (well under SQLite's and Postgres' limits on parameters). */
const ITEM_BATCH = 500;

/** A background response stored running: the process that runs it, and until when it vouches for it (ms). */
export interface RunningLease {
  owner: string;
  until: number;
}

/**
 * What the one audit of a background response needs beside its stored state, kept with it: whoever ends the
 * response (its owner, or whoever ends it `failed` once nobody runs it) records the audit from these.
 */
export interface BackgroundAudit {
  /** The POST's `x-request-id`: the payload's `request_id`. */
  requestId: string;
  /** When the POST arrived (epoch ms): `latency_ms` counts from it. */
  startedAt: number;
  /** Whether the POST asked for a stream. */
  streaming: boolean;
  /**
   * Set with the response's final state (`settle` with an audit) while its audit is still to be recorded: whoever
   * ends the run records this outcome, the one its runner was recording.
   */
  outcome?: AuditOutcome;
  /**
   * Set with `outcome` by a runner that counts its request in the Usage view when its run ends, not as it records its
   * audit (this release and later). An outcome stored without it is an earlier release's (a rolling upgrade), whose
   * runner counted the request as it recorded the audit: whoever ends the run counts it only if that audit is not recorded.
   */
  countsOnEnd?: true;
}

/** The audit of a background response whose final state is stored, as its runner records it (the prompt is read back from the stored input). */
export interface AuditOutcome {
  statusCode: number;
  /** Epoch ms the response ended: `latency_ms` counts to it. */
  finishedAt: number;
  responseText: string;
  refusal?: string;
  svc: SvcResult | null;
  usage: Usage;
}

/** A background response that no process runs any more (`ResponsesStore.orphans`). */
export interface Orphan {
  id: string;
  keyId: string;
  /** Its run as found: who ran it and its lease, which `takeOver` is given. */
  owner: string | null;
  lease: number;
  /** The running response's JSON; undefined when it cannot be read whole (a part is missing: a write of its end stopped midway). */
  json: string | undefined;
  /** When it was created (epoch seconds) and the response it follows: what is known of it when its JSON is not. */
  createdAt: number;
  previousResponseId: string | null;
  /** Undefined on a row stored before 019, and on one whose stored audit is not JSON (`auditUnreadable`). */
  audit: BackgroundAudit | undefined;
  /** Its stored audit could not be read: it is ended and audited with what its response says, as one stored before 019. */
  auditUnreadable?: true;
}

/** A background response's run as `settle` claimed it: its writes go only while the row still holds this lease. */
interface Claim {
  keyId: string;
  id: string;
  until: number;
}

/** A `settle` found its claim gone (`whileClaimed`): the run was taken over, and this writer writes nothing more. */
class RunTakenOver extends Error {
  constructor() {
    super('the background response run was taken over by another writer');
    this.name = 'RunTakenOver';
  }
}

/** The columns of `responses` that may be kept in parts. */
type PartedField = 'input_items' | 'response' | 'output_items';

/**
 * What a column kept in parts holds: this and the number of parts. No JSON text starts so (and Postgres text
 * holds no NUL), and a read that finds fewer parts (the response deleted or purged meanwhile) knows it is gone.
 */
const IN_PARTS = 'parts:';

/**
 * Between the count of parts and a generation: `parts:3#9f2c…` is kept under the field `response#9f2c…`, a name
 * no other write of the response uses (`settle`). A plain `parts:3` is kept under the column's own name, as every
 * version of svc writes a column into parts and reads it back.
 */
const GENERATION = '#';

/** Where a column's parts are: the `field` of their rows and how many; undefined when the column holds its text itself. */
function partsOf(column: PartedField, stored: string): { field: string; count: number } | undefined {
  if (!stored.startsWith(IN_PARTS)) return undefined;
  const [count, generation] = stored.slice(IN_PARTS.length).split(GENERATION);
  return { field: generation === undefined ? column : `${column}${GENERATION}${generation}`, count: Number(count) };
}

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

/** A stored output item and the characters of its JSON. */
export interface StoredItem {
  item: ResponseInputItem;
  chars: number;
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
  /** `dialect`: `db`'s, which `settle`'s check of its claim is written for (`whileClaimed`). */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
  ) {}

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
    running?: RunningLease & { audit?: BackgroundAudit; keepsEvents?: boolean },
  ): Promise<string> {
    // Serialising megabytes (20,000 input items, 9 MiB of echoed `instructions`) and writing them are steps of
    // tens of milliseconds: the long strings are escaped a slice at a time and long columns written a part at a
    // time, in `turn`, the request's clock, so other requests go between.
    const items = await stringifyInTurns(inputItems, turn);
    await pace(turn);
    // A failed response's output was cut off (half a message, a call whose arguments never closed): a follow-up
    // through `previous_response_id` carries its input over, not that.
    const output = await stringifyInTurns(response.status === 'failed' ? [] : outputAsInput(response.output), turn);
    const body = await stringifyInTurns(response, turn);
    await pace(turn);
    try {
      const row = {
        input_items: await this.putParts(response, 'input_items', items, turn),
        response: await this.putParts(response, 'response', body, turn),
        output_items: await this.putParts(response, 'output_items', output, turn),
      };
      await this.db
        .insertInto('responses')
        .values({
          id: response.id,
          key_id: keyId,
          previous_response_id: response.previous_response_id,
          created_at: response.created_at,
          ...row,
          history_chars: historyChars + items.length + output.length,
          ...(running && { background_owner: running.owner, background_lease_until: running.until }),
          ...(running?.audit && { background_audit: JSON.stringify(running.audit) }),
          ...(running?.keepsEvents && { stream_events: 'kept' as const }),
        })
        .execute();
      await this.indexOutputItems(keyId, response, turn);
    } catch (err) {
      await this.db.deleteFrom('responses').where('id', '=', response.id).execute();
      await this.db.deleteFrom('response_items').where('response_id', '=', response.id).execute();
      await this.db.deleteFrom('response_parts').where('response_id', '=', response.id).execute();
      throw err;
    }
    await pace(turn);
    return body;
  }

  /**
   * Writes the final state of a background response stored running (`save` with a lease) and ends its run; resolves
   * with its JSON as stored. Only the run named by `by` may: its owner (`{ owner }`), or whoever ends a lapsed lease
   * (`{ lease }`, the lease it found, which a live owner would have pushed forward). Undefined, and nothing written,
   * when the run is no longer that one's (ended by another instance, or the response deleted), also when it stopped
   * being so while this wrote (its lease lapsed: taken over and ended by another, whose end stays). `until` is the lease
   * the writer holds meanwhile (past it, a writer that died mid-way is taken over).
   *
   * With `audit` (its `outcome` set), the run is not ended yet: the final state and the audit still to record are
   * written in one statement, and the run stays `by.owner`'s, under its lease, until `auditRecorded`. A writer that
   * dies between the two leaves the run to be found (`orphans`) and its audit recorded by whoever ends it, once.
   *
   * @example
   * await responses.settle(keyId, failed, { lease: orphan.lease, until: clock() + BACKGROUND_LEASE_MS });
   */
  async settle(
    keyId: string,
    response: ResponseObject,
    by: { owner: string; until: number } | { lease: number; until: number },
    turn: () => boolean = turns(),
    audit?: BackgroundAudit & { outcome: AuditOutcome },
  ): Promise<string | undefined> {
    // Claimed first, so that two enders do not both write its parts. The claim moves the lease to the writer's own:
    // another instance that found the old one (lapsed: the owner is slow, or two instances sweep at once) then claims
    // nothing. The lease stays set, so that readers and cancels see it running until the final write below.
    const claim = this.db
      .updateTable('responses')
      .set({ background_owner: null, background_lease_until: by.until })
      .where('id', '=', response.id)
      .where('key_id', '=', keyId);
    const claimed = await ('owner' in by
      ? claim.where('background_owner', '=', by.owner)
      : claim.where('background_lease_until', '=', by.lease)
    ).executeTakeFirst();
    if (claimed.numUpdatedRows === 0n) return undefined;
    // Every write from here on goes only while the run is still this claim's: a writer slower than its lease finds
    // its run taken over (`takeOver`) and its end written by whoever found it lapsed, whose parts it must not delete,
    // mix its own into, or index over.
    const claimedRun: Claim = { keyId, id: response.id, until: by.until };
    try {
      return await this.writeEnd(keyId, response, by, claimedRun, turn, audit);
    } catch (err) {
      // An end the database refused (a full disk, a lost connection): the claim is given back, so that the writer's
      // next end (its `failed`, saying why) claims the run at once, rather than the run staying claimed by nobody,
      // read as running, until whoever finds its lease lapsed ends it without that error.
      await this.unclaim(claimedRun, by).catch(() => undefined);
      throw err;
    }
  }

  /** `settle`'s writes once its claim is made; undefined when the run stopped being the claim's meanwhile. */
  private async writeEnd(
    keyId: string,
    response: ResponseObject,
    by: { owner: string; until: number } | { lease: number; until: number },
    claimedRun: Claim,
    turn: () => boolean,
    audit: (BackgroundAudit & { outcome: AuditOutcome }) | undefined,
  ): Promise<string | undefined> {
    const output = await stringifyInTurns(response.status === 'failed' ? [] : outputAsInput(response.output), turn);
    const body = await stringifyInTurns(response, turn);
    await pace(turn);
    // The columns still point at the running response (or an earlier end) until the final write: readers, on any
    // instance, go on reading that whole while the new parts are written beside it (`endParts`).
    const into = await this.endParts(keyId, response.id);
    if (!into) return undefined;
    let row: { response: string; output_items: string };
    try {
      // Parts a writer that stopped midway left where these go (no row points at them), and what an earlier end of
      // this run indexed, make way.
      const legacy = (['response', 'output_items'] as const).filter((column) => into[column] === undefined);
      await this.whileClaimed(claimedRun, async (db) => {
        if (legacy.length > 0) await db.deleteFrom('response_parts').where('response_id', '=', response.id).where('field', 'in', legacy).execute();
        await db.deleteFrom('response_items').where('response_id', '=', response.id).execute();
      });
      row = {
        response: await this.putParts(response, 'response', body, turn, claimedRun, into.response),
        output_items: await this.putParts(response, 'output_items', output, turn, claimedRun, into.output_items),
      };
      // Indexed before the final write: that write gives a runner its run back (until its audit is recorded), and a run
      // that failed after it would end failed over the answer it had stored.
      await this.indexOutputItems(keyId, response, turn, claimedRun);
    } catch (err) {
      if (err instanceof RunTakenOver) return undefined;
      throw err;
    }
    // The row points at the new parts and the old ones go in one transaction: a read that still follows the old
    // pointer and finds a part gone reads the row again (`whole`).
    const kept = [partsOf('response', row.response), partsOf('output_items', row.output_items)].flatMap((parts) => (parts ? [parts.field] : []));
    const written = await this.db.transaction().execute(async (trx) => {
      const result = await trx
        .updateTable('responses')
        .set({
          ...row,
          // The running row counted its output as `[]` (2 characters).
          history_chars: sql<number>`history_chars + ${output.length - 2}`,
          ...(audit && 'owner' in by
            ? { background_owner: by.owner, background_lease_until: by.until, background_audit: JSON.stringify(audit) }
            : { background_lease_until: null, cancel_requested_at: null }),
        })
        .where('id', '=', response.id)
        .where('key_id', '=', keyId)
        // Still this claim's: a writer slower than its lease (`until`) finds its run taken over and ended by whoever
        // found it lapsed (`orphans`, `takeOver`), whose end (and audit, and count) is not written over.
        .where('background_owner', 'is', null)
        .where('background_lease_until', '=', by.until)
        .executeTakeFirst();
      if (result.numUpdatedRows === 0n) return false;
      // The parts the row pointed at before, and any a writer that stopped midway left: nothing points at them now.
      let stale = trx
        .deleteFrom('response_parts')
        .where('response_id', '=', response.id)
        .where((eb) => eb.or([eb('field', 'in', ['response', 'output_items']), eb('field', 'like', `response${GENERATION}%`), eb('field', 'like', `output_items${GENERATION}%`)]));
      if (kept.length > 0) stale = stale.where('field', 'not in', kept);
      await stale.execute();
      return true;
    });
    return written ? body : undefined;
  }

  /**
   * Gives a `settle`'s claim back, while the run is still that claim's: to its owner (`{ owner }`), under the lease
   * the claim held, or to its lease as found (`{ lease }`), for whoever finds it lapsed.
   */
  private async unclaim(claim: Claim, by: { owner: string; until: number } | { lease: number; until: number }): Promise<void> {
    await this.db
      .updateTable('responses')
      .set('owner' in by ? { background_owner: by.owner } : { background_lease_until: by.lease })
      .where('id', '=', claim.id)
      .where('key_id', '=', claim.keyId)
      .where('background_owner', 'is', null)
      .where('background_lease_until', '=', claim.until)
      .execute();
  }

  /**
   * Where `settle` writes the parts of a background response's end, by column: undefined for the column's own name
   * (`parts:N`, which svc's previous versions read too), else a new generation. The column's own name only when no
   * reader can be following a pointer to it: the column does not point at parts now, and no end was written before
   * (the stored audit has no outcome), so it never did; a reader that read `parts:N` earlier would otherwise find, in
   * the place it reads, the parts of a later end. Undefined when the response is gone.
   */
  private async endParts(keyId: string, id: string): Promise<Record<'response' | 'output_items', string | undefined> | undefined> {
    const row = await this.db
      .selectFrom('responses')
      // The head only: a column not kept in parts holds up to a MiB of JSON.
      .select([sql<string>`substr(response, 1, 64)`.as('response'), sql<string | null>`substr(output_items, 1, 64)`.as('output_items'), 'background_audit'])
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .executeTakeFirst();
    if (!row) return undefined;
    const stored = storedAudit(row.background_audit);
    const endedBefore = stored.auditUnreadable === true || stored.audit?.outcome !== undefined;
    const generation = randomBytes(8).toString('hex');
    const place = (head: string | null) => (endedBefore || head?.startsWith(IN_PARTS) ? generation : undefined);
    return { response: place(row.response), output_items: place(row.output_items) };
  }

  /**
   * Ends the run of a background response whose final state and audit `owner` wrote (`settle` with an audit), once
   * that audit is recorded; whether it did (not when the run was taken over meanwhile, or the response deleted).
   */
  async auditRecorded(keyId: string, id: string, owner: string): Promise<boolean> {
    const result = await this.db
      .updateTable('responses')
      .set({ background_owner: null, background_lease_until: null, cancel_requested_at: null, background_audit: null })
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('background_owner', '=', owner)
      .where('background_lease_until', 'is not', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /**
   * The run of a background response of this key that is still running (undefined when it is not, or there is no
   * such response): who runs it and its lease, as `takeOver` is given them, and the audit stored with it, its
   * `outcome` set once the runner stored its end (`settle` with an audit) and has not yet recorded it (`auditRecorded`).
   * Reads no response column: cheap to poll.
   */
  async runOf(keyId: string, id: string): Promise<Pick<Orphan, 'owner' | 'lease' | 'audit' | 'auditUnreadable'> | undefined> {
    const row = await this.db
      .selectFrom('responses')
      .select(['background_owner', 'background_lease_until', 'background_audit'])
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('background_lease_until', 'is not', null)
      .executeTakeFirst();
    if (!row) return undefined;
    return { owner: row.background_owner ?? null, lease: Number(row.background_lease_until), ...storedAudit(row.background_audit) };
  }

  /**
   * A stored response's JSON and whether it was created in background and is still running; undefined when there is
   * no such response for this key.
   */
  async state(keyId: string, id: string): Promise<{ json: string; running: boolean } | undefined> {
    const row = await this.read(keyId, id, 'response');
    return row && { json: row.text, running: row.running };
  }

  /** Asks the run of a background response to stop (its owner polls for it); false when it is not running. */
  async requestCancel(keyId: string, id: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('responses')
      .set({ cancel_requested_at: at })
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('background_lease_until', 'is not', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /**
   * Of the background responses `owner` runs (`running`), those to stop: their cancel was asked, or their row is no
   * longer `owner`'s running one (deleted, as DELETE /v1/responses/{id} does after asking the cancel; or ended by
   * another instance): nobody could read what they go on to generate.
   */
  async cancelsAsked(owner: string, running: readonly string[]): Promise<string[]> {
    const stop: string[] = [];
    for (let i = 0; i < running.length; i += ITEM_BATCH) {
      const ids = running.slice(i, i + ITEM_BATCH);
      const rows = await this.db
        .selectFrom('responses')
        .select(['id', 'cancel_requested_at'])
        .where('id', 'in', ids)
        .where('background_lease_until', 'is not', null)
        .where('background_owner', '=', owner)
        .execute();
      const stillRunning = new Map(rows.map((row) => [row.id, row.cancel_requested_at]));
      for (const id of ids) if (!stillRunning.has(id) || stillRunning.get(id) != null) stop.push(id);
    }
    return stop;
  }

  /**
   * Pushes to `until` the lease of each of `ids` that `owner` still runs. Only those: a row of `owner`'s whose run
   * ended without its final state stored (the database failed then) must lapse, not be kept running by the others.
   */
  async renewLeases(owner: string, ids: readonly string[], until: number): Promise<void> {
    for (let i = 0; i < ids.length; i += ITEM_BATCH) {
      await this.db
        .updateTable('responses')
        .set({ background_lease_until: until })
        .where('id', 'in', ids.slice(i, i + ITEM_BATCH))
        .where('background_lease_until', 'is not', null)
        .where('background_owner', '=', owner)
        .execute();
    }
  }

  /**
   * Background responses no process runs any more, at most `limit`: those whose lease lapsed before `lapsedBefore`,
   * or every one run by `owner` (a process known dead), or every one not run by `otherThan` (at the start of a server
   * that holds its database alone: the previous run's), or response `id` of `keyId` while it runs, whoever runs it
   * (a DELETE ends it first). Each with its key, its lease as found (what `settle` is given) and its JSON.
   */
  async orphans(which: { lapsedBefore: number } | { owner: string } | { otherThan: string } | { keyId: string; id: string }, limit: number): Promise<Orphan[]> {
    let query = this.db
      .selectFrom('responses')
      .select(['id', 'key_id', 'response', 'created_at', 'previous_response_id', 'background_owner', 'background_lease_until', 'background_audit'])
      .where('background_lease_until', 'is not', null)
      .limit(limit);
    if ('id' in which) query = query.where('id', '=', which.id).where('key_id', '=', which.keyId);
    else if ('owner' in which) query = query.where('background_owner', '=', which.owner);
    else if ('otherThan' in which) query = query.where((eb) => eb.or([eb('background_owner', 'is', null), eb('background_owner', '<>', which.otherThan)]));
    else query = query.where('background_lease_until', '<', which.lapsedBefore);
    const found: Orphan[] = [];
    for (const row of await query.execute()) {
      // Found all the same when its parts are missing: skipped, it would never be ended, and a batch of such would
      // keep every other orphan from being found.
      const json = await this.whole(row.id, 'response', row.response);
      found.push({ id: row.id, createdAt: Number(row.created_at), previousResponseId: row.previous_response_id, keyId: row.key_id, owner: row.background_owner ?? null, lease: Number(row.background_lease_until), json, ...storedAudit(row.background_audit) });
    }
    return found;
  }

  /**
   * Makes `owner` the runner of an orphan (`orphans`) until `until`, unless another took it since it was found (its
   * owner or lease changed); whether it did. The one that took it ends it (`settle` by `owner`); should that one stop
   * first, the lease it took lapses and the orphan is found again.
   */
  async takeOver(keyId: string, id: string, found: Pick<Orphan, 'owner' | 'lease'>, owner: string, until: number): Promise<boolean> {
    const result = await this.db
      .updateTable('responses')
      .set({ background_owner: owner, background_lease_until: until })
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .where('background_lease_until', '=', found.lease)
      .where('background_owner', found.owner === null ? 'is' : '=', found.owner)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** Records which response holds each output item, so that an `item_reference` to it is found (none of a failed response: its output was cut off). */
  private async indexOutputItems(keyId: string, response: ResponseObject, turn: () => boolean, claim?: Claim): Promise<void> {
    if (response.status === 'failed') return;
    for (let at = 0; at < response.output.length; at += ITEM_BATCH) {
      const rows = response.output
        .slice(at, at + ITEM_BATCH)
        .map((item) => ({ key_id: keyId, id: item.id, response_id: response.id, created_at: response.created_at }));
      await this.whileClaimed(claim, (db) => db.insertInto('response_items').values(rows).execute());
      await pace(turn);
    }
  }

  /**
   * Runs `write` on the store's database; with `claim`, only while that run is still the claim's (`settle`), in one
   * transaction that first holds the row so that nobody takes the run over between the check and the write. Throws
   * `RunTakenOver` when it no longer is, having written nothing.
   */
  private async whileClaimed(claim: Claim | undefined, write: (db: Kysely<Database>) => Promise<unknown>): Promise<void> {
    if (!claim) {
      await write(this.db);
      return;
    }
    await this.db.transaction().execute(async (trx) => {
      // Checked with a read, not a write: a no-op update per part made a new row version each on Postgres, for VACUUM
      // to clear. There the read locks the row (FOR UPDATE: a take-over waits for this transaction); a SQLite
      // transaction holds the write lock from its BEGIN (IMMEDIATE, database.ts), so nobody writes between the two.
      const check = trx
        .selectFrom('responses')
        .select('id')
        .where('id', '=', claim.id)
        .where('key_id', '=', claim.keyId)
        .where('background_owner', 'is', null)
        .where('background_lease_until', '=', claim.until);
      const held = await (this.dialect === 'postgres' ? check.forUpdate() : check).executeTakeFirst();
      if (!held) throw new RunTakenOver();
      await write(trx);
    });
  }

  /**
   * The stored output items of this key with these ids, as a follow-up reads them (`outputAsInput`), by id, each
   * with the characters of its JSON; an id of no such item (another key's, a deleted or purged response's, or never
   * stored) is left out. Throws `ConversationTooLongError` once the items found pass `MAX_CONVERSATION_CHARS`, as a
   * conversation read back through `previous_response_id` does: a few bytes of references could name gigabytes.
   */
  async outputItems(keyId: string, ids: readonly string[], turn: () => boolean = turns()): Promise<Map<string, StoredItem>> {
    const wanted = [...new Set(ids)];
    const holders = new Map<string, string>();
    for (let at = 0; at < wanted.length; at += ITEM_BATCH) {
      const rows = await this.db
        .selectFrom('response_items')
        .select(['id', 'response_id'])
        .where('key_id', '=', keyId)
        .where('id', 'in', wanted.slice(at, at + ITEM_BATCH))
        .execute();
      for (const row of rows) holders.set(row.id, row.response_id);
    }
    const found = new Map<string, StoredItem>();
    let chars = 0;
    for (const responseId of new Set(holders.values())) {
      const row = await this.db
        .selectFrom('responses')
        .select('output_items')
        .where('id', '=', responseId)
        .where('key_id', '=', keyId)
        .executeTakeFirst();
      const json = row?.output_items == null ? undefined : await this.whole(responseId, 'output_items', row.output_items, turn);
      if (json === undefined) continue;
      for (const item of JSON.parse(json) as ResponseInputItem[]) {
        const id = 'id' in item ? item.id : undefined;
        if (typeof id !== 'string' || holders.get(id) !== responseId) continue;
        const size = JSON.stringify(item).length;
        chars += size;
        if (chars > MAX_CONVERSATION_CHARS) throw new ConversationTooLongError(chars);
        found.set(id, { item, chars: size });
      }
      await pace(turn);
    }
    return found;
  }

  /**
   * `text` for its column: itself when short, else IN_PARTS and its count (and `generation`, when given: see
   * GENERATION), the parts written one per turn.
   */
  private async putParts(response: ResponseObject, column: PartedField, text: string, turn: () => boolean, claim?: Claim, generation?: string): Promise<string> {
    if (text.length <= RESPONSE_PART_CHARS) return text;
    const field = generation === undefined ? column : `${column}${GENERATION}${generation}`;
    let seq = 0;
    for (const part of slices(text, RESPONSE_PART_CHARS)) {
      const row = { response_id: response.id, field, seq: seq++, created_at: response.created_at, text: part };
      await this.whileClaimed(claim, (db) => db.insertInto('response_parts').values(row).execute());
      await pace(turn);
    }
    return generation === undefined ? `${IN_PARTS}${seq}` : `${IN_PARTS}${seq}${GENERATION}${generation}`;
  }

  /**
   * A column's text: `stored` itself, or its parts, read one per turn; undefined when they are gone. Parts are never
   * changed, only deleted once the row points elsewhere (`settle`): a part found missing is read past by reading the
   * column again, and only when it still points there is the response gone (deleted or purged meanwhile).
   */
  private async whole(id: string, column: PartedField, stored: string, turn: () => boolean = turns()): Promise<string | undefined> {
    for (let pointer = stored; ; ) {
      const parts = partsOf(column, pointer);
      if (!parts) return pointer;
      const text = await this.readParts(id, parts, turn);
      if (text !== undefined) return text;
      const row = await this.db.selectFrom('responses').select(column).where('id', '=', id).executeTakeFirst();
      const now = row?.[column];
      if (now == null || now === pointer) return undefined;
      pointer = now;
    }
  }

  /** The text of these parts, read one per turn; undefined when one is missing. */
  private async readParts(id: string, parts: { field: string; count: number }, turn: () => boolean): Promise<string | undefined> {
    let text = '';
    for (let seq = 0; seq < parts.count; seq++) {
      const part = await this.db
        .selectFrom('response_parts')
        .select('text')
        .where('response_id', '=', id)
        .where('field', '=', parts.field)
        .where('seq', '=', seq)
        .executeTakeFirst();
      if (!part) return undefined;
      text += part.text;
      await pace(turn);
    }
    return text;
  }

  /** The response's JSON as it was answered, for this key; undefined when there is none. */
  async responseJson(keyId: string, id: string): Promise<string | undefined> {
    return (await this.read(keyId, id, 'response'))?.text;
  }

  /**
   * The row of response `id` of this key with `field` read whole (from its parts when kept in parts); undefined
   * when there is no such response, or a part is missing.
   */
  private async read(keyId: string, id: string, field: 'response' | 'input_items'): Promise<{ text: string; running: boolean; previousResponseId: string | null } | undefined> {
    const row = await this.db
      .selectFrom('responses')
      .select([field, 'background_lease_until', 'previous_response_id'])
      .where('id', '=', id)
      .where('key_id', '=', keyId)
      .executeTakeFirst();
    const text = row && (await this.whole(id, field, row[field]));
    return text === undefined ? undefined : { text, running: row!.background_lease_until != null, previousResponseId: row!.previous_response_id };
  }

  /**
   * The items the response was generated from, for this key, oldest first: as OpenAI lists them, the
   * conversation behind its `previous_response_id` (what is left of it), then its own input items.
   * Undefined when there is no such response.
   */
  async inputItems(keyId: string, id: string): Promise<ResponseInputItem[] | undefined> {
    const row = await this.read(keyId, id, 'input_items');
    if (!row) return undefined;
    // 100,000 stored items are 10 MB of JSON: one JSON.parse of them held the loop a second or more.
    const own = (await parseStoredJsonInTurns(row.text, turns())) as ResponseInputItem[];
    // The chain was read back within MAX_CONVERSATION_CHARS when this response was made, and its count is kept.
    const history = row.previousResponseId ? await this.conversation(keyId, row.previousResponseId) : undefined;
    return history ? [...history.items, ...own] : own;
  }

  /** Whether a response was deleted (false: no such response for this key). */
  async delete(keyId: string, id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('responses').where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst();
    if (result.numDeletedRows === 0n) return false;
    await this.db.deleteFrom('response_items').where('response_id', '=', id).execute();
    await this.db.deleteFrom('response_parts').where('response_id', '=', id).execute();
    await this.db.deleteFrom('response_events').where('response_id', '=', id).execute();
    return true;
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
    const rows = await sql<{ id: string; input_items: string; output_items: string | null; response: string | null }>`
      with recursive ${chain(keyId, id)}
      select r.id, r.input_items, r.output_items, case when r.output_items is null then r.response end as response
      from chain join responses r on r.id = chain.id order by chain.depth desc`.execute(this.db);
    const items: ResponseInputItem[] = [];
    const turn = turns();
    for (const row of rows.rows) {
      const input = await this.whole(row.id, 'input_items', row.input_items, turn);
      // Rows stored before 008 have no output items (and, stored before 009, no parts).
      const output =
        row.output_items === null
          ? outputAsInput((JSON.parse(row.response!) as ResponseObject).output)
          : await this.whole(row.id, 'output_items', row.output_items, turn).then((json) => (json === undefined ? undefined : (JSON.parse(json) as ResponseInputItem[])));
      if (input === undefined || output === undefined) {
        // Deleted or purged while read: the chain ends there, as for a link already gone.
        items.length = 0;
        continue;
      }
      for (const item of (await parseStoredJsonInTurns(input, turn)) as ResponseInputItem[]) items.push(item);
      for (const item of output) items.push(item);
      if (turn()) await yieldToEventLoop();
    }
    return { items, chars };
  }

  /** Characters of a chain's stored items, counted in the database: for chains of rows stored before 008. */
  private async measure(keyId: string, id: string): Promise<number> {
    const result = await sql<{ chars: number | string | null }>`
      with recursive ${chain(keyId, id)}
      select
        (select sum(length(r.input_items) + length(coalesce(r.output_items, r.response))) from chain join responses r on r.id = chain.id)
        + (select coalesce(sum(length(p.text)), 0) from chain join response_parts p on p.response_id = chain.id where p.field <> 'response' and p.field not like 'response#%')
        as chars`.execute(this.db);
    return Number(result.rows[0]?.chars ?? 0);
  }

  /**
   * Removes responses created before `cutoff` (ms since the epoch), PURGE_RESPONSES_BATCH at a time with a turn
   * of the event loop between batches (as the delivery purge); returns how many. A background response still
   * running is kept, its parts with it, whatever its age: its runner (or whoever ends it once nobody runs it) has its
   * end to store and its audit to record, perhaps stored with it already (`settle` with an audit), which would go
   * with the row. It is purged once its run ended.
   */
  async purgeOlderThan(cutoff: number): Promise<number> {
    const before = Math.floor(cutoff / 1000);
    const running = this.db.selectFrom('responses').select('id').where('background_lease_until', 'is not', null);
    let removed = 0;
    for (;;) {
      const batch = this.db.selectFrom('responses').select('id').where('created_at', '<', before).where('background_lease_until', 'is', null).limit(PURGE_RESPONSES_BATCH);
      const result = await this.db.deleteFrom('responses').where('id', 'in', batch).executeTakeFirst();
      const n = Number(result.numDeletedRows);
      removed += n;
      if (n < PURGE_RESPONSES_BATCH) break;
      await yieldToEventLoop();
    }
    for (;;) {
      const batch = this.db
        .selectFrom('response_items')
        .select(['key_id', 'id'])
        .where('created_at', '<', before)
        .where('response_id', 'not in', running)
        .limit(PURGE_RESPONSES_BATCH);
      const result = await this.db
        .deleteFrom('response_items')
        .where((eb) => eb(eb.refTuple('key_id', 'id'), 'in', batch.$asTuple('key_id', 'id')))
        .executeTakeFirst();
      if (Number(result.numDeletedRows) < PURGE_RESPONSES_BATCH) break;
      await yieldToEventLoop();
    }
    // A part has its response's created_at: these are the purged responses' parts, and any whose response was
    // never written (the process stopped between the two). A read under way finds its parts gone (`whole`).
    // Parts are up to a MiB each: fewer a batch.
    for (;;) {
      const batch = this.db
        .selectFrom('response_parts')
        .select(['response_id', 'field', 'seq'])
        .where('created_at', '<', before)
        .where('response_id', 'not in', running)
        .limit(PURGE_PARTS_BATCH);
      const result = await this.db
        .deleteFrom('response_parts')
        .where((eb) => eb(eb.refTuple('response_id', 'field', 'seq'), 'in', batch.$asTuple('response_id', 'field', 'seq')))
        .executeTakeFirst();
      if (Number(result.numDeletedRows) < PURGE_PARTS_BATCH) break;
      await yieldToEventLoop();
    }
    // A background stream's events go with its response, as its parts do (those of one still running are kept).
    for (;;) {
      const batch = this.db
        .selectFrom('response_events')
        .select(['response_id', 'seq'])
        .where('created_at', '<', before)
        .where('response_id', 'not in', running)
        .limit(PURGE_RESPONSES_BATCH);
      const result = await this.db
        .deleteFrom('response_events')
        .where((eb) => eb(eb.refTuple('response_id', 'seq'), 'in', batch.$asTuple('response_id', 'seq')))
        .executeTakeFirst();
      if (Number(result.numDeletedRows) < PURGE_RESPONSES_BATCH) break;
      await yieldToEventLoop();
    }
    return removed;
  }
}

/** A row's `background_audit` read: one corrupt value must not keep every run found after it from being ended. */
function storedAudit(stored: string | null | undefined): Pick<Orphan, 'audit' | 'auditUnreadable'> {
  if (!stored) return { audit: undefined };
  try {
    return { audit: JSON.parse(stored) as BackgroundAudit };
  } catch {
    return { audit: undefined, auditUnreadable: true };
  }
}
