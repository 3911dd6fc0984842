#!/usr/bin/env node
// The outbox's SQLite work per webhook delivery at a model's pace, on the server's own store (its migrations,
// statements and pragmas, its checkpoint thread) over a real SQLite file: each delivery's row inserted in a
// transaction of its own (requests end apart, so the outbox's per-tick batch is one row), handed to the worker
// with its lease (no claim), its attempt recorded with the next one's (the attempt log's 20 ms window gathers
// two at 100 requests/s), then the key's last status, and the worker's look for its next wake-up. An event-loop
// turn between deliveries, so the checkpoint timer runs as in the server.
//
//   node bench/outbox-pace.mjs [--base OTHER/apps/server/src] [--rounds 3] [--deliveries 20000] [--seed 200000]
//                              [--record-batch 2] [--payload-kib 9.9] [--claimed] [--src apps/server/src]
//                              [--sql-new SQL] [--sql-base SQL] [--strace]
//
// Each round runs every build in a child process of its own on a fresh database (order alternated per round),
// pinned to core 1 when `taskset` is there, so a host whose speed drifts moves both builds alike. `--seed`
// delivered rows (small payloads, over 200 keys) are written first, so that the B-trees have the depth of a
// table under retention; the measured deliveries go to one key. `--claimed`: rows are inserted unleased and
// claimed by the worker's claim instead. Per build and round: process CPU µs per delivery (every thread: the
// checkpoints too), write syscalls per delivery (`/proc/self/io` syscw: SQLite's pwrite64 to the WAL and the
// checkpoint's to the file), and the database and WAL sizes. `--sql-new` / `--sql-base`: SQL run on that build's
// database after its migrations (a schema variant against the same build without it: `--sql-new 'drop index …'`
// alone compares this build with and without). `--strace`: each child under `strace -c -f` (OUTBOX_PACE_STRACE
// replaces that command), whose summary counts the whole child, seeding included; its CPU figures then mean little.
import { spawnSync, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { setImmediate as turn } from 'node:timers/promises';
import { bundleSrc } from './lib/bundle-src.mjs';

const REPO = new URL('..', import.meta.url).pathname;
const { values: opts } = parseArgs({
  options: {
    src: { type: 'string', default: join(REPO, 'apps/server/src') },
    base: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    deliveries: { type: 'string', default: '20000' },
    seed: { type: 'string', default: '200000' },
    'record-batch': { type: 'string', default: '2' },
    'payload-kib': { type: 'string', default: '9.9' },
    claimed: { type: 'boolean', default: false },
    strace: { type: 'boolean', default: false },
    'sql-new': { type: 'string' },
    'sql-base': { type: 'string' },
    child: { type: 'string' },
  },
});

if (opts.child) {
  await child(opts.child);
} else {
  await parent();
}

/** Bundles `src`'s store (its imports of packages left to the repository's node_modules). */
function bundle(src, name) {
  return bundleSrc(src, { openStore: 'storage/store.ts', newDeliveryId: 'storage/outbox-store.ts' }, 'outbox-pace-bench', name);
}

async function parent() {
  const builds = [{ name: 'new', src: resolve(opts.src) }];
  if (opts.base || opts['sql-base'] || opts['sql-new']) builds.unshift({ name: 'base', src: resolve(opts.base ?? opts.src) });
  for (const b of builds) b.bundle = await bundle(b.src, b.name);
  const pin = spawnSync('taskset', ['-c', '1', 'true']).status === 0 ? ['taskset', '-c', '1'] : [];
  const args = ['--deliveries', opts.deliveries, '--seed', opts.seed, '--record-batch', opts['record-batch'], '--payload-kib', opts['payload-kib'], ...(opts.claimed ? ['--claimed'] : [])];
  const results = Object.fromEntries(builds.map((b) => [b.name, []]));
  try {
    for (let round = 0; round < Number(opts.rounds); round++) {
      const order = round % 2 === 0 ? builds : [...builds].reverse();
      for (const b of order) {
        const extra = opts[`sql-${b.name}`] ? ['--sql-new', opts[`sql-${b.name}`]] : [];
        const traced = opts.strace ? join(tmpdir(), `outbox-pace-strace-${process.pid}-${b.name}-${round}.txt`) : undefined;
        const cmd = [...pin, ...(traced ? [...(process.env.OUTBOX_PACE_STRACE ?? 'strace -c -f').split(' '), '-o', traced] : []), process.execPath, new URL(import.meta.url).pathname, '--child', b.bundle, ...args, ...extra];
        const out = execFileSync(cmd[0], cmd.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
        const r = JSON.parse(out);
        results[b.name].push(r);
        if (traced) {
          process.stdout.write(readFileSync(traced, 'utf8'));
          rmSync(traced, { force: true });
        }
        process.stdout.write(
          `round ${round + 1} ${b.name.padEnd(4)}: ${r.cpuUs.toFixed(1)} µs CPU per delivery, ${r.writes.toFixed(1)} write syscalls, ` +
            `${r.wallUs.toFixed(1)} µs wall; seeded in ${r.seedMs} ms; file ${r.dbMiB.toFixed(1)} MiB, WAL ${r.walMiB.toFixed(1)} MiB\n`,
        );
      }
    }
  } finally {
    for (const b of builds) rmSync(b.bundle, { force: true });
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const b of builds) {
    const rs = results[b.name];
    process.stdout.write(`${b.name}: median ${median(rs.map((r) => r.cpuUs)).toFixed(1)} µs CPU, ${median(rs.map((r) => r.writes)).toFixed(1)} writes per delivery (${b.src})\n`);
  }
  if (results.base) {
    const ratios = results.new.map((r, i) => r.cpuUs / results.base[i].cpuUs);
    process.stdout.write(`new / base CPU per delivery, per round: ${ratios.map((x) => x.toFixed(3)).join(', ')}\n`);
  }
}

function syscw() {
  return Number(/syscw: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))[1]);
}

