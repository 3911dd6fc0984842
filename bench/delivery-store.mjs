#!/usr/bin/env node
// The webhook delivery store at scale: 1 M deliveries over 200 keys (one user), in a real SQLite file and in a
// fresh Postgres database, then the dashboard's heavy reads and writes, each timed with the longest event-loop
// stall it caused (on SQLite a statement runs on the loop: its stall is what every other request waits). No
// WAL checkpoint runs on the loop, as in the server (its checkpoints run on a thread).
//
//   node bench/delivery-store.mjs [--db sqlite|postgres|both] [--rows 1000000] [--runs 3] [--src apps/server/src]
//
// --src: the server sources to measure (another checkout's `apps/server/src` for a before/after). Seeded:
// key_000 has 20,000 failed deliveries (every 50th row) (bulk redeliver, list ?status=failed), key_001 14,000 pending ones
// that failed before (`retrying`), the rest delivered round-robin over all 200 keys with 1 % failed; usage rows
// for 200 keys × 365 days; 50,000 stored responses past retention. Postgres: SVC_TEST_POSTGRES_URL or
// postgres://postgres@127.0.0.1:5432/test, a database of its own, dropped at the end.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { bundleSrc } from './lib/bundle-src.mjs';

const REPO = new URL('..', import.meta.url).pathname;
const require = createRequire(join(REPO, 'package.json'));
const { values: opts } = parseArgs({
  options: {
    db: { type: 'string', default: 'both' },
    rows: { type: 'string', default: '1000000' },
    runs: { type: 'string', default: '3' },
    src: { type: 'string', default: join(REPO, 'apps/server/src') },
  },
});
const ROWS = Number(opts.rows);
const RUNS = Number(opts.runs);
const KEYS = 200;
const FAILED_HOT = 20_000;
const RETRYING_HOT = 14_000;
const RESPONSES = 50_000;
const T0 = Date.now() - 400 * 86_400_000;

const tmp = mkdtempSync(join(tmpdir(), 'svc-delivery-store-bench-'));
const src = resolve(opts.src);
const bundle = await bundleSrc(src, { openStore: 'storage/store.ts', usageView: 'dashboard/usage-view.ts' }, 'delivery-store-bench', 'store');
const { sql } = require('kysely');
const { openStore, usageView } = await import(bundle);

/** SQL of the key named by a number (0 → key_000); substr's negative start differs between the dialects. */
const keyOf = (x) => `'key_' || substr('00' || cast(${x} as text), length('00' || cast(${x} as text)) - 2, 3)`;

/** Runs `fn`, returning its wall time and the longest gap between 1 ms timer ticks meanwhile (ms). */
async function timed(fn) {
  let last = performance.now();
  let stall = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 1);
  await new Promise((r) => setTimeout(r, 5));
  last = performance.now();
  stall = 0;
  const start = performance.now();
  const result = await fn();
  const total = performance.now() - start;
  stall = Math.max(stall, performance.now() - last);
  clearInterval(ticker);
  return { total, stall, result };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// One seeding statement per dialect: deliveries numbered 1..ROWS by a series.
function seedDeliveriesSql(series) {
  // Spread over the table as a busy server writes them: every 50th row, not one contiguous block.
  const spread = Math.floor(ROWS / FAILED_HOT);
  const hot = `n % ${spread} = 0`;
  const retrying = `n % ${spread} = 1 and n <= ${RETRYING_HOT * spread}`;
  return `insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at,
    lease_until, leased_by, last_status_code, last_error, created_at, updated_at, delivered_at)
  select 'whd_' || n, case when ${hot} then 'key_000' when ${retrying} then 'key_001' else ${keyOf(`(n % ${KEYS})`)} end,
    'user_1', 'llm.request.completed', 'chatcmpl-' || n, 'https://example.com/hook', '{"request_id":"chatcmpl-' || n || '","usage":{"total_tokens":42}}',
    case when ${hot} then 'failed' when ${retrying} then 'pending' when n % 100 = 0 then 'failed' else 'delivered' end,
    case when ${hot} then 8 when ${retrying} then 2 else 1 end,
    case when ${retrying} then ${T0} + 1000000000 + n else null end,
    null, null, 500, case when ${hot} then 'seed' else null end, ${T0} + n * 30, ${T0} + n * 30, null
  from ${series}`;
}

/** A `from` clause of the numbers 1..n. */
const seriesOf = (dialect) => (n) =>
  dialect === 'sqlite' ? `(with recursive s(n) as (select 1 union all select n + 1 from s where n < ${n}) select n from s)` : `generate_series(1, ${n}) as s(n)`;

