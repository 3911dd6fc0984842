import { createHmac } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { adminCommand, adminCommandAsync, SERVER_BIN, serverEnv, startServerProcess, type ServerProcess } from './support/processes.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

/**
 * `svc-server backup PATH` (the embedded SQLite database backed up while svc runs): an operator had no safe way —
 * `cp svc.db` misses the commits still in `svc.db-wal` and can copy a page a checkpoint is writing.
 */

const SECRET = 'whsec_backup-test-secret';
const dirs: string[] = [];
const running: ServerProcess[] = [];
const receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
  await Promise.all(receivers.splice(0).map((r) => r.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-backup-'));
  dirs.push(dir);
  return dir;
}

function chat(url: string, key: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hello' }] }),
  });
}

const requestIdOf = (raw: Buffer) => (JSON.parse(raw.toString('utf8')) as { request_id: string }).request_id;

describe('svc-server backup', () => {
  it('copies the database while svc serves and retries deliveries; svc started on the copy sends every pending delivery, same id, bytes and signature', async () => {
    const receiver = await startReceiver({ status: 503 });
    receivers.push(receiver);
    const data = join(tempDir(), 'data');
    const env = serverEnv({
      SVC_DATABASE_URL: `sqlite:${join(data, 'svc.db')}`,
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      // Retried every 2 s for minutes: pending all through the test.
      SVC_WEBHOOK_RETRY_SCHEDULE: Array(60).fill('2s').join(','),
    });
    adminCommand(['users', 'create', '--email', 'ops@example.com', '--password', 'correct horse battery'], env);
    const { key } = JSON.parse(
      adminCommand(['keys', 'create', '--email', 'ops@example.com', '--webhook-url', receiver.url, '--signing-secret', SECRET, '--json'], env),
    ) as { key: string };
    const svc = await startServerProcess(env);
    running.push(svc);

    const accepted: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await chat(svc.url, key);
      expect(res.status).toBe(200);
      accepted.push(res.headers.get('x-request-id')!);
    }
    // Every delivery failed its first attempt: all ten are pending, retried meanwhile.
    await receiver.waitFor((got) => accepted.every((id) => got.some((d) => requestIdOf(d.raw) === id)));
    const firstAttempts = new Map(receiver.received.map((d) => [requestIdOf(d.raw), d]));

    // Requests keep coming while the copy is taken: the backup holds no lock they wait for.
    const backupFile = join(tempDir(), 'svc-backup.db');
    const during: number[] = [];
    let copying = true;
    const traffic = (async () => {
      while (copying) during.push((await chat(svc.url, key)).status);
    })();
    const out = await adminCommandAsync(['backup', backupFile, '--json'], env).finally(() => (copying = false));
    await traffic;
    expect(during.length).toBeGreaterThan(0);
    expect(during).toEqual(during.map(() => 200));
    const report = JSON.parse(out) as { path: string; bytes: number; pending_deliveries: number; secret_key_file: string };
    expect(report.path).toBe(backupFile);
    expect(report.bytes).toBe(statSync(backupFile).size);
    expect(report.pending_deliveries).toBeGreaterThanOrEqual(10);
    expect(report.secret_key_file).toBe(join(data, 'secret.key'));
    expect(statSync(backupFile).mode & 0o777).toBe(0o600);
    expect(existsSync(`${backupFile}.partial`)).toBe(false);
    await svc.stop();

    // Restore as the README says: the copy and the key file in a directory of their own, svc started on it.
    const restored = join(tempDir(), 'restored');
    mkdirSync(restored, { mode: 0o700 });
    copyFileSync(backupFile, join(restored, 'svc.db'));
    copyFileSync(report.secret_key_file, join(restored, 'secret.key'));
    receiver.fallback = { status: 200 };
    const again = await startServerProcess({ ...env, SVC_DATABASE_URL: `sqlite:${join(restored, 'svc.db')}` });
    running.push(again);
    const delivered = (id: string) => receiver.received.find((d) => d.replied === 200 && requestIdOf(d.raw) === id);
    // Every delivery of the traffic during the copy is pending too, and due as soon: on a host at load 15–20 the ten took
    // longer than the default 15 s to come through.
    await receiver.waitFor(() => accepted.every((id) => delivered(id) !== undefined), 60_000);
    for (const id of accepted) {
      const sent = delivered(id)!;
      const first = firstAttempts.get(id)!;
      expect(sent.headers['x-svc-delivery']).toBe(first.headers['x-svc-delivery']);
      expect(sent.raw.equals(first.raw)).toBe(true);
      // The signing secret was read back with the restored key file.
      expect(sent.headers['x-svc-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(sent.raw).digest('hex')}`);
    }
    expect((await chat(again.url, key)).status).toBe(200);
  });

  it('a second backup to the same name while the first is writing refuses, naming it; the first ends with a whole copy', async () => {
    const data = tempDir();
    const file = join(data, 'svc.db');
    const env = serverEnv({ SVC_DATABASE_URL: `sqlite:${file}` });
    adminCommand(['migrate'], env);
    // Enough pages that the first backup is still copying when it is paused.
    const db = new SQLite(file);
    db.exec('create table backup_padding (b blob)');
    db.prepare('with recursive n(i) as (select 1 union all select i + 1 from n where i < 1024) insert into backup_padding select randomblob(65536) from n').run();
    db.close();
    const target = join(tempDir(), 'copy.db');

    const first = spawn(process.execPath, [SERVER_BIN, 'backup', target], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let firstErr = '';
    first.stderr.on('data', (d) => (firstErr += d));
    const firstExit = new Promise<number | null>((resolve) => first.once('exit', (code) => resolve(code)));
    try {
      while (!existsSync(`${target}.partial`) && first.exitCode === null) await sleep(2);
      first.kill('SIGSTOP');
      expect(existsSync(target), 'the first backup finished before it was paused').toBe(false);

      const second = spawnSync(process.execPath, [SERVER_BIN, 'backup', target], { env, encoding: 'utf8', timeout: 30_000 });
      expect(second.stderr).toContain(`backup failed: another backup to ${target} is being written (svc-server backup, process ${first.pid})`);
      expect(second.status).toBe(1);
    } finally {
      first.kill('SIGCONT');
    }
    expect(await firstExit, firstErr).toBe(0);
    const copy = new SQLite(target, { readonly: true });
    expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(copy.prepare('select count(*) from backup_padding').pluck().get()).toBe(1024);
    copy.close();
    expect(readdirSync(join(target, '..'))).toEqual(['copy.db']);
  });

  it('never overwrites a file, and on Postgres says to use pg_dump', async () => {
    const data = tempDir();
    const env = serverEnv({ SVC_DATABASE_URL: `sqlite:${join(data, 'svc.db')}` });
    adminCommand(['migrate'], env);
    const target = join(tempDir(), 'copy.db');
    adminCommand(['backup', target], env);
    const twice = spawnSync(process.execPath, [SERVER_BIN, 'backup', target], { env, encoding: 'utf8' });
    expect(twice.status).toBe(1);
    expect(twice.stderr).toContain(`backup failed: ${target} already exists: give a new file name`);
    expect(readdirSync(join(target, '..'))).toEqual(['copy.db']);

    const onPostgres = spawnSync(process.execPath, [SERVER_BIN, 'backup', join(data, 'x.db')], {
      env: { ...env, SVC_DATABASE_URL: 'postgres://svc@127.0.0.1:1/svc', SVC_SECRET_KEY: Buffer.alloc(32, 1).toString('base64') },
      encoding: 'utf8',
    });
    expect(onPostgres.status).toBe(1);
    expect(onPostgres.stderr).toContain('back it up with pg_dump');
  });

  // `svc-server backup /backups/svc-$(date +%F).db` on a host without /backups said "cannot write …db.lock: ENOENT",
  // naming a lock file the user never asked for.
  it('a target in a directory that does not exist is refused, naming the directory to create', () => {
    const data = tempDir();
    const env = serverEnv({ SVC_DATABASE_URL: `sqlite:${join(data, 'svc.db')}` });
    adminCommand(['migrate'], env);
    const missing = join(tempDir(), 'backups');
    const result = spawnSync(process.execPath, [SERVER_BIN, 'backup', join(missing, 'svc.db')], { env, encoding: 'utf8' });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`backup failed: the directory ${missing} does not exist: create it first (mkdir -p ${missing})`);
    expect(existsSync(missing)).toBe(false);
  });
});
