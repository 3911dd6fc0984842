#!/usr/bin/env node
// One tenant's bulk redeliver of deliveries with prompts of megabytes (long RAG requests), and another user's chat
// completion meanwhile: on SQLite every statement runs on the event loop, so whatever the outbox reads or writes
// of those payloads, every other request waits for.
//
//   node bench/redeliver-big.mjs [--deliveries 224] [--mb 9.6] [--bin apps/server/dist/bin.js]
//
// Seeds the deliveries (status failed) straight into the database in the layout the build writes (payload in the
// row before 017_delivery_payloads, beside it after), then POSTs /v1/webhooks/deliveries/redeliver {} with the
// tenant's key and, 200 ms later, sends the other user's chat completion; then sends that user's completions
// one after another until every delivery has had its attempt (to a receiver answering 200; one that timed out is
// due again an hour on). Prints the redeliver's time, the other user's latencies (alone before, the first
// during, the worst until then), how many were delivered and how many timed out. Not part of
// `npm run bench`: it writes 2 GB to a temporary directory, removed at the end.
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { promisify } from 'node:util';
import { bodies } from './lib/fixtures.mjs';
import { startFakeUpstream, startWebhookReceiver } from './lib/helpers.mjs';
import { REPO, SVC_BIN, startSvc } from './lib/svc.mjs';

const { values: opts } = parseArgs({ options: { deliveries: { type: 'string', default: '224' }, mb: { type: 'string', default: '9.6' }, bin: { type: 'string' } } });
const N = Number(opts.deliveries);
const BYTES = Math.round(Number(opts.mb) * 1024 * 1024);
const bin = opts.bin ? resolve(opts.bin) : SVC_BIN;
const require = createRequire(join(REPO, 'package.json'));
const Database = require('better-sqlite3');

const upstream = await startFakeUpstream('0,1');
const receiver = await startWebhookReceiver('0,1');
const svc = await startSvc({ core: '0,1', upstreamUrl: upstream.base, webhookUrl: receiver.hook, bin });
const procs = [svc.proc, upstream.proc, receiver.proc];
try {
  // The other user: a key of their own, no webhook.
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, SVC_DATABASE_URL: `sqlite:${svc.dbPath}`, SVC_UPSTREAM_BASE_URL: upstream.base, SVC_UPSTREAM_API_KEY: 'sk-bench' };
  const admin = async (...args) => (await promisify(execFile)(process.execPath, [bin, ...args], { env, cwd: svc.dataDir })).stdout;
  await admin('users', 'create', '--email', 'other@example.com', '--password', 'bench-password-1234');
  const { key: otherKey } = JSON.parse(await admin('keys', 'create', '--email', 'other@example.com', '--name', 'other', '--rate-limit-rpm', '100000', '--json'));

  const db = new Database(svc.dbPath);
  db.pragma('busy_timeout = 10000');
  const key = db.prepare('select id, user_id from api_keys where webhook_url is not null').get();
  const apart = db.prepare("select count(*) as n from sqlite_master where name = 'webhook_payloads'").get().n > 0;
  const now = Date.now();
  const insert = db.prepare(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at, last_status_code, created_at, updated_at)
    values (?, ?, ?, 'llm.request.completed', ?, ?, ?, 'failed', 5, null, 500, ?, ?)`);
  const insertPayload = apart ? db.prepare('insert into webhook_payloads (delivery_id, payload) values (?, ?)') : null;
  const prompt = 'r'.repeat(BYTES);
  const seedStart = Date.now();
  for (let i = 0; i < N; i += 8) {
    db.transaction(() => {
      for (let j = i; j < Math.min(N, i + 8); j++) {
        const id = `whd_${(now - j).toString(16).padStart(12, '0')}${String(j).padStart(20, '0')}`;
        const payload = `{"event":"llm.request.completed","request_id":"chatcmpl-${j}","status_code":200,"prompt":"${prompt}"}`;
        insert.run(id, key.id, key.user_id, `chatcmpl-${j}`, receiver.hook, insertPayload ? payload.slice(0, 1024) : payload, now - j, now - j);
        insertPayload?.run(id, payload);
      }
    })();
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  // Sent or given a later attempt: an attempt that timed out is retried an hour or more on, past this run.
  const due = db.prepare("select count(*) as n from webhook_deliveries where status = 'pending' and next_attempt_at <= ?");
  process.stderr.write(`seeded ${N} deliveries of ${(BYTES / 1048576).toFixed(1)} MB (${apart ? 'payloads apart' : 'payloads in the row'}) in ${((Date.now() - seedStart) / 1000).toFixed(1)} s\n`);

  const chat = async () => {
    const started = performance.now();
    const res = await fetch(`${svc.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${otherKey}`, 'content-type': 'application/json' }, body: bodies.svcPlain(false) });
    await res.text();
    if (!res.ok) throw new Error(`chat completion: HTTP ${res.status}`);
    return (performance.now() - started) / 1000;
  };
  const alone = [await chat(), await chat(), await chat()].sort((a, b) => a - b)[1];

  const before = await receiver.received();
  const t0 = performance.now();
  const redeliver = fetch(`${svc.url}/v1/webhooks/deliveries/redeliver`, { method: 'POST', headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' }, body: '{}' }).then(async (res) => ({
    body: await res.json(),
    s: (performance.now() - t0) / 1000,
  }));
  await new Promise((r) => setTimeout(r, 200));
  const during = await chat();
  const latencies = [during];
  while ((performance.now() - t0) / 1000 < 600) {
    latencies.push(await chat());
    if (due.get(Date.now()).n === 0) break;
  }
  const done = await redeliver;
  const allDelivered = (performance.now() - t0) / 1000;
  const result = {
    build: bin,
    layout: apart ? 'apart' : 'in row',
    deliveries: N,
    mb: Number(opts.mb),
    redelivered: done.body.redelivered,
    redeliver_s: Number(done.s.toFixed(2)),
    chat_alone_s: Number(alone.toFixed(3)),
    chat_during_s: Number(during.toFixed(3)),
    chat_worst_s: Number(Math.max(...latencies).toFixed(3)),
    chats: latencies.length,
    all_sent_s: Number(allDelivered.toFixed(1)),
    received: (await receiver.received()) - before,
    delivered: db.prepare("select count(*) as n from webhook_deliveries where status = 'delivered'").get().n,
    timed_out: db.prepare("select count(*) as n from webhook_deliveries where status = 'pending'").get().n,
  };
  db.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
} catch (err) {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exitCode = 1;
} finally {
  for (const proc of procs) proc.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  rmSync(svc.dataDir, { recursive: true, force: true });
}
