import type { ChildProcess } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestPostgres } from './support/databases.js';
import { until } from './support/reliability-http.js';
import {
  FlappingReceiver,
  cli,
  freePort,
  killAll,
  leakedSecrets,
  processEnv,
  requireBuiltServer,
  runLoad,
  spawnServer,
  type SpawnedServer,
} from './support/reliability-kit.js';

/**
 * Nothing lost: the built server, as a subprocess, serves a burst of requests while the webhook receiver
 * flaps (down, 500s, hangs past the timeout) and the server is SIGKILLed and restarted twice. Every
 * request whose response reached the client has its delivery arrive, and every attempt of a delivery
 * carries the same bytes.
 */

const SECRET = `whsec_${randomBytes(12).toString('hex')}`;
const children: ChildProcess[] = [];
const receivers: FlappingReceiver[] = [];
const dirs: string[] = [];
/** Everything the servers wrote in this file, searched for secrets at the end. */
const output: string[] = [];
const secrets: Record<string, string> = { signing_secret: SECRET };

beforeAll(() => requireBuiltServer());

afterEach(async () => {
  await killAll(children);
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

afterAll(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * The burst lasts at most its 150 s deadline, and the receiver flaps until 1.5 s after it: a delivery's retries
 * must outlast that, or a row made early in a slow burst could spend them all on a receiver that is down,
 * failing or hanging (on a loaded host even an attempt to the receiver while up may time out). Quick at first
 * (most deliveries go within a second), then every second for 20 s, then every 5 s for 200 s more.
 */
const RETRY_SCHEDULE = ['100ms', '200ms', '400ms', '800ms', ...Array(20).fill('1s'), ...Array(40).fill('5s')].join(',');
/** After the burst, how long the completed requests' deliveries may stay pending: a few of the 5 s retries. */
const SETTLE_MS = 120_000;

/** The outbox rows (status, attempts) of `requestIds` that have one, read from the database the servers use. */
async function outboxRows(databaseUrl: string, requestIds: string[]): Promise<Map<string, { status: string; attempts: number }>> {
  const found = new Map<string, { status: string; attempts: number }>();
  if (requestIds.length === 0) return found;
  const query = 'select request_id, status, attempts from webhook_deliveries where request_id';
  type Row = { request_id: string; status: string; attempts: number };
  if (databaseUrl.startsWith('sqlite:')) {
    const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true });
    try {
      const statement = db.prepare<[string], Row>(`${query} = ?`);
      for (const id of requestIds) {
        const row = statement.get(id);
        if (row) found.set(id, row);
      }
    } finally {
      db.close();
    }
    return found;
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<Row>(`${query} = any($1)`, [requestIds]);
    for (const row of rows) found.set(row.request_id, row);
  } finally {
    await client.end();
  }
  return found;
}

interface Figures {
  sent: number;
  completed: number;
  interrupted: number;
  kills: number;
  attempts: number;
  retried: number;
  faults: FlappingReceiver['faults'];
  lost: number;
}

async function nothingLost(database: Record<string, string>, total: number, label: string): Promise<Figures> {
  const receiver = await FlappingReceiver.start();
  receivers.push(receiver);
  const port = await freePort();
  const env = processEnv({
    ...database,
    SVC_PORT: String(port),
    SVC_RATE_LIMIT_RPM: '10000000',
    SVC_WEBHOOK_TIMEOUT_MS: '500',
    SVC_WEBHOOK_RETRY_SCHEDULE: RETRY_SCHEDULE,
  });
  const email = `owner-${label}@example.test`;
  cli(['users', 'create', '--email', email, '--password', 'correct horse battery'], env);
  const created = JSON.parse(
    cli(['keys', 'create', '--email', email, '--webhook-url', receiver.url, '--signing-secret', SECRET, '--json'], env),
  ) as { key: string };
  secrets[`api_key_${label}`] = created.key;

  let server: SpawnedServer = await spawnServer(env, output, children);
  const url = server.url;
  // Down 400 ms, 500s 400 ms, hanging (past the 500 ms timeout) 600 ms, up 700 ms: a cycle of 2.1 s.
  receiver.flap([
    ['up', 700],
    ['down', 400],
    ['up', 300],
    ['error', 400],
    ['hang', 600],
  ]);

  // SIGKILL at a third and at two thirds of the run, restart on the same database and port at once.
  const killAt = [Math.floor(total / 3), Math.floor((2 * total) / 3)];
  let kills = 0;
  let restarting: Promise<void> = Promise.resolve();
  const load = runLoad({
    baseUrl: () => url,
    token: created.key,
    total,
    concurrency: 16,
    deadlineMs: 150_000,
    onCompleted: (count) => {
      if (kills < killAt.length && count >= killAt[kills]!) {
        kills++;
        const victim = server;
        restarting = (async () => {
          await victim.kill('SIGKILL');
          await delay(200);
          server = await spawnServer(env, output, children);
        })();
      }
    },
  });
  const result = await load;
  await restarting;
  expect(kills).toBe(2);
  expect(result.otherStatus.size, `non-200 responses: ${[...result.otherStatus]}`).toBe(0);
  // Most requests complete; the ones cut by SIGKILL (or refused while restarting) may not.
  expect(result.completed.length).toBeGreaterThan(total * 0.9);

  // Keep flapping a little after the burst, then stay up until every completed request's delivery arrived.
  await delay(1500);
  await receiver.stopFlapping('up');
  const delivered = () => new Set(receiver.arrivals.filter((a) => a.mode === 'up').map((a) => JSON.parse(a.raw.toString('utf8')).request_id as string));
  const missing = () => {
    const have = delivered();
    return result.completed.filter((id) => !have.has(id));
  };
  // Waited for until none of them is pending in the outbox any more: on a loaded host the last retries may come
  // long after the burst, and a fixed wait could not tell a late delivery from a lost one.
  const databaseUrl = database.SVC_DATABASE_URL!;
  const settled = await until(
    async () => {
      const left = missing();
      const rows = await outboxRows(databaseUrl, left);
      if (left.every((id) => rows.get(id) !== undefined && rows.get(id)!.status !== 'pending')) return rows;
      await delay(250);
      return undefined;
    },
    SETTLE_MS,
    'no pending delivery left for the completed requests',
  ).catch(() => undefined);
  const lost = missing();
  const rows = settled ?? (await outboxRows(databaseUrl, lost));
  const states = lost.slice(0, 5).map((id) => {
    const row = rows.get(id);
    return `${id}: ${row ? `${row.status} after ${row.attempts} attempts` : 'no outbox row'}`;
  });
  expect(lost, `${lost.length} deliveries lost (${states.join('; ')})`).toEqual([]);

  // One delivery id per request; every attempt of a delivery carries identical, validly signed bytes.
  const byDelivery = new Map<string, Buffer[]>();
  for (const a of receiver.arrivals) byDelivery.set(a.deliveryId, [...(byDelivery.get(a.deliveryId) ?? []), a.raw]);
  const requestOf = new Map<string, string>();
  for (const [id, bodies] of byDelivery) {
    for (const body of bodies) expect(body.equals(bodies[0]!), `delivery ${id} changed between attempts`).toBe(true);
    const requestId = JSON.parse(bodies[0]!.toString('utf8')).request_id as string;
    expect(requestOf.has(requestId), `request ${requestId} delivered under two ids`).toBe(false);
    requestOf.set(requestId, id);
  }
  for (const a of receiver.arrivals) {
    expect(a.headers['x-svc-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(a.raw).digest('hex')}`);
  }
  // Distinct delivery ids = completed requests, plus requests cut by a SIGKILL after their delivery was written.
  expect(byDelivery.size).toBeGreaterThanOrEqual(result.completed.length);
  expect(byDelivery.size).toBeLessThanOrEqual(result.completed.length + result.interrupted);
  await server.kill('SIGTERM');

  const figures: Figures = {
    sent: result.sent,
    completed: result.completed.length,
    interrupted: result.interrupted,
    kills,
    attempts: receiver.arrivals.length,
    retried: [...byDelivery.values()].filter((b) => b.length > 1).length,
    faults: receiver.faults,
    lost: lost.length,
  };
  console.info(`[reliability] nothing lost (${label}): ${JSON.stringify(figures)}`);
  return figures;
}

describe('nothing lost: receiver flapping, server SIGKILLed and restarted twice', () => {
  it('SQLite: 2,000 requests, every completed request delivered, every attempt byte-identical', { timeout: 360_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-rel-lost-'));
    dirs.push(dir);
    const figures = await nothingLost({ SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}` }, 2000, 'sqlite');
    expect(figures.lost).toBe(0);
    expect(figures.retried).toBeGreaterThan(0);
  });

  it('Postgres: the same with 1,000 requests', { timeout: 360_000 }, async (ctx) => {
    const pg = await createTestPostgres('reliability-nothing-lost');
    if (!pg) return ctx.skip();
    try {
      const secretKey = randomBytes(32).toString('base64');
      secrets.secret_key = secretKey;
      const figures = await nothingLost({ SVC_DATABASE_URL: pg.url, SVC_SECRET_KEY: secretKey }, 1000, 'postgres');
      expect(figures.lost).toBe(0);
    } finally {
      await killAll(children);
      await pg.drop();
    }
  });

  it('no API key, signing secret or secret key appears in anything the servers wrote', () => {
    const text = output.join('');
    expect(text.length).toBeGreaterThan(1000);
    expect(leakedSecrets(text, secrets)).toEqual([]);
  });
});