async function seed(store, dialect) {
  const series = seriesOf(dialect);
  const run = async (text) => {
    if (dialect === 'sqlite') store.handle.sqlite.exec(text);
    else await sql.raw(text).execute(store.handle.db);
  };
  const started = performance.now();
  await run(seedDeliveriesSql(series(ROWS)));
  const days = 365;
  await run(`insert into usage_daily (key_id, user_id, day, requests, input_tokens, output_tokens)
    select ${keyOf(`(n % ${KEYS})`)}, 'user_1', ${dialect === 'sqlite' ? `date(${Math.floor(Date.now() / 1000)} - (n / ${KEYS}) * 86400, 'unixepoch')` : `to_char(now() - ((n / ${KEYS}) * interval '1 day'), 'YYYY-MM-DD')`}, 10, 100, 50
    from ${series(KEYS * days)} where n < ${KEYS * days}`);
  await run(`insert into users (id, email, password_hash, created_at) values ('user_1', 'bench@example.com', 'x', ${T0})`);
  await run(`insert into api_keys (id, user_id, name, prefix, key_hash, created_at, updated_at)
    select ${keyOf('(n - 1)')}, 'user_1', 'k' || n, 'sk-svc-' || n, 'h' || n, ${T0}, ${T0} from ${series(KEYS)}`);
  await seedResponses(run, series);
  await run('analyze');
  console.log(`  seeded ${ROWS.toLocaleString('en')} deliveries in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

async function seedResponses(run, seriesOf) {
  await run(`insert into responses (id, key_id, previous_response_id, created_at, input_items, response)
    select 'resp_' || n, ${keyOf(`(n % ${KEYS})`)}, null, ${Math.floor(T0 / 1000)} + n, '[{"role":"user","content":"hi ' || n || '"}]', '{"id":"resp_' || n || '","output":[]}'
    from ${seriesOf(RESPONSES)}`);
}

async function measure(name, dialect, fn, reset) {
  const totals = [];
  const stalls = [];
  let result;
  for (let i = 0; i < RUNS; i++) {
    if (reset) await reset();
    const t = await timed(fn);
    totals.push(t.total);
    stalls.push(t.stall);
    result = t.result;
  }
  const shown = typeof result === 'number' ? result : Array.isArray(result?.rows) ? `${result.rows.length} rows` : result?.deliveries !== undefined ? `${result.deliveries} retrying` : Array.isArray(result) ? `${result.length} rows` : '';
  console.log(`  ${dialect.padEnd(8)} ${name.padEnd(42)} median ${median(totals).toFixed(1).padStart(8)} ms   longest stall ${median(stalls).toFixed(1).padStart(8)} ms   (${shown})`);
}

async function bench(dialect, url) {
  console.log(`${dialect}: ${url.startsWith('sqlite') ? url : url.replace(/\/\/[^@]*@/, '//')}`);
  const store = await openStore(url, { poolSize: 4 });
  // The server copies the WAL back on a thread of its own (README: Scaling); here no checkpoint runs inside a
  // measured commit either.
  store.handle.sqlite?.pragma('wal_autocheckpoint = 0');
  try {
    await seed(store, dialect);
    const d = store.deliveries;
    const raw = async (text) =>
      dialect === 'sqlite' ? store.handle.sqlite.prepare(text).run() : sql.raw(text).execute(store.handle.db);
    const resetFailed = () => raw(`update webhook_deliveries set status = 'failed', next_attempt_at = null where key_id = 'key_000' and last_error = 'seed'`);
    await measure('bulk redeliver 20,000 failed (one key)', dialect, () => d.redeliverMatching('key_000', { status: 'failed', limit: 20_000 }, Date.now()), resetFailed);
    await measure('bulk redeliver 1,000 failed (the API cap)', dialect, () => d.redeliverMatching('key_000', { status: 'failed', limit: 1_000 }, Date.now()), resetFailed);
    await resetFailed();
    await measure('countMatching failed (dry run)', dialect, () => d.countMatching('key_000', { status: 'failed', limit: 20_000 }));
    await measure('retrying of key_001 (14,000 pending)', dialect, () => d.retrying('key_001'));
    await measure('retryingOfUser (key list, 200 keys)', dialect, () => d.retryingOfUser('user_1'));
    await measure('list ?status=failed of key_005 (50)', dialect, () => d.list('key_005', { status: 'failed', limit: 50 }));
    await measure('list ?status=failed of key_000 (50)', dialect, () => d.list('key_000', { status: 'failed', limit: 50 }));
    await measure('list of key_005 (50)', dialect, () => d.list('key_005', { limit: 50 }));
    const from = new Date(Date.now() - 89 * 86_400_000).toISOString().slice(0, 10);
    await measure('usage byDay, all keys, 90 days', dialect, () => store.usage.byDay('user_1', from));
    const keys = await store.keys.list('user_1');
    const days = Array.from({ length: 90 }, (_, i) => new Date(Date.now() - (89 - i) * 86_400_000).toISOString().slice(0, 10));
    const rows = await store.usage.byDay('user_1', from);
    await measure('usageView of those rows (JS only)', dialect, async () => usageView(rows, keys, days).keys);
    await measure(`purge ${RESPONSES.toLocaleString('en')} stored responses`, dialect, () => store.responses.purgeOlderThan(Date.now()), async () => {
      await raw('delete from responses');
      await seedResponses(raw, seriesOf(dialect));
    });
  } finally {
    await store.close();
  }
}

const which = opts.db === 'both' ? ['sqlite', 'postgres'] : [opts.db];
try {
  if (which.includes('sqlite')) await bench('sqlite', `sqlite:${join(tmp, 'svc.db')}`);
  if (which.includes('postgres')) {
    const pg = require('pg');
    const admin = new pg.Client({ connectionString: process.env.SVC_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test' });
    await admin.connect();
    const name = `svc_bench_${randomBytes(4).toString('hex')}`;
    await admin.query(`create database ${name}`);
    const url = new URL(admin.connectionParameters.connectionString ?? process.env.SVC_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
    url.pathname = `/${name}`;
    try {
      await bench('postgres', url.toString());
    } finally {
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
  rmSync(bundle, { force: true });
}
