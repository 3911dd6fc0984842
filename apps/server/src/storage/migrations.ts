import { setTimeout as delay } from 'node:timers/promises';
import { type Kysely, type Migration, Migrator, sql } from 'kysely';
import type { Dialect } from './database.js';
import type { Database } from './schema.js';
import { LATENCY_COLUMNS } from './usage-latency.js';
import { SERVER_VERSION } from '../version.js';

/**
 * Indexes that a release adds to the outbox or to the stored responses, which by then may hold millions of rows, by
 * name. On Postgres a plain
 * CREATE INDEX in the migrations' transaction holds off every write to the table until that transaction commits:
 * during a rolling upgrade the instances still serving could not record an audit while the index was built (each
 * insert failing after lock_timeout). There they are built after that transaction, concurrently (`buildOutboxIndexes`).
 */
const OUTBOX_INDEXES = {
  deliveries_key_status_idx: 'on webhook_deliveries (key_id, status, created_at)',
  deliveries_retrying_idx: "on webhook_deliveries (key_id, status, next_attempt_at, attempts) where status = 'pending' and attempts > 0",
  deliveries_test_sends_idx: "on webhook_deliveries (key_id, lease_until) where leased_by = 'test-send'",
  deliveries_leased_idx: "on webhook_deliveries (status, lease_until) where status = 'pending' and lease_until is not null",
  deliveries_key_request_idx: 'on webhook_deliveries (key_id, request_id, created_at)',
  responses_background_idx: 'on responses (background_lease_until) where background_lease_until is not null',
} as const;

/** SQLite: builds the index in the migration (one process, which is not serving yet). Postgres: see OUTBOX_INDEXES. */
async function outboxIndex(db: Kysely<unknown>, dialect: Dialect, name: keyof typeof OUTBOX_INDEXES): Promise<void> {
  if (dialect !== 'postgres') await sql.raw(`create index ${name} ${OUTBOX_INDEXES[name]}`).execute(db);
}

/**
 * Postgres: builds each outbox index that is missing, with CREATE INDEX CONCURRENTLY (writes go on meanwhile), outside
 * any transaction. A build cut short (the process killed, a lock_timeout) leaves an invalid index, which is dropped
 * and built again here at the next start. Runs after the migrations that name them have been applied.
 */
async function buildOutboxIndexes(conn: Kysely<Database>): Promise<void> {
  for (const [name, definition] of Object.entries(OUTBOX_INDEXES)) {
    const { rows } = await sql<{ valid: boolean }>`select indisvalid as valid from pg_index where indexrelid = to_regclass(${name})`.execute(conn);
    if (rows[0]?.valid) continue;
    // The build waits for the transactions open on the outbox (the instances still serving, a report's long read)
    // and holds no one up meanwhile, so without the pool's lock_timeout, which would fail the start instead.
    await sql`set lock_timeout = 0`.execute(conn);
    try {
      if (rows[0]) await sql.raw(`drop index concurrently if exists ${name}`).execute(conn);
      await sql.raw(`create index concurrently ${name} ${definition}`).execute(conn);
    } finally {
      await sql`reset lock_timeout`.execute(conn);
    }
  }
}

