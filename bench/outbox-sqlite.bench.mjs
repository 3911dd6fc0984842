#!/usr/bin/env node
// The outbox's SQLite work per webhook delivery, alone: insert the row (in batches, as the outbox does),
// record the attempt (update + attempt row, as the worker does), a PASSIVE checkpoint on a timer. Same
// table and index shapes as the server's migrations, a ~2 KB payload, WAL, synchronous=NORMAL.
//
//   node bench/outbox-sqlite.bench.mjs [--cache-kib N] [--rows N] [--batch N] [--record-batch N] [--page-size B]
//                                      [--variant base|no-created-index|payload-apart|partial-due|lean] [--sequenced row|batch]
//
// Variants: no-created-index (no index on created_at); payload-apart (the payload in a table of its own);
// partial-due (the due index holds pending rows only: `(next_attempt_at) where status = 'pending'`); lean
// (partial-due, no created_at index, attempts WITHOUT ROWID keyed by (delivery_id, attempt)). --sequenced batch
// takes the rows' per-key `sequence` numbers in their insert transaction as the server does: one
// delivery_sequences upsert per key and batch (here one key); --sequenced row one upsert per row.
//
// Prints µs per delivery (wall time; the process does nothing else) and the CPU time it took (steadier on a
// busy machine). For comparing schema and pragma options
// before changing the server; not part of `npm run bench`.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const require = createRequire(new URL('../package.json', import.meta.url));
const Database = require('better-sqlite3');
const { values: opts } = parseArgs({
  options: {
    'cache-kib': { type: 'string', default: '2048' },
    rows: { type: 'string', default: '60000' },
    batch: { type: 'string', default: '8' },
    // The worker records attempts every 20 ms: at ~2,000–5,000 deliveries/s that is 40–100 a transaction.
    'record-batch': { type: 'string', default: '48' },
    variant: { type: 'string', default: 'base' },
    'page-size': { type: 'string', default: '8192' },
    sequenced: { type: 'string' },
  },
});
const variant = opts.variant;
const dir = mkdtempSync(join(tmpdir(), 'svc-outbox-bench-'));
const db = new Database(join(dir, 'outbox.db'));
db.pragma(`page_size = ${Number(opts['page-size'])}`);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma(`cache_size = -${Number(opts['cache-kib'])}`);
db.pragma('wal_autocheckpoint = 10000');
const payloadInRow = variant !== 'payload-apart';
db.exec(`create table webhook_deliveries (id text primary key, key_id text not null, user_id text not null, event text not null,
  request_id text not null, url text not null, ${payloadInRow ? 'payload text not null,' : ''} status text not null,
  attempts integer not null default 0, next_attempt_at integer, lease_until integer, leased_by text, last_status_code integer,
  last_error text, created_at integer not null, updated_at integer not null, delivered_at integer)`);
if (!payloadInRow) db.exec('create table webhook_payloads (delivery_id text primary key, payload text not null)');
const lean = variant === 'lean';
if (lean || variant === 'partial-due') db.exec(`create index deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending'`);
else db.exec('create index deliveries_due_idx on webhook_deliveries (status, next_attempt_at)');
db.exec('create index deliveries_key_idx on webhook_deliveries (key_id, created_at)');
if (variant !== 'no-created-index' && !lean) db.exec('create index deliveries_created_idx on webhook_deliveries (created_at)');
if (lean) {
  db.exec(`create table webhook_attempts (id text not null, delivery_id text not null, attempt integer not null, attempted_at integer not null,
  status_code integer, duration_ms integer not null, outcome text not null, error text, response_body text,
  primary key (delivery_id, attempt)) without rowid`);
} else {
  db.exec(`create table webhook_attempts (id text primary key, delivery_id text not null, attempt integer not null, attempted_at integer not null,
  status_code integer, duration_ms integer not null, outcome text not null, error text, response_body text)`);
  db.exec('create index attempts_delivery_idx on webhook_attempts (delivery_id)');
}

