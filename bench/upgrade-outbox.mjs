#!/usr/bin/env node
// A rolling upgrade on Postgres with a large outbox: an instance keeps serving (each answer records an audit
// delivery) while `svc-server migrate` of the next release adds the outbox's indexes.
//
//   node bench/upgrade-outbox.mjs [--rows 1000000] [--migrate-bin apps/server/dist/bin.js] [--clients 4]
//
// Starts svc on a new Postgres database (postgres://postgres@127.0.0.1:5432, trust auth), fills its outbox with
// `--rows` delivered rows, takes off the indexes of migrations 011–014 and 016 and their rows (the schema of a release
// before them), then sends chat completions from `--clients` clients one after another while `--migrate-bin migrate`
// runs. Prints the migration's time and the answers' latencies alone and during it (worst, p99) and how many failed.
// The serving instance is the same in every run; only the migrating build differs, so `--migrate-bin` of two builds
// compares them. Not part of `npm run bench`; the database is dropped at the end.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { REPO, SVC_BIN, startSvc } from './lib/svc.mjs';

const { values: opts } = parseArgs({
  options: { rows: { type: 'string', default: '1000000' }, 'migrate-bin': { type: 'string' }, clients: { type: 'string', default: '4' } },
});
const ROWS = Number(opts.rows);
const migrateBin = opts['migrate-bin'] ? resolve(opts['migrate-bin']) : SVC_BIN;
const pg = createRequire(join(REPO, 'apps/server/package.json'))('pg');

const ADMIN_URL = process.env.SVC_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const name = `svc_bench_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: ADMIN_URL });
await admin.connect();
await admin.query(`create database ${name}`);
const dbUrl = Object.assign(new URL(ADMIN_URL), { pathname: `/${name}` }).toString();

const upstream = await startFakeUpstream('0,1');
const receiver = await startWebhookReceiver('0,1');
const env = { SVC_DATABASE_URL: dbUrl, SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') };
const svc = await startSvc({ core: '0,1', upstreamUrl: upstream.base, webhookUrl: receiver.hook, env });
const procs = [svc.proc, upstream.proc, receiver.proc];
const db = new pg.Client({ connectionString: dbUrl });
try {
  await db.connect();
  const seedStart = Date.now();
  const { rows: [key] } = await db.query('select id, user_id from api_keys where webhook_url is not null');
  await db.query(
    `insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at, last_status_code, created_at, updated_at)
     select 'whd_seed_' || i, $1, $2, 'llm.request.completed', 'chatcmpl-seed-' || i, $3, '{"event":"llm.request.completed"}', 'delivered', 1, null, 200,
            $4::bigint - i, $4::bigint - i
     from generate_series(1, $5::int) as i`,
    [key.id, key.user_id, receiver.hook, Date.now(), ROWS],
  );
  for (const index of ['deliveries_key_status_idx', 'deliveries_retrying_idx', 'deliveries_test_sends_idx', 'deliveries_leased_idx', 'deliveries_key_request_idx']) {
    await db.query(`drop index ${index}`);
  }
  await db.query("delete from kysely_migration where name in ('011_deliveries_key_status', '012_deliveries_retrying', '013_deliveries_test_sends', '014_deliveries_leased', '016_deliveries_key_request')");
  await db.query('vacuum analyze webhook_deliveries');
  process.stderr.write(`seeded ${ROWS} outbox rows in ${((Date.now() - seedStart) / 1000).toFixed(1)} s\n`);

  const chat = async () => {
    const started = performance.now();
    const res = await fetch(`${svc.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' }, body: bodies.svcPlain(false) });
    await res.text();
    return { ok: res.ok, s: (performance.now() - started) / 1000 };
  };
  const alone = [];
  for (let i = 0; i < 20; i++) alone.push((await chat()).s);

  let migrating = true;
  const during = [];
  const clients = Array.from({ length: Number(opts.clients) }, async () => {
    while (migrating) during.push(await chat());
  });
  const t0 = performance.now();
  const migrate = await promisify(execFile)(process.execPath, [migrateBin, 'migrate'], { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env } }).then(
    (r) => ({ ok: true, out: r.stderr.trim() }),
    (err) => ({ ok: false, out: String(err.stderr ?? err).trim() }),
  );
  const migrateS = (performance.now() - t0) / 1000;
  migrating = false;
  await Promise.all(clients);
  const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
  const times = during.map((r) => r.s);
  const result = {
    migrate_bin: migrateBin,
    rows: ROWS,
    migrate_ok: migrate.ok,
    migrate_s: Number(migrateS.toFixed(2)),
    migrate_said: migrate.out.split('\n').slice(-2).join(' | '),
    chat_alone_p50_s: Number(quantile(alone, 0.5).toFixed(3)),
    chats_during: during.length,
    chats_failed: during.filter((r) => !r.ok).length,
    chat_during_p99_s: Number(quantile(times, 0.99).toFixed(3)),
    chat_during_worst_s: Number(Math.max(...times).toFixed(3)),
    indexes_valid: Number((await db.query("select count(*) as n from pg_index where indexrelid in (to_regclass('deliveries_key_status_idx'), to_regclass('deliveries_retrying_idx'), to_regclass('deliveries_test_sends_idx'), to_regclass('deliveries_leased_idx'), to_regclass('deliveries_key_request_idx')) and indisvalid")).rows[0].n),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} catch (err) {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exitCode = 1;
} finally {
  await db.end().catch(() => {});
  for (const proc of procs) proc.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1000));
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}