/** Migrations in order; append new ones, never edit a released one (what it makes, that is: how is free). */
function migrations(dialect: Dialect): Record<string, Migration> {
  const time = dialect === 'postgres' ? 'bigint' : 'integer';
  return {
    '001_initial': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('users')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('email', 'text', (c) => c.notNull().unique())
          .addColumn('password_hash', 'text', (c) => c.notNull())
          .addColumn('created_at', time, (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('api_keys')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('key_hash', 'text', (c) => c.notNull().unique())
          .addColumn('created_at', time, (c) => c.notNull())
          .addColumn('updated_at', time, (c) => c.notNull())
          .addColumn('last_used_at', time)
          .addColumn('revoked_at', time)
          .addColumn('rate_limit_rpm', 'integer')
          .addColumn('webhook_url', 'text')
          .addColumn('signing_secret_enc', 'text')
          .addColumn('signing_secret_last4', 'text')
          .addColumn('last_delivery_at', time)
          .addColumn('last_delivery_outcome', 'text')
          .addColumn('last_delivery_status_code', 'integer')
          .addColumn('last_delivery_error', 'text')
          .execute();
        await db.schema.createIndex('api_keys_user_idx').on('api_keys').column('user_id').execute();
        await db.schema
          .createTable('webhook_deliveries')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('event', 'text', (c) => c.notNull())
          .addColumn('request_id', 'text', (c) => c.notNull())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('next_attempt_at', time)
          .addColumn('lease_until', time)
          .addColumn('leased_by', 'text')
          .addColumn('last_status_code', 'integer')
          .addColumn('last_error', 'text')
          .addColumn('created_at', time, (c) => c.notNull())
          .addColumn('updated_at', time, (c) => c.notNull())
          .addColumn('delivered_at', time)
          .execute();
        await db.schema.createIndex('deliveries_due_idx').on('webhook_deliveries').columns(['status', 'next_attempt_at']).execute();
        await db.schema.createIndex('deliveries_key_idx').on('webhook_deliveries').columns(['key_id', 'created_at']).execute();
        await db.schema.createIndex('deliveries_created_idx').on('webhook_deliveries').column('created_at').execute();
        await db.schema
          .createTable('webhook_attempts')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('delivery_id', 'text', (c) => c.notNull())
          .addColumn('attempt', 'integer', (c) => c.notNull())
          .addColumn('attempted_at', time, (c) => c.notNull())
          .addColumn('status_code', 'integer')
          .addColumn('duration_ms', 'integer', (c) => c.notNull())
          .addColumn('outcome', 'text', (c) => c.notNull())
          .addColumn('error', 'text')
          .addColumn('response_body', 'text')
          .execute();
        await db.schema.createIndex('attempts_delivery_idx').on('webhook_attempts').column('delivery_id').execute();
        await db.schema
          .createTable('usage_daily')
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('user_id', 'text', (c) => c.notNull())
          .addColumn('day', 'text', (c) => c.notNull())
          .addColumn('requests', time, (c) => c.notNull().defaultTo(0))
          .addColumn('input_tokens', time, (c) => c.notNull().defaultTo(0))
          .addColumn('output_tokens', time, (c) => c.notNull().defaultTo(0))
          .addPrimaryKeyConstraint('usage_daily_pk', ['key_id', 'day'])
          .execute();
        await db.schema.createIndex('usage_user_day_idx').on('usage_daily').columns(['user_id', 'day']).execute();
        await db.schema
          .createTable('svc_meta')
          .addColumn('key', 'text', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .execute();
      },
    },
    '002_dashboard': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('sessions')
          .addColumn('token_hash', 'text', (c) => c.primaryKey())
          .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
          .addColumn('csrf_token', 'text', (c) => c.notNull())
          .addColumn('created_at', time, (c) => c.notNull())
          .addColumn('expires_at', time, (c) => c.notNull())
          .execute();
        await db.schema.createIndex('sessions_user_idx').on('sessions').column('user_id').execute();
        await db.schema.createIndex('sessions_expires_idx').on('sessions').column('expires_at').execute();
      },
    },
    '003_usage_quality': {
      // Errors, a latency histogram and grounding outcomes per key and day, for the Usage view.
      async up(db: Kysely<unknown>) {
        const counters = ['errors_4xx', 'errors_5xx', 'grounding_checked', 'ungrounded', ...LATENCY_COLUMNS];
        // One column per statement: SQLite adds a single column per ALTER TABLE.
        for (const column of counters) {
          await db.schema.alterTable('usage_daily').addColumn(column, time, (c) => c.notNull().defaultTo(0)).execute();
        }
      },
    },
    '004_responses': {
      // Stored Responses API responses: read back by id and as `previous_response_id`, per key.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('responses')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('previous_response_id', 'text')
          .addColumn('created_at', time, (c) => c.notNull())
          .addColumn('input_items', 'text', (c) => c.notNull())
          .addColumn('response', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('responses_created_idx').on('responses').column('created_at').execute();
      },
    },
    '005_signing_secret_rotation': {
      // A rotated-out signing secret keeps signing beside the new one for an overlap, set per key.
      async up(db: Kysely<unknown>) {
        const columns: Array<[string, 'text' | 'integer' | typeof time]> = [
          ['previous_signing_secret_enc', 'text'],
          ['previous_signing_secret_last4', 'text'],
          ['previous_signing_secret_expires_at', time],
          ['signing_secret_overlap_seconds', 'integer'],
        ];
        for (const [column, type] of columns) await db.schema.alterTable('api_keys').addColumn(column, type).execute();
      },
    },
    '006_delivery_sequence': {
      // Each key's last audit-delivery sequence number, bumped in the transaction that inserts the delivery.
      // A table of its own: the api_keys row is written on every attempt (last delivery status).
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('delivery_sequences')
          .addColumn('key_id', 'text', (c) => c.primaryKey())
          .addColumn('last', time, (c) => c.notNull())
          .execute();
      },
    },
    '007_attempt_headers': {
      // The headers each attempt sent (signatures included, never a secret), for the delivery view.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('webhook_attempts').addColumn('request_headers', 'text').execute();
      },
    },
    '007_key_failing_since': {
      // Since when every delivery attempt of a key has failed (null while the last one succeeded): the
      // dashboard marks an endpoint that has been failing for days, as Svix does, and discards nothing.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('api_keys').addColumn('last_delivery_failing_since', time).execute();
      },
    },
    '008_response_history': {
      // A response's output as the input items a follow-up reads (so reading a conversation never parses the
      // responses, which echo megabytes of `instructions`), and the characters of the whole conversation
      // through it (so a follow-up can refuse an oversized one from one row, before reading the chain).
      // Null on rows stored before: they are read the old way.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('responses').addColumn('output_items', 'text').execute();
        await db.schema.alterTable('responses').addColumn('history_chars', time).execute();
      },
    },
    '009_response_parts': {
      // A response's JSON columns longer than a part (megabytes of echoed `instructions`, of input items) are
      // kept here a part per row, their column in `responses` left empty: on SQLite one insert of 9 MB held
      // the event loop for about 100 ms, a part of 1 MiB holds it for a few.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('response_parts')
          .addColumn('response_id', 'text', (c) => c.notNull())
          .addColumn('field', 'text', (c) => c.notNull())
          .addColumn('seq', 'integer', (c) => c.notNull())
          .addColumn('created_at', time, (c) => c.notNull())
          // Last: a 1 MiB text is an overflow chain SQLite walks to read any column after it.
          .addColumn('text', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('response_parts_pk', ['response_id', 'field', 'seq'])
          .execute();
        await db.schema.createIndex('response_parts_created_idx').on('response_parts').column('created_at').execute();
      },
    },
    '010_last_delivery_test': {
      // Whether the key's last attempt was a test send: a test that got through says nothing of the real
      // deliveries still retrying, and the dashboard says which it was.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('api_keys').addColumn('last_delivery_test', 'integer').execute();
      },
    },
    '011_deliveries_key_status': {
      // One key's deliveries in one status: the key list's `retrying` per key, a list filtered by status.
      // With only (key_id, created_at) each read every delivery of the key: 200 keys of 5,000 deliveries held
      // SQLite's event loop for 8 s on GET /api/keys.
      async up(db: Kysely<unknown>) {
        await outboxIndex(db, dialect, 'deliveries_key_status_idx');
      },
    },
    '012_deliveries_retrying': {
      // A key's retrying deliveries (pending, tried at least once): the key list's count and next attempt. The
      // (key_id, status, created_at) index would leave each pending row to be read for `attempts` and
      // `next_attempt_at`; this partial index holds only those rows and answers the count alone.
      async up(db: Kysely<unknown>) {
        await outboxIndex(db, dialect, 'deliveries_retrying_idx');
      },
    },
    '013_deliveries_test_sends': {
      // A key's test sends in flight, counted in the database so the cap holds over every process and
      // instance. Only rows leased to a test send are in it (a few at most): a key with a large backlog of
      // pending deliveries is not read row by row at each Send test.
      async up(db: Kysely<unknown>) {
        await outboxIndex(db, dialect, 'deliveries_test_sends_idx');
      },
    },
    '014_deliveries_leased': {
      // Pending deliveries under a lease (a worker sending them: at most its attempts in flight), by the lease's
      // end: the worker's look for its next wake-up (every 100 ms while it sends) and the release of leases at
      // start. Without it both read every due row: 100,000 waiting after a receiver's outage held SQLite's
      // event loop 60–200 ms a look.
      async up(db: Kysely<unknown>) {
        // `status` leads, though the predicate fixes it: SQLite's planner otherwise preferred the equality on status
        // of the (status, next_attempt_at) index to a range of this one, and read every pending row again.
        await outboxIndex(db, dialect, 'deliveries_leased_idx');
      },
    },
    '015_response_items': {
      // Which stored response holds each output item, by the item's id: a request's `item_reference` input items
      // (the AI SDK sends an earlier turn's message and reasoning so) are read back from there.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('response_items')
          .addColumn('key_id', 'text', (c) => c.notNull())
          .addColumn('id', 'text', (c) => c.notNull())
          .addColumn('response_id', 'text', (c) => c.notNull())
          .addColumn('created_at', time, (c) => c.notNull())
          .addPrimaryKeyConstraint('response_items_pk', ['key_id', 'id'])
          .execute();
        await db.schema.createIndex('response_items_response_idx').on('response_items').column('response_id').execute();
        await db.schema.createIndex('response_items_created_idx').on('response_items').column('created_at').execute();
      },
    },
    '016_deliveries_key_request': {
      // A key's deliveries of one request: the deliveries list's request_id search (a receiver engineer holding the
      // x-request-id of a call), newest first. Without it the search read every delivery of the key.
      async up(db: Kysely<unknown>) {
        await outboxIndex(db, dialect, 'deliveries_key_request_idx');
      },
    },
    '017_delivery_payloads': {
      // A delivery's payload longer than its head (a RAG prompt of megabytes) is kept here whole, written once; its
      // row keeps the head a page of the list reads. In the row, SQLite walked the payload's overflow pages to read
      // or write any column after it: each attempt, lease, redeliver and cancel rewrote the megabytes on the event
      // loop (a bulk redeliver of 224 deliveries of 9.6 MB held it 19.6 s). Rows stored before keep their payload
      // in the row and are read from there: nothing is copied at upgrade.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('webhook_payloads')
          .addColumn('delivery_id', 'text', (c) => c.primaryKey())
          .addColumn('payload', 'text', (c) => c.notNull())
          .execute();
      },
    },
    '018_background_responses': {
      // A `background: true` response runs in the server after its POST was answered; its row is written at once
      // and says, until it reaches its final status, which process runs it (`background_owner`, that process's
      // webhook worker id), until when that process vouches for it (`background_lease_until`, pushed forward while it
      // runs: another instance ends one whose lease lapsed as `failed`), and whether a cancel was asked from any
      // instance (`cancel_requested_at`, which the owner polls). Null on every other row. The index holds only the
      // rows still running (a handful), for the owner's poll and the look for lapsed leases.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('responses').addColumn('background_owner', 'text').execute();
        await db.schema.alterTable('responses').addColumn('background_lease_until', time).execute();
        await db.schema.alterTable('responses').addColumn('cancel_requested_at', time).execute();
        await outboxIndex(db, dialect, 'responses_background_idx');
      },
    },
    '019_background_audit': {
      // What the audit of a background response needs beside its stored state (JSON: the POST's request id, when it
      // arrived in ms, whether it streamed): whoever ends it (its owner, or the instance, restart or primary that ends
      // it `failed` once nobody runs it) records that one audit from the row. Null on every other row.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('responses').addColumn('background_audit', 'text').execute();
      },
    },
    '020_response_events': {
      // The events of a background stream (`background` and `stream`), kept as they are sent, a batch of them per row,
      // so that its client can read them again from any instance after its connection dropped (GET with `stream=true`
      // and `starting_after`). `stream_events` says whether they are kept (`kept`), or were given up past the limit
      // (`cut`); null on every other response. Rows are deleted with their response, and purged by its `created_at`.
      async up(db: Kysely<unknown>) {
        await db.schema.alterTable('responses').addColumn('stream_events', 'text').execute();
        await db.schema
          .createTable('response_events')
          .addColumn('response_id', 'text', (c) => c.notNull())
          .addColumn('seq', 'integer', (c) => c.notNull())
          .addColumn('last_seq', 'integer', (c) => c.notNull())
          .addColumn('created_at', time, (c) => c.notNull())
          // Last, as in response_parts: SQLite walks a long text's overflow pages to read a column after it.
          .addColumn('text', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('response_events_pk', ['response_id', 'seq'])
          .execute();
        await db.schema.createIndex('response_events_created_idx').on('response_events').column('created_at').execute();
      },
    },
  };
}

