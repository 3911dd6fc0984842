#!/usr/bin/env node
// Soak of the production topology: the built server with SVC_PROCESSES=2 on Postgres and Redis, under mixed traffic
// while its surroundings fail, then a ledger of every request against every delivery the receiver got.
//
//   node bench/soak-topology.mjs [--minutes 12 (≤ 15)] [--concurrency 16 (≤ 50)] [--restart-redis] [--out FILE]
//   env: SOAK_PG (default postgres://postgres@127.0.0.1:5432), SOAK_REDIS (default redis://127.0.0.1:6379)
//
// It creates a database of its own (soak_topology_<pid>, dropped at the end) and uses the Redis given. Traffic: C
// loops of paced streams (20 tokens at 10/s), non-streamed answers, Responses API with store (and a read back),
// streams the client aborts mid-way, bad requests (400, audited), upstream 500s (502, audited), unknown keys (401,
// not audited). Beside them: keys created and revoked (`svc-server keys create|revoke`) and webhook URLs and
// signing secrets changed (`keys update`) every 20 s. Faults, spread over the run: the receiver down (connection
// refused) or answering 500 for 20 s, four times; one server process SIGKILLed, twice (the primary replaces it);
// Postgres connections of svc killed (pg_terminate_backend), three times; with --restart-redis, Redis shut down
// (`redis-cli shutdown nosave`) and started again 10 s later, twice — it is always running again at the end.
// Every 15 s: each process's RSS, heap after a full GC, open handles by type and descriptors (bench/lib/soak-probe.mjs
// inside svc), Postgres connections (pg_stat_activity), Redis connections per process (ss), the outbox by status
// and /metrics. After the traffic: waits (at most 3 minutes) for the outbox to drain, samples once more idle, then
// checks that every request answered with a status that is audited has exactly one delivery id at the receiver,
// each id carrying one request only.
import { createServer } from 'node:http';
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, readdirSync, mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, spawnPinned, waitHttp, stopAll, killAllSync } from './lib/procs.mjs';
import { REPO, SVC_BIN, exitUnlessSvcBuilt } from './lib/svc.mjs';

const { values: opts } = parseArgs({
  options: {
    minutes: { type: 'string', default: '12' },
    concurrency: { type: 'string', default: '16' },
    'restart-redis': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});
const minutes = Math.min(15, Number(opts.minutes));
const concurrency = Math.min(50, Number(opts.concurrency));
if (!(minutes > 0) || !Number.isInteger(concurrency) || concurrency < 1) {
  process.stderr.write('usage: node bench/soak-topology.mjs [--minutes M (≤ 15)] [--concurrency C (≤ 50)] [--restart-redis] [--out FILE]\n');
  process.exit(2);
}
exitUnlessSvcBuilt();
const log = (msg) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
const run = promisify(execFile);
const require = createRequire(SVC_BIN);
const pg = require('pg');
const PG = process.env.SOAK_PG ?? 'postgres://postgres@127.0.0.1:5432';
const REDIS = process.env.SOAK_REDIS ?? 'redis://127.0.0.1:6379';
const redisPort = new URL(REDIS).port || '6379';
const dbName = `soak_topology_${process.pid}`;

const adminDb = new pg.Client({ connectionString: `${PG}/postgres` });
await adminDb.connect();
await adminDb.query(`create database ${dbName}`);
const db = new pg.Client({ connectionString: `${PG}/${dbName}` });
let redisDown = false;
const startRedis = () => execFileSync('redis-server', ['--daemonize', 'yes', '--bind', '127.0.0.1', '--port', redisPort, '--save', '']);
const cleanup = async () => {
  if (redisDown) startRedis();
  await db.end().catch(() => {});
  await adminDb.query(`drop database if exists ${dbName} with (force)`).catch((err) => log(`drop database: ${err.message}`));
  await adminDb.end().catch(() => {});
};
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAllSync();
    void cleanup().finally(() => process.exit(130));
  });
}
process.on('uncaughtException', (err) => {
  process.stderr.write(`${err.stack}\n`);
  killAllSync();
  void cleanup().finally(() => process.exit(2));
});

