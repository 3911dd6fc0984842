import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createTestPostgres } from './support/databases.js';
import { SERVER_BIN, serverEnv } from './support/processes.js';

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
        `it has migration ${unknown}, and svc-server \\S+ knows migrations up to 014_deliveries_leased\\. Run that release or a newer one, or restore the backup taken before the upgrade; this release does not change the database\\n$`,
    );

  it('SQLite: start and migrate refuse it, naming both releases, and leave it as it was', () => {
    const { file, env } = sqliteEnv();
    expect(run(['migrate'], env).code).toBe(0);
    const newer = [
      "insert into kysely_migration (name, timestamp) values ('015_from_a_newer_release', '2030-01-01T00:00:00.000Z')",
      "update svc_meta set value = 'svc-server 9.0.0, migrations up to 015_from_a_newer_release' where key = 'migrated_by'",
    ];
    sqlite(file, ...newer, 'select 1');
    const before = sqlite(file, 'select name from kysely_migration order by name');
    for (const command of [['start'], ['migrate']]) {
      // Was "corrupted migrations: previously executed migration 015_from_a_newer_release is missing".
      const r = run(command, env);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(refusal('015_from_a_newer_release'));
    }
    expect(sqlite(file, 'select name from kysely_migration order by name')).toEqual(before);
  });

  it.skipIf(!pgDb)('Postgres: start refuses it, naming both releases, and leaves it as it was', async () => {
    const env = serverEnv({ SVC_DATABASE_URL: pgDb!.url, SVC_SECRET_KEY: SECRET_KEY });
    expect(run(['migrate'], env).code).toBe(0);
    const client = new pg.Client({ connectionString: pgDb!.url });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query("insert into kysely_migration (name, timestamp) values ('015_from_a_newer_release', '2030-01-01T00:00:00.000Z')");
    await client.query("update svc_meta set value = 'svc-server 9.0.0, migrations up to 015_from_a_newer_release' where key = 'migrated_by'");
    const r = run(['start'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(refusal('015_from_a_newer_release'));
    expect((await client.query('select count(*)::int as n from kysely_migration')).rows[0].n).toBe(16);
  });
});