/** An arbitrary constant: the Postgres advisory lock that serialises migrations across instances. */
const MIGRATION_LOCK_ID = 7_415_392_001;

/** How often an instance waiting for another's migrations asks for the lock again. */
const MIGRATION_LOCK_POLL_MS = 200;

/** The svc_meta row naming the release that last migrated the database, for an older release's refusal. */
const MIGRATED_BY = 'migrated_by';

/**
 * A database migrated by a newer release than this one (a downgrade, or an old instance restarted during a
 * rolling upgrade): this release refuses to run on a schema it does not know rather than misread or damage it.
 */
export class NewerDatabaseError extends Error {
  constructor(
    readonly unknownMigrations: string[],
    migratedBy: string | undefined,
    knownUpTo: string,
  ) {
    super(
      `the database was migrated by a newer release${migratedBy ? ` (${migratedBy})` : ''}: it has migration${unknownMigrations.length > 1 ? 's' : ''} ` +
        `${unknownMigrations.join(', ')}, and svc-server ${SERVER_VERSION} knows migrations up to ${knownUpTo}. ` +
        'Run that release or a newer one, or restore the backup taken before the upgrade; this release does not change the database',
    );
    this.name = 'NewerDatabaseError';
  }
}

/** Kysely's record of applied migrations, or none when the database is new. */
async function appliedMigrations(db: Kysely<Database>, dialect: Dialect): Promise<string[]> {
  const { rows } =
    dialect === 'postgres'
      ? // to_regclass follows search_path, as Kysely's own queries do: another schema's table is not this one's.
        await sql<{ present: boolean }>`select to_regclass('kysely_migration') is not null as present`.execute(db)
      : await sql<{ present: boolean }>`select count(*) > 0 as present from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(db);
  if (!rows[0]?.present) return [];
  const applied = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
  return applied.rows.map((r) => r.name);
}

/**
 * Brings the schema up to date. On Postgres several instances may start at once: an advisory lock makes the
 * others wait until the first has migrated. A database with migrations this release does not know is refused
 * (`NewerDatabaseError`) before anything is written.
 */
export async function migrate(db: Kysely<Database>, dialect: Dialect): Promise<string[]> {
  const apply = async (target: Kysely<Database>) => {
    const known = migrations(dialect);
    const latest = Object.keys(known).sort().at(-1) ?? '';
    const unknown = (await appliedMigrations(target, dialect)).filter((name) => !(name in known)).sort();
    if (unknown.length > 0) {
      const by = await target.selectFrom('svc_meta').select('value').where('key', '=', MIGRATED_BY).executeTakeFirst();
      throw new NewerDatabaseError(unknown, by?.value, latest);
    }
    const migrator = new Migrator({
      db: target,
      provider: { getMigrations: async () => known },
      // Kysely otherwise refuses a database whose applied migrations are not the first ones by name: one made by
      // a build with 006 but not 005 (merged in that order), or one whose rows' times went back with the clock
      // (a board without a real-time clock migrating before NTP). Each migration stands alone, so the missing
      // ones are applied whatever their place.
      allowUnorderedMigrations: true,
    });
    const { error, results } = await migrator.migrateToLatest();
    if (error) throw error;
    const applied = (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    if (applied.length > 0) {
      const value = `svc-server ${SERVER_VERSION}, migrations up to ${latest}`;
      await target.insertInto('svc_meta').values({ key: MIGRATED_BY, value }).onConflict((oc) => oc.column('key').doUpdateSet({ value })).execute();
    }
    return applied;
  };
  if (dialect !== 'postgres') return apply(db);
  return db.connection().execute(async (conn) => {
    // Another instance may migrate for minutes (an index on a large outbox): wait for it by asking again, not in
    // pg_advisory_lock. A statement waiting there keeps its snapshot, and that instance's CREATE INDEX CONCURRENTLY
    // waits for every older snapshot to go: the two would deadlock and one of them fail.
    while (!(await sql<{ got: boolean }>`select pg_try_advisory_lock(${MIGRATION_LOCK_ID}) as got`.execute(conn)).rows[0]?.got) {
      await delay(MIGRATION_LOCK_POLL_MS);
    }
    try {
      const applied = await apply(conn);
      await buildOutboxIndexes(conn);
      return applied;
    } finally {
      // A connection lost mid-migration fails this too; its session's end released the lock, and the error that
      // matters is the migration's, which a throw here would replace.
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`.execute(conn).catch(() => undefined);
    }
  });
}