// --- the upstream: paced streams ------------------------------------------------------------------------------
const usage = { prompt_tokens: 20, completion_tokens: 20, total_tokens: 40 };
const frame = (model, choices, extra = {}) => `data: ${JSON.stringify({ id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1, model, choices, ...extra })}\n\n`;
const upstream = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const said = JSON.stringify(body.messages);
    if (said.includes('ERR500')) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom","type":"server_error"}}');
    const words = Array.from({ length: 20 }, (_, i) => `${i ? ' ' : ''}w${i}`);
    if (!body.stream) {
      await sleep(300);
      const completion = { id: 'chatcmpl-up', object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: words.join('') }, finish_reason: 'stop' }], usage };
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const [i, w] of words.entries()) {
      if (res.destroyed) return;
      res.write(frame(body.model, [{ index: 0, delta: i === 0 ? { role: 'assistant', content: w } : { content: w }, finish_reason: null }]));
      await sleep(100);
    }
    res.end(frame(body.model, [{ index: 0, delta: {}, finish_reason: 'stop' }]) + frame(body.model, [], { usage }) + 'data: [DONE]\n\n');
  });
});
// --- the receiver: up, down (refused) or answering 500 ---------------------------------------------------------
const deliveriesById = new Map(); // webhook-id → { requestIds: Set, attempts, ok }
const idsByRequest = new Map(); // request_id → Set of webhook-ids answered 200
let receiverMode = 'up';
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const id = req.headers['webhook-id'];
    const payload = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const entry = deliveriesById.get(id) ?? { requestIds: new Set(), attempts: 0, ok: 0 };
    deliveriesById.set(id, entry);
    entry.requestIds.add(payload.request_id);
    entry.attempts += 1;
    if (receiverMode === '500' || (receiverMode === 'up' && Math.random() < 0.05)) return void res.writeHead(500).end('flaky');
    entry.ok += 1;
    if (!payload.test) {
      const ids = idsByRequest.get(payload.request_id) ?? new Set();
      ids.add(id);
      idsByRequest.set(payload.request_id, ids);
    }
    res.writeHead(200).end('ok');
  });
});
const listen = (server, port = 0) => new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server.address().port)));
const upstreamPort = await listen(upstream);
const receiverPort = await listen(receiver);
async function receiverDown(seconds, mode) {
  log(`receiver ${mode} for ${seconds} s`);
  if (mode === 'down') {
    await new Promise((resolve) => {
      receiver.close(resolve);
      receiver.closeAllConnections();
    });
  } else receiverMode = '500';
  await sleep(seconds * 1000);
  if (mode === 'down') await listen(receiver, receiverPort);
  receiverMode = 'up';
  log('receiver up');
}

