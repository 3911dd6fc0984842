import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createTestPostgres } from './support/databases.js';
import { adminCommand, adminCommandAsync, serverEnv } from './support/processes.js';

// A rolling upgrade on Postgres: the release being rolled out adds an index to the outbox while the instances of
// the release before it still serve and record an audit for every request.

const SECRET_KEY = Buffer.alloc(32, 7).toString('base64');
const pgDb = await createTestPostgres('upgrades-postgres-indexes');
const clients: pg.Client[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.end().catch(() => {});
});
afterAll(() => pgDb?.drop());

async function connect(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: pgDb!.url });
  await client.connect();
  clients.push(client);
  return client;
}

/** Polls `query` on `client` until its first row's `n` is at least 1 (at most 2 min). */
async function waitUntil(client: pg.Client, query: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    const { rows } = await client.query<{ n: number }>(query);
    if (Number(rows[0]?.n) > 0) return;
    await delay(100);
  }
  throw new Error(`never true: ${query}`);
}

/** The schema of the release before 016: its index and its row gone (migrations only add). */
async function before016(client: pg.Client): Promise<void> {
  await client.query('drop index if exists deliveries_key_request_idx');
  await client.query("delete from kysely_migration where name = '016_deliveries_key_request'");
}

const env = () => serverEnv({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: SECRET_KEY });
// What an instance's audit takes on the outbox: a row-exclusive lock (no row is needed to take it).
const RECORD_AUDIT = 'insert into webhook_deliveries select * from webhook_deliveries where false';
const INDEX_VALID = "select count(*) as n from pg_index where indexrelid = to_regclass('deliveries_key_request_idx') and indisvalid";

/**
 * The schema before 016 with an old instance's audit in flight (its transaction open), and `svc-server migrate`
 * started: resolves once the index build waits for that audit (on a large outbox the build itself takes minutes).
 */
async function migrateBehindAnAudit(): Promise<{ observer: pg.Client; inFlight: pg.Client; migrating: Promise<string> }> {
  adminCommand(['migrate'], env());
  const observer = await connect();
  await before016(observer);
  const inFlight = await connect();
  await inFlight.query('begin');
  await inFlight.query(RECORD_AUDIT);
  const migrating = adminCommandAsync(['migrate'], env());
  migrating.catch(() => {});
  await waitUntil(observer, "select count(*) as n from pg_stat_activity where query ilike 'create index%' and wait_event_type = 'Lock'");
  return { observer, inFlight, migrating };
}

// Each test runs the built binary two to four times (seconds each on a loaded host).
describe.skipIf(!pgDb)('Postgres: an upgrade that adds an outbox index', { timeout: 180_000 }, () => {
  it('lets the instances still serving record audits while the index is built', async () => {
    const { observer, inFlight, migrating } = await migrateBehindAnAudit();
    // The next audit. A plain CREATE INDEX queued its share lock ahead of it, so it waited for the whole build
    // (here for ever, behind the audit in flight) and failed after lock_timeout: 55P03 on every instance.
    const next = await connect();
    await next.query("set lock_timeout = '3s'");
    await expect(next.query(RECORD_AUDIT)).resolves.toMatchObject({ command: 'INSERT' });
    await inFlight.query('commit');
    await migrating;
    await waitUntil(observer, INDEX_VALID);
  });

  it('two new instances starting at once both start', async () => {
    // The first new instance's build waits for an old instance's audit, and the second starts meanwhile.
    const { observer, inFlight, migrating: first } = await migrateBehindAnAudit();
    const second = adminCommandAsync(['migrate'], env());
    second.catch(() => {});
    // The second instance waits for the first's migration lock.
    await waitUntil(
      observer,
      "select count(*) as n from pg_stat_activity where query ilike '%advisory_lock%' and query not ilike '%pg_stat_activity%' and pid <> pg_backend_pid()",
    );
    // Writes go on meanwhile (other instances' audits): transaction ids move past the waiting instance's snapshot.
    await observer.query('select txid_current()');
    await inFlight.query('commit');
    // Was "deadlock detected" for one of them: waiting in pg_advisory_lock kept a snapshot, older than the build's,
    // that the build waits to see gone before it ends.
    await expect(Promise.all([first, second])).resolves.toBeDefined();
    await waitUntil(observer, INDEX_VALID);
  });

  it('a build cut short is done again at the next start', async () => {
    adminCommand(['migrate'], env());
    const observer = await connect();
    await before016(observer);
    // What a build killed half-way leaves: the migration recorded, the index there but invalid.
    const reader = await connect();
    await reader.query('begin isolation level repeatable read');
    await reader.query('select count(*) from webhook_deliveries');
    const cut = adminCommandAsync(['migrate'], env());
    cut.catch(() => {});
    await waitUntil(observer, "select count(*) as n from pg_stat_activity where query ilike 'create index concurrently%' and wait_event_type = 'Lock'");
    await observer.query("select pg_cancel_backend(pid) from pg_stat_activity where query ilike 'create index concurrently%' and pid <> pg_backend_pid()");
    await expect(cut).rejects.toThrow(/cancel/i);
    await reader.query('commit');
    const { rows } = await observer.query<{ valid: boolean }>("select indisvalid as valid from pg_index where indexrelid = to_regclass('deliveries_key_request_idx')");
    expect(rows).toEqual([{ valid: false }]);
    adminCommand(['migrate'], env());
    await waitUntil(observer, INDEX_VALID);
  });
});
