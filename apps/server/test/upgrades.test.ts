import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createTestPostgres } from './support/databases.js';
import { adminCommand, SERVER_BIN, serverEnv, startServerProcess } from './support/processes.js';
import { startReceiver } from './support/webhooks.js';

const SECRET_KEY = Buffer.alloc(32, 7).toString('base64');
const cleanups: Array<() => unknown> = [];
const pgDb = await createTestPostgres('upgrades');

afterAll(() => pgDb?.drop());

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function sqliteEnv() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-upgrades-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'svc.db');
  return { file, env: serverEnv({ SVC_DATABASE_URL: `sqlite:${file}` }) };
}

function run(args: string[], env: NodeJS.ProcessEnv) {
  const r = spawnSync(process.execPath, [SERVER_BIN, ...args], { env, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stderr: r.stderr };
}

/** Runs `statements` on the SQLite file and returns the rows of the last one. */
function sqlite(file: string, ...statements: string[]): unknown[] {
  const db = new Database(file);
  try {
    for (const statement of statements.slice(0, -1)) db.exec(statement);
    return db.prepare(statements.at(-1)!).all();
  } finally {
    db.close();
  }
}

describe('svc-server migrate on a database of an older release', () => {
  it('lists the migrations it applied, then says the schema is up to date', () => {
    const { file, env } = sqliteEnv();
    expect(run(['migrate'], env).code).toBe(0);
    // The schema of the release before 014: its index gone, its row gone (released migrations are never edited).
    sqlite(file, 'drop index deliveries_leased_idx', "delete from kysely_migration where name = '014_deliveries_leased'", 'select 1');
    // Was "schema is up to date" on every run: opening the store had migrated before the command looked.
    expect(run(['migrate'], env)).toEqual({ code: 0, stderr: 'applied: 014_deliveries_leased\n' });
    expect(run(['migrate'], env)).toEqual({ code: 0, stderr: 'schema is up to date\n' });
  });

  it("applies a migration that sorts before one already applied (a build that had 014 but not 013)", () => {
    const { file, env } = sqliteEnv();
    expect(run(['migrate'], env).code).toBe(0);
    sqlite(file, 'drop index deliveries_test_sends_idx', "delete from kysely_migration where name = '013_deliveries_test_sends'", 'select 1');
    // Was refused: "corrupted migrations: expected previously executed migration 014_deliveries_leased to be at index 12 …".
    expect(run(['migrate'], env)).toEqual({ code: 0, stderr: 'applied: 013_deliveries_test_sends\n' });
    expect(sqlite(file, "select name from sqlite_master where name = 'deliveries_test_sends_idx'")).toHaveLength(1);
  });
});

describe('a database migrated by a newer release (a downgrade)', () => {
  const refusal = (unknown: string) =>
    new RegExp(
      `^error: could not open the database \\S+ \\(SVC_DATABASE_URL\\): the database was migrated by a newer release \\(svc-server 9\\.0\\.0, migrations up to ${unknown}\\): ` +
        `it has migration ${unknown}, and svc-server \\S+ knows migrations up to \\d{3}_\\w+\\. Run that release or a newer one, or restore the backup taken before the upgrade; this release does not change the database\\n$`,
    );

  it('SQLite: start and migrate refuse it, naming both releases, and leave it as it was', () => {
    const { file, env } = sqliteEnv();
    expect(run(['migrate'], env).code).toBe(0);
    const newer = [
      "insert into kysely_migration (name, timestamp) values ('999_from_a_newer_release', '2030-01-01T00:00:00.000Z')",
      "update svc_meta set value = 'svc-server 9.0.0, migrations up to 999_from_a_newer_release' where key = 'migrated_by'",
    ];
    sqlite(file, ...newer, 'select 1');
    const before = sqlite(file, 'select name from kysely_migration order by name');
    for (const command of [['start'], ['migrate']]) {
      // Was "corrupted migrations: previously executed migration 999_from_a_newer_release is missing".
      const r = run(command, env);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(refusal('999_from_a_newer_release'));
    }
    expect(sqlite(file, 'select name from kysely_migration order by name')).toEqual(before);
  });

  it.skipIf(!pgDb)('Postgres: start refuses it, naming both releases, and leaves it as it was', async () => {
    const env = serverEnv({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: SECRET_KEY });
    expect(run(['migrate'], env).code).toBe(0);
    const client = new pg.Client({ connectionString: pgDb!.url });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query("insert into kysely_migration (name, timestamp) values ('999_from_a_newer_release', '2030-01-01T00:00:00.000Z')");
    await client.query("update svc_meta set value = 'svc-server 9.0.0, migrations up to 999_from_a_newer_release' where key = 'migrated_by'");
    const before = (await client.query('select name from kysely_migration order by name')).rows;
    const r = run(['start'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(refusal('999_from_a_newer_release'));
    expect((await client.query('select name from kysely_migration order by name')).rows).toEqual(before);
  });
});

/** What migrations 008–014 added, taken off again: the schema of the release before them (migrations only add). */
const BEFORE_008 = [
  'drop index deliveries_leased_idx',
  'drop index deliveries_test_sends_idx',
  'drop index deliveries_retrying_idx',
  'drop index deliveries_key_status_idx',
  'alter table api_keys drop column last_delivery_test',
  'drop table response_parts',
  'alter table responses drop column output_items',
  'alter table responses drop column history_chars',
  // Later migrations stay applied: what rows written before 008 meet is 008–014, and this list need not grow.
  "delete from kysely_migration where name >= '008' and name < '015'",
  "delete from svc_meta where key = 'migrated_by'",
];

describe('rows written before an upgrade', () => {
  // Two server starts and two admin commands: over 30 s on a loaded host.
  it('work after it: the key answers, its settings stand, a pending delivery goes out with its exact bytes and id', { timeout: 120_000 }, async () => {
    const { file, env } = sqliteEnv();
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const serverEnvWith = { ...env, SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_RETRY_SCHEDULE: '1h' };
    adminCommand(['users', 'create', '--email', 'ops@example.test', '--password', 'correct horse battery'], serverEnvWith);
    const { key } = JSON.parse(
      adminCommand(['keys', 'create', '--email', 'ops@example.test', '--webhook-url', receiver.url, '--signing-secret', 'whsec_before', '--rate-limit-rpm', '7', '--json'], serverEnvWith),
    ) as { key: string };
    const chat = (url: string) =>
      fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'before the upgrade' }] }),
      });
    receiver.queue.push({ status: 503 });
    let svc = await startServerProcess(serverEnvWith);
    try {
      expect((await chat(svc.url)).status).toBe(200);
      await receiver.waitFor((received) => received.length === 1);
    } finally {
      await svc.stop();
    }
    // The first attempt failed; the next one is an hour away. Taken back to the older schema, its payload whole in
    // its row as before 017, then made due.
    sqlite(
      file,
      ...BEFORE_008,
      'update webhook_deliveries set payload = (select payload from webhook_payloads where delivery_id = webhook_deliveries.id) where id in (select delivery_id from webhook_payloads)',
      'delete from webhook_payloads',
      "update webhook_deliveries set next_attempt_at = 0 where status = 'pending'",
      'select 1',
    );
    const [pending] = sqlite(file, 'select id, payload from webhook_deliveries') as Array<{ id: string; payload: string }>;
    svc = await startServerProcess(serverEnvWith);
    try {
      const res = await chat(svc.url);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit-requests')).toBe('7');
      const attemptsOf = (all: Array<{ headers: Record<string, unknown> }>) => all.filter((d) => d.headers['x-svc-delivery'] === pending!.id);
      const again = attemptsOf(await receiver.waitFor((all) => attemptsOf(all).length === 2))[1] as (typeof receiver.received)[number];
      expect(again.raw.toString('utf8')).toBe(pending!.payload);
      expect(again.headers['x-svc-signature']).toBe(`sha256=${createHmac('sha256', 'whsec_before').update(again.raw).digest('hex')}`);
    } finally {
      await svc.stop();
    }
    expect(sqlite(file, "select name from kysely_migration where name >= '008' and name < '015'")).toHaveLength(7);
  });
});