// --- svc ------------------------------------------------------------------------------------------------------
const dataDir = mkdtempSync(join(tmpdir(), 'svc-soak-topology-'));
const probeFile = opts.out ? (opts.out.includes('/') ? opts.out : join(REPO, 'bench/results', opts.out)) : join(dataDir, 'probe.jsonl');
writeFileSync(probeFile, '');
const port = await freePort();
const env = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  NODE_ENV: 'production',
  SVC_HOST: '127.0.0.1',
  SVC_PORT: String(port),
  SVC_PROCESSES: '2',
  SVC_DATABASE_URL: `${PG}/${dbName}`,
  SVC_REDIS_URL: REDIS,
  SVC_SECRET_KEY: randomBytes(32).toString('base64'),
  SVC_UPSTREAM_BASE_URL: `http://127.0.0.1:${upstreamPort}/v1`,
  SVC_UPSTREAM_API_KEY: 'sk-soak',
  SVC_WEBHOOK_TIMEOUT_MS: '2000',
  SVC_WEBHOOK_RETRY_SCHEDULE: '1s,2s,4s,8s,10s,10s,10s,10s,10s,10s,10s,10s,10s,10s',
  SVC_RATE_LIMIT_RPM: '1000000',
  SVC_LOG_LEVEL: 'warn',
  SOAK_PROBE_FILE: probeFile,
  SOAK_PROBE_MS: '15000',
};
const admin = async (...args) => (await run(process.execPath, [SVC_BIN, ...args], { env, cwd: dataDir })).stdout;
await admin('migrate');
await admin('users', 'create', '--email', 'soak@example.com', '--password', 'soak-password-1234');
const hookUrl = (path) => `http://127.0.0.1:${receiverPort}/${path}`;
const newKey = async (i) => {
  const made = JSON.parse(
    await admin('keys', 'create', '--email', 'soak@example.com', '--name', `soak-${i}`, '--webhook-url', hookUrl(`k${i}/a`), '--signing-secret', `whsec_${randomBytes(24).toString('base64url')}`, '--json'),
  );
  return { id: made.id, key: made.key, i };
};
let keySeq = 0;
const keys = [];
for (let i = 0; i < 6; i++) keys.push(await newKey(keySeq++));
const svc = spawnPinned('0-1', process.execPath, ['--expose-gc', '--import', join(REPO, 'bench/lib/soak-probe.mjs'), SVC_BIN, 'start'], { env, cwd: dataDir, logFile: join(dataDir, 'server.log') });
const url = `http://127.0.0.1:${port}`;
await waitHttp(`${url}/readyz`, { proc: svc, timeoutMs: 60_000 });
const workers = () => {
  try {
    return readFileSync(`/proc/${svc.pid}/task/${svc.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
while (workers().length < 2) await sleep(200);
log(`svc ${url} primary ${svc.pid} workers ${workers().join(',')}, database ${dbName}, log ${join(dataDir, 'server.log')}, samples ${probeFile}`);

// --- clients --------------------------------------------------------------------------------------------------
const ledger = []; // { kind, requestId, status, complete, at }
const counts = {};
const count = (what) => (counts[what] = (counts[what] ?? 0) + 1);
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];
async function call(kind, path, key, body, { abortMidway = false } = {}) {
  const controller = new AbortController();
  const entry = { kind, requestId: undefined, status: undefined, complete: false, at: Date.now() };
  ledger.push(entry);
  try {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      // A connection the primary accepted for a worker that was killed then is never answered (see bench/README.md).
      signal: AbortSignal.any([controller.signal, AbortSignal.timeout(60_000)]),
    });
    entry.requestId = res.headers.get('x-request-id') ?? undefined;
    entry.status = res.status;
    if (abortMidway && res.body) {
      const reader = res.body.getReader();
      await reader.read();
      await sleep(300);
      controller.abort();
      entry.aborted = true;
      entry.end = Date.now();
      count(`${kind} ${res.status}`);
      return;
    }
    const text = await res.text();
    entry.end = Date.now();
    entry.complete = true;
    if (res.status === 200 && body.stream && !text.includes('[DONE]') && !text.includes('response.completed')) entry.complete = false;
    count(`${kind} ${res.status}`);
    return text;
  } catch (err) {
    entry.end = Date.now();
    count(`${kind} ${err.name === 'AbortError' ? 'aborted' : err.name === 'TimeoutError' ? 'no answer in 60 s' : (err.cause?.code ?? err.message)}`);
  }
}
const messages = [{ role: 'system', content: 'The library opens at 9 am.' }, { role: 'user', content: 'When does it open?' }];
const kinds = [
  [4, 'stream', (k) => call('stream', '/v1/chat/completions', k, { model: 'svc01', messages, stream: true, stream_options: { include_usage: true } })],
  [3, 'json', (k) => call('json', '/v1/chat/completions', k, { model: 'svc01', messages })],
  [
    2,
    'responses',
    async (k) => {
      const text = await call('responses', '/v1/responses', k, { model: 'svc01', input: 'When does it open?', instructions: 'The library opens at 9 am.', store: true, stream: Math.random() < 0.5 });
      const id = text && /"id":"(resp_[^"]+)"/.exec(text)?.[1];
      if (id) {
        const got = await fetch(`${url}/v1/responses/${id}`, { headers: { authorization: `Bearer ${k}` } }).catch(() => undefined);
        count(`responses-get ${got?.status ?? 'error'}`);
        await got?.arrayBuffer();
      }
    },
  ],
  [2, 'aborted', (k) => call('aborted', '/v1/chat/completions', k, { model: 'svc01', messages, stream: true }, { abortMidway: true })],
  [1, 'bad-request', (k) => call('bad-request', '/v1/chat/completions', k, { model: 'svc01', messages: 'not a list' })],
  [1, 'upstream-500', (k) => call('upstream-500', '/v1/chat/completions', k, { model: 'svc01', messages: [{ role: 'user', content: 'ERR500' }] })],
  [1, 'unknown-key', () => call('unknown-key', '/v1/chat/completions', `sk-svc-${randomBytes(16).toString('hex')}`, { model: 'svc01', messages })],
];
const weighted = kinds.flatMap(([w, name, fn]) => Array.from({ length: w }, () => [name, fn]));
let stopping = false;
async function loop() {
  while (!stopping) {
    const [, fn] = pick(weighted);
    await fn(pick(keys).key);
    await sleep(50);
  }
}
/** Every 20 s: a webhook URL and a signing secret changed; every 60 s a new key and the oldest revoked. */
async function adminLoop() {
  let turn = 0;
  while (!stopping) {
    await sleep(20_000);
    if (stopping) break;
    turn += 1;
    try {
      const k = pick(keys);
      await admin('keys', 'update', k.id, '--webhook-url', hookUrl(`k${k.i}/${turn % 2 ? 'b' : 'a'}`));
      await admin('keys', 'update', pick(keys).id, '--signing-secret', `whsec_${randomBytes(24).toString('base64url')}`);
      count('admin url+secret');
      if (turn % 3 === 0) {
        keys.push(await newKey(keySeq++));
        const old = keys.shift();
        await sleep(3000); // clients still hold the old key for a moment, as after any rotation
        await admin('keys', 'revoke', old.id);
        count('admin key rotated');
      }
    } catch (err) {
      count(`admin ${err.message.split('\n')[0]}`);
    }
  }
}

// --- sampling -------------------------------------------------------------------------------------------------
const samples = [];
const rssKb = (pid) => Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
const fdCount = (pid) => {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return -1;
  }
};
function socketsTo(portNumber) {
  const per = {};
  try {
    const out = execFileSync('ss', ['-tnpH', 'state', 'established', 'dst', `127.0.0.1:${portNumber}`], { encoding: 'utf8' });
    for (const m of out.matchAll(/pid=(\d+)/g)) per[m[1]] = (per[m[1]] ?? 0) + 1;
  } catch {}
  return per;
}
async function sample(label) {
  const t = Math.round((Date.now() - started) / 1000);
  const pids = [svc.pid, ...workers()];
  const procs = pids.map((pid) => ({ pid, rssMb: +(rssKb(pid) / 1024).toFixed(1), fds: fdCount(pid) }));
  const pgSockets = socketsTo(5432);
  const redisSockets = socketsTo(redisPort);
  for (const p of procs) Object.assign(p, { pg: pgSockets[p.pid] ?? 0, redis: redisSockets[p.pid] ?? 0 });
  let pgActivity = -1;
  let outbox = {};
  try {
    pgActivity = Number((await db.query('select count(*) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [dbName])).rows[0].count);
    for (const row of (await db.query('select status, count(*)::int as n from webhook_deliveries group by status')).rows) outbox[row.status] = row.n;
  } catch (err) {
    outbox = { error: err.message };
  }
  let metrics = {};
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    for (const name of ['svc_chat_requests_in_flight', 'svc_redis_up', 'svc_database_up', 'nodejs_active_handles_total']) {
      metrics[name] = Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    }
    metrics.due = Number(/^svc_webhook_outbox_deliveries\{state="due"\} (\S+)$/m.exec(text)?.[1] ?? NaN);
  } catch (err) {
    metrics = { error: err.message };
  }
  const s = { t, label, procs, pgActivity, outbox, metrics, requests: ledger.length };
  samples.push(s);
  log(
    `t=${t}s${label ? ` [${label}]` : ''} req=${ledger.length} ${procs.map((p) => `${p.pid}:${p.rssMb}MB/${p.fds}fd/pg${p.pg}/r${p.redis}`).join(' ')} pg_stat=${pgActivity} outbox=${JSON.stringify(outbox)} metrics=${JSON.stringify(metrics)}`,
  );
}

// --- faults ---------------------------------------------------------------------------------------------------
const total = minutes * 60;
const at = (fraction) => fraction * total * 1000;
const faultLog = [];
async function killWorker() {
  const victim = workers()[0];
  log(`SIGKILL worker ${victim}`);
  faultLog.push({ t: Date.now() - started, fault: 'sigkill', pid: victim });
  process.kill(victim, 'SIGKILL');
}
async function terminatePg() {
  const { rows } = await db.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [dbName]);
  log(`pg_terminate_backend: ${rows.length} connections`);
  faultLog.push({ t: Date.now() - started, fault: 'pg_terminate', n: rows.length });
}
async function restartRedis() {
  log('redis shutdown nosave');
  faultLog.push({ t: Date.now() - started, fault: 'redis' });
  redisDown = true;
  await run('redis-cli', ['-p', redisPort, 'shutdown', 'nosave']).catch(() => {});
  await sleep(10_000);
  startRedis();
  redisDown = false;
  log('redis started');
}
const faults = [
  [0.08, () => receiverDown(20, 'down')],
  [0.2, killWorker],
  [0.28, () => receiverDown(20, '500')],
  [0.33, terminatePg],
  [0.4, () => (opts['restart-redis'] ? restartRedis() : undefined)],
  [0.5, () => receiverDown(20, 'down')],
  [0.58, terminatePg],
  [0.62, killWorker],
  [0.7, () => (opts['restart-redis'] ? restartRedis() : undefined)],
  [0.76, () => receiverDown(20, 'down')],
  [0.85, terminatePg],
];

await db.connect();
const started = Date.now();
await sample('start');
const sampler = setInterval(() => void sample(), 15_000);
const faultRuns = faults.map(([f, fn]) => sleep(at(f)).then(() => (stopping ? undefined : fn())).catch((err) => log(`fault: ${err.message}`)));
const loops = [...Array.from({ length: concurrency }, loop), adminLoop()];
await sleep(total * 1000);
stopping = true;
await Promise.all([...loops, ...faultRuns]);
await sample('traffic stopped');
log('waiting for the outbox to drain (at most 3 minutes)');
const drainDeadline = Date.now() + 180_000;
while (Date.now() < drainDeadline) {
  const { rows } = await db.query("select count(*)::int as n from webhook_deliveries where status = 'pending'");
  if (rows[0].n === 0) break;
  await sleep(2000);
}
await sleep(20_000);
clearInterval(sampler);
await sample('idle');
const { rows: outboxRows } = await db.query('select request_id, id as delivery_id, status, attempts from webhook_deliveries');

// --- the ledger -----------------------------------------------------------------------------------------------
const outboxByRequest = new Map();
for (const row of outboxRows) outboxByRequest.set(row.request_id, [...(outboxByRequest.get(row.request_id) ?? []), row]);
const audited = (e) => e.requestId && e.status !== undefined && e.status !== 401 && e.status !== 429 && e.status !== 503;
const problems = { lost: [], lostPartial: [], twoIds: [], notDelivered: [], idForTwoRequests: [] };
let expected = 0;
for (const e of ledger) {
  if (!audited(e)) continue;
  const ids = idsByRequest.get(e.requestId);
  const rows = outboxByRequest.get(e.requestId) ?? [];
  if (rows.length > 1) problems.twoIds.push({ ...e, rows });
  // A client that left within a second of a process's SIGKILL may have left a process that died before recording.
  const killedUnder = faultLog.some((f) => f.fault === 'sigkill' && e.at <= started + f.t + 1000 && (e.end ?? Infinity) >= started + f.t - 1000);
  if (e.complete || (e.aborted && !killedUnder)) {
    expected += 1;
    if (!ids) (rows.length ? problems.notDelivered : problems.lost).push({ ...e, rows });
  } else if (!ids) problems.lostPartial.push({ ...e, rows }); // cut by a fault: the design does not promise it
  if (ids && ids.size > 1) problems.twoIds.push({ ...e, ids: [...ids] });
}
for (const [id, entry] of deliveriesById) if (entry.requestIds.size > 1) problems.idForTwoRequests.push({ id, requestIds: [...entry.requestIds] });
const attempts = [...deliveriesById.values()].reduce((a, e) => a + e.attempts, 0);
const dupOk = [...deliveriesById.values()].filter((e) => e.ok > 1).length;

await stopAll();
receiver.closeAllConnections();
upstream.closeAllConnections();
await Promise.all([receiver, upstream].map((s) => new Promise((r) => s.close(r))));
const probes = readFileSync(probeFile, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
await cleanup();

const out = { counts, faults: faultLog, samples, expected, attempts, deliveredTwiceSameId: dupOk, problems: Object.fromEntries(Object.entries(problems).map(([k, v]) => [k, v.length])) };
writeFileSync(join(dataDir, 'summary.json'), JSON.stringify({ ...out, problemDetails: problems, probes }, null, 1));
process.stdout.write(`requests: ${JSON.stringify(counts)}\nfaults: ${JSON.stringify(faultLog)}\n`);
process.stdout.write(`\nper process (probe inside svc: heap after a full GC, handles):\n`);
for (const p of probes) {
  const handles = Object.entries(p.resources).map(([k, v]) => `${k}=${v}`).join(' ');
  process.stdout.write(`${Math.round((p.t - started) / 1000)}s pid ${p.pid ?? '?'} rss ${(p.rss / 1048576).toFixed(1)} heap ${(p.heapUsed / 1048576).toFixed(1)} MB fds ${p.fds} ${handles}\n`);
}
process.stdout.write(
  `\naudited requests answered: ${expected}; receiver attempts ${attempts}; delivery ids acknowledged twice (at-least-once, same id): ${dupOk}\n` +
    `lost (answered, never delivered): ${problems.lost.length}; recorded but not delivered: ${problems.notDelivered.length}; ` +
    `cut by a fault and not delivered: ${problems.lostPartial.length}; requests with two delivery ids: ${problems.twoIds.length}; ids for two requests: ${problems.idForTwoRequests.length}\n` +
    `details: ${join(dataDir, 'summary.json')}\n`,
);
process.exit(problems.lost.length + problems.notDelivered.length + problems.twoIds.length + problems.idForTwoRequests.length > 0 ? 1 : 0);
