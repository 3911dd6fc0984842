#!/usr/bin/env node
// Audit-webhook delivery benchmark on the embedded SQLite (issue 4):
//   1. drain: N signed deliveries waiting in the outbox when the server starts → sustained deliveries/s to a
//      local receiver, and zero loss (every delivery id received, every row `delivered`);
//   2. latency: chat completions at a fixed rate (default 200 req/s, open loop) → time from the end of each
//      response to the receipt of its delivery, p50/p99.
// The server is the built binary in its own process; the load generator and the receiver share this one.
//
//   npm run build -w @svc/server && node bench/webhooks.bench.mjs
//   BENCH_BACKLOG=20000 BENCH_RATE=200 BENCH_SECONDS=20 node bench/webhooks.bench.mjs
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';

const REPO = resolve(import.meta.dirname, '..');
const BIN = join(REPO, 'apps/server/dist/bin.js');
const require = createRequire(join(REPO, 'apps/server/package.json'));
const Database = require('better-sqlite3');

const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 10_000);
const RATE = Number(process.env.BENCH_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const SECRET = 'whsec_bench-secret-0123456789abcdef';

if (!existsSync(BIN)) {
  console.error(`${BIN} is missing: run \`npm run build -w @svc/server\` first`);
  process.exit(1);
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const round = (n, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

/** A receiver that answers 200 at once and notes when each delivery (by X-Svc-Delivery and request_id) arrived. */
async function startReceiver() {
  const byDelivery = new Map();
  const byRequest = new Map();
  let first = Infinity;
  let last = 0;
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      first = Math.min(first, at);
      last = Math.max(last, at);
      const id = req.headers['x-svc-delivery'];
      byDelivery.set(id, (byDelivery.get(id) ?? 0) + 1);
      const requestId = JSON.parse(Buffer.concat(chunks).toString('utf8')).request_id;
      if (!byRequest.has(requestId)) byRequest.set(requestId, at);
      res.writeHead(200).end('ok');
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}/hooks`,
    byDelivery,
    byRequest,
    span: () => ({ first, last }),
    reset() {
      byDelivery.clear();
      byRequest.clear();
      first = Infinity;
      last = 0;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

function cli(args, env) {
  const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`svc-server ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

function startServer(env) {
  // BENCH_CPU_PROF=<dir>: profile the server (written when it exits).
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [];
  const child = spawn(process.execPath, [...prof, BIN, 'start'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  return new Promise((resolvePromise, reject) => {
    child.stderr.on('data', (d) => {
      err += d;
      const match = /svc listening on (http:\/\/\S+)/.exec(err) ?? /"url":"(http:\/\/[^"]+)"/.exec(err);
      if (match) resolvePromise({ child, url: match[1], startedAt: performance.now() });
    });
    child.once('exit', (code) => reject(new Error(`server exited (${code}):\n${err}`)));
  });
}

async function waitUntil(fn, timeoutMs, what) {
  const deadline = performance.now() + timeoutMs;
  while (!fn()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-bench-'));
const dbPath = join(dir, 'svc.db');
const env = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_'))),
  SVC_DATABASE_URL: `sqlite:${dbPath}`,
  SVC_PORT: '0',
  SVC_LOG_LEVEL: 'warn',
  SVC_RATE_LIMIT_RPM: '10000000',
};
const receiver = await startReceiver();
let server;
try {
  cli(['users', 'create', '--email', 'bench@example.test', '--password', 'correct horse battery'], env);
  const key = JSON.parse(
    cli(['keys', 'create', '--email', 'bench@example.test', '--webhook-url', receiver.url, '--signing-secret', SECRET, '--json'], env),
  );

  // 1. Drain: the outbox already holds BACKLOG deliveries (as after an outage) when the server starts.
  const db = new Database(dbPath);
  const now = Date.now();
  const insert = db.prepare(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts,
    next_attempt_at, created_at, updated_at) values (?, ?, ?, 'llm.request.completed', ?, ?, ?, 'pending', 0, ?, ?, ?)`);
  db.transaction(() => {
    for (let i = 0; i < BACKLOG; i++) {
      const requestId = `chatcmpl-bench${i}`;
      const payload = JSON.stringify({
        event: 'llm.request.completed', request_id: requestId, timestamp: new Date(now).toISOString(), user_id: key.user_id,
        model: 'svc01', input_tokens: 42, output_tokens: 17, total_tokens: 59, latency_ms: 120, status_code: 200, streaming: false,
        prompt: 'system: The library opens at 9 am.\nuser: When does the library open?', response_text: 'It opens at 9 am.',
        grounded: true, hallucination_score: 0.02,
      });
      insert.run(`whd_${randomUUID().replaceAll('-', '')}`, key.id, key.user_id, requestId, receiver.url, payload, now, now, now);
    }
  })();
  db.close();

  server = await startServer(env);
  await waitUntil(() => receiver.byDelivery.size >= BACKLOG, 300_000, 'the backlog to drain');
  const { first, last } = receiver.span();
  const drainRate = BACKLOG / ((last - first) / 1000);
  const check = new Database(dbPath, { readonly: true });
  await waitUntil(
    () => check.prepare(`select count(*) n from webhook_deliveries where status = 'delivered'`).get().n >= BACKLOG,
    30_000,
    'every row to be marked delivered',
  );
  const duplicates = [...receiver.byDelivery.values()].filter((n) => n > 1).length;
  console.log(
    `drain: ${BACKLOG} deliveries in ${round((last - first) / 1000, 2)} s → ${Math.round(drainRate)} deliveries/s ` +
      `(time to first receipt ${Math.round(first - server.startedAt)} ms; lost 0; duplicates ${duplicates})`,
  );

  // 2. Latency at a fixed request rate: response end → receipt.
  receiver.reset();
  const agent = new Agent({ connections: 256 });
  const total = RATE * SECONDS;
  const ends = new Map();
  const chatLatencies = [];
  let errors = 0;
  const body = JSON.stringify({
    model: 'svc01',
    messages: [
      { role: 'system', content: 'The library opens at 9 am. It closes at 5 pm on weekdays and at noon on Saturdays.' },
      { role: 'user', content: 'When does the library close on Saturdays?' },
    ],
  });
  const one = async () => {
    const started = performance.now();
    try {
      const res = await request(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body,
      });
      await res.body.text();
      const ended = performance.now();
      if (res.statusCode !== 200) errors++;
      ends.set(res.headers['x-request-id'], ended);
      chatLatencies.push(ended - started);
    } catch {
      errors++;
    }
  };
  const inflight = [];
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    inflight.push(one());
  }
  await Promise.all(inflight);
  const sentFor = (performance.now() - t0) / 1000;
  await waitUntil(() => [...ends.keys()].every((id) => receiver.byRequest.has(id)), 60_000, 'every delivery of the rate phase');
  const deltas = [...ends].map(([id, end]) => receiver.byRequest.get(id) - end).sort((a, b) => a - b);
  const chat = chatLatencies.sort((a, b) => a - b);
  console.log(
    `latency @ ${RATE} req/s for ${SECONDS} s (${total} requests, achieved ${Math.round(total / sentFor)} req/s, errors ${errors}): ` +
      `response end → receipt p50 ${round(quantile(deltas, 0.5))} ms, p99 ${round(quantile(deltas, 0.99))} ms, max ${round(deltas.at(-1))} ms; ` +
      `chat response p50 ${round(quantile(chat, 0.5))} ms, p99 ${round(quantile(chat, 0.99))} ms`,
  );
  await agent.close();
  check.close();
} finally {
  if (server) {
    server.child.kill('SIGTERM');
    await new Promise((r) => server.child.once('exit', r));
  }
  await receiver.close();
  rmSync(dir, { recursive: true, force: true });
}