const insert = db.prepare(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, ${payloadInRow ? 'payload, ' : ''}status,
  attempts, next_attempt_at, lease_until, leased_by, created_at, updated_at) values (?, ?, ?, ?, ?, ?, ${payloadInRow ? '?, ' : ''}'pending', 0, ?, ?, ?, ?, ?)`);
db.exec('create table delivery_sequences (key_id text primary key, last integer not null)');
const nextSequence = db.prepare(`insert into delivery_sequences (key_id, last) values (?, ?)
  on conflict (key_id) do update set last = delivery_sequences.last + excluded.last returning last`);
const insertPayload = payloadInRow ? null : db.prepare('insert into webhook_payloads (delivery_id, payload) values (?, ?)');
const record = db.prepare(`update webhook_deliveries set attempts = attempts + 1, status = ?, next_attempt_at = ?, lease_until = null,
  leased_by = null, last_status_code = ?, last_error = ?, updated_at = ?, delivered_at = coalesce(?, delivered_at) where id = ? returning attempts`);
const attempt = db.prepare(`insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code, duration_ms, outcome, error, response_body)
  values (?, ?, ?, ?, ?, ?, ?, ?, ?)`);

const payload = JSON.stringify({ event: 'chat.completion', messages: [{ role: 'system', content: 'policy text '.repeat(110) }], answer: 'answer text '.repeat(60) });
let seq = 0;
/** Time-ordered ids, as the server's (a millisecond prefix, then a counter). */
const nextId = () => `${Date.now().toString(36).padStart(9, '0')}${(seq++).toString(36).padStart(8, '0')}`;
const insertBatch = db.transaction((ids) => {
  const now = Date.now();
  if (opts.sequenced === 'batch') nextSequence.get('key_1', ids.length);
  for (const id of ids) {
    if (opts.sequenced === 'row') nextSequence.get('key_1', 1);
    const row = [id, 'key_1', 'user_1', 'chat.completion', `req_${id}`, 'http://127.0.0.1/hook'];
    if (payloadInRow) insert.run(...row, payload, now, now + 30_000, 'worker_1', now, now);
    else {
      insert.run(...row, now, now + 30_000, 'worker_1', now, now);
      insertPayload.run(id, payload);
    }
  }
});
const recordBatch = db.transaction((ids) => {
  const now = Date.now();
  for (const id of ids) {
    record.get('delivered', null, 200, null, now, now, id);
    attempt.run(`att_${id}`, id, 1, now, 200, 1, 'success', null, 'ok');
  }
});

const rows = Number(opts.rows);
const batch = Number(opts.batch);
const recordEvery = Number(opts['record-batch']);
const started = process.hrtime.bigint();
const startedCpu = process.cpuUsage();
let lastCheckpoint = Date.now();
let delivering = [];
for (let done = 0; done < rows; done += batch) {
  const ids = Array.from({ length: batch }, nextId);
  insertBatch(ids);
  if (delivering.length >= recordEvery) {
    recordBatch(delivering);
    delivering = [];
  }
  delivering.push(...ids);
  if (Date.now() - lastCheckpoint >= 1000) {
    db.pragma('wal_checkpoint(PASSIVE)');
    lastCheckpoint = Date.now();
  }
}
recordBatch(delivering);
const us = Number(process.hrtime.bigint() - started) / 1000 / rows;
const cpu = process.cpuUsage(startedCpu);
const cpuUs = (cpu.user + cpu.system) / rows;
db.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(
  `${variant}${opts.sequenced ? ` sequenced per ${opts.sequenced}` : ''}, page ${opts['page-size']} B, cache ${opts['cache-kib']} KiB, ${rows} rows inserted in batches of ${batch}, recorded in batches of ~${recordEvery}: ${us.toFixed(1)} µs per delivery (CPU ${cpuUs.toFixed(1)} µs)\n`,
);