async function child(bundlePath) {
  const { openStore, newDeliveryId } = await import(bundlePath);
  const dir = mkdtempSync(join(tmpdir(), 'svc-outbox-pace-'));
  const file = join(dir, 'data', 'svc.db');
  const store = await openStore(`sqlite:${file}`);
  try {
    if (opts['sql-new']) store.handle.sqlite.exec(opts['sql-new']);
    const now0 = Date.now();
    const user = await store.users.create({ email: 'bench@example.com', passwordHash: 'x', now: now0 });
    const keys = [];
    for (let i = 0; i < 200; i++) {
      keys.push(await store.keys.create({ userId: user.id, name: `k${i}`, prefix: `p${i}`, keyHash: `h${i}`, now: now0, webhookUrl: 'http://127.0.0.1:9/hook', signingSecretEnc: 'sealed' }));
    }
    // Delivered rows as the server leaves them, spread over the keys and the last 30 days, written in bulk.
    const seed = Number(opts.seed);
    const seedStarted = Date.now();
    const sqlite = store.handle.sqlite;
    const insert = sqlite.prepare(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts,
      next_attempt_at, lease_until, leased_by, last_status_code, last_error, created_at, updated_at, delivered_at)
      values (?, ?, ?, 'chat.completion', ?, 'http://127.0.0.1:9/hook', '{}', ?, 1, null, null, null, 200, null, ?, ?, ?)`);
    const attempt = sqlite.prepare(`insert into webhook_attempts (id, delivery_id, attempt, attempted_at, status_code, duration_ms, outcome, error, response_body, request_headers)
      values (?, ?, 1, ?, 200, 3, 'success', null, 'ok', null)`);
    const start = now0 - 30 * 86_400_000;
    sqlite.transaction(() => {
      for (let i = 0; i < seed; i++) {
        const at = start + Math.floor((i * 30 * 86_400_000) / Math.max(1, seed));
        const id = `whd_${at.toString(16).padStart(12, '0')}${i.toString(16).padStart(20, '0')}`;
        const status = i % 100 === 0 ? 'failed' : 'delivered';
        insert.run(id, keys[i % keys.length].id, user.id, `req_${i}`, status, at, at, status === 'delivered' ? at : null);
        attempt.run(`wha_${at.toString(16).padStart(12, '0')}${i.toString(16).padStart(20, '0')}`, id, at);
      }
    })();
    sqlite.pragma('wal_checkpoint(TRUNCATE)');
    const seedMs = Date.now() - seedStarted;

    const key = keys[0];
    const payload = 'x'.repeat(Math.round(Number(opts['payload-kib']) * 1024) - 20);
    const workerId = 'worker-bench';
    const recordBatch = Number(opts['record-batch']);
    const n = Number(opts.deliveries);
    const one = async (i) => {
      const now = Date.now();
      const delivery = {
        id: newDeliveryId(),
        keyId: key.id,
        userId: user.id,
        event: 'chat.completion',
        requestId: `req_bench_${i}`,
        url: key.webhook_url,
        serialise: (sequence) => `{"sequence":${sequence},"p":"${payload}"}`,
        now,
        signingSecretEnc: key.signing_secret_enc,
        ...(opts.claimed ? {} : { lease: { until: now + 60_000, by: workerId } }),
      };
      const [row] = await store.deliveries.insertSequenced([delivery]);
      if (opts.claimed) await store.deliveries.claimDue(Date.now(), 16, 60_000, workerId);
      return row.id;
    };
    const life = async (from, count) => {
      let waiting = [];
      for (let i = from; i < from + count; i++) {
        waiting.push(await one(i));
        if (waiting.length >= recordBatch) {
          const at = Date.now();
          await store.deliveries.recordAttempts(
            waiting.map((deliveryId) => ({
              deliveryId,
              result: { attemptedAt: at, statusCode: 200, durationMs: 3, outcome: 'success', error: null, responseBody: 'ok', requestHeaders: '{"content-type":"application/json"}' },
              next: { status: 'delivered' },
              leasedBy: workerId,
            })),
          );
          await store.keys.setLastDelivery(key.id, { at, outcome: 'success', statusCode: 200, error: null, test: false });
          await store.deliveries.nextDueAfter(at);
          waiting = [];
        }
        await turn();
      }
    };
    await life(0, Math.min(2000, n));
    const cpu0 = process.cpuUsage();
    const w0 = syscw();
    const t0 = process.hrtime.bigint();
    await life(n, n);
    const wallUs = Number(process.hrtime.bigint() - t0) / 1000 / n;
    const cpu = process.cpuUsage(cpu0);
    const writes = (syscw() - w0) / n;
    const size = (p) => (existsSync(p) ? statSync(p).size / 1048576 : 0);
    process.stdout.write(JSON.stringify({ cpuUs: (cpu.user + cpu.system) / n, writes, wallUs, seedMs, dbMiB: size(file), walMiB: size(`${file}-wal`) }));
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
