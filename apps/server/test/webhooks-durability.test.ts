import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { exitOf } from './support/processes.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

const BIN = resolve(import.meta.dirname, '../dist/bin.js');
const SECRET = 'whsec_durability';
const children: ChildProcess[] = [];
const receivers: Receiver[] = [];
const dirs: string[] = [];

beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first (npx turbo run build --filter=@svc/server)`);
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
  }
  await Promise.all(receivers.splice(0).map((r) => r.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function envFor(dir: string): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  return {
    ...clean,
    SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`,
    SVC_PORT: '0',
    SVC_LOG_LEVEL: 'info',
    SVC_WEBHOOK_TIMEOUT_MS: '2000',
    // Retries 200 ms apart while the receiver is down, for as long as the first server takes to answer the test's 12
    // requests on a loaded host: 15 of them (about 3 s) were spent before the last request on a slow host, and a
    // delivery that has spent its retries is failed, not resumed by the restart under test.
    SVC_WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 600 }, () => '200ms').join(','),
  };
}

function cli(args: string[], env: NodeJS.ProcessEnv): string {
  // An admin command (a password hash at OWASP's cost) took over 30 s at load 35 (as test/support/processes.ts says).
  const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`svc-server ${args.join(' ')} failed (${r.status}):\n${r.stderr}`);
  return r.stdout;
}

function start(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string; logs: () => string }> {
  const child = spawn(process.execPath, [BIN, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  return new Promise((resolvePromise, reject) => {
    // A guard against a hung start, not a measure: a start took over 20 s on a host running other suites (svc-server-bin).
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${err}`)), 100_000);
    child.stderr!.on('data', (d) => {
      err += d;
      const match = /svc listening on (http:\/\/\S+)/.exec(err) ?? /"url":"(http:\/\/[^"]+)"[^\n]*svc listening/.exec(err + out);
      if (match) {
        clearTimeout(timer);
        resolvePromise({ child, url: match[1]!, logs: () => err + out });
      }
    });
    // All it wrote: 'exit' comes before the pipes' last bytes.
    void exitOf(child).then((code) => reject(new Error(`server exited with ${code}:\n${err}`)));
  });
}

describe('durable outbox', () => {
  it('delivers every recorded request after SIGKILL and a restart on the same database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-durable-'));
    dirs.push(dir);
    const env = envFor(dir);
    // Take a free port for the receiver, then leave it closed: the receiver is down at first.
    const probe = await startReceiver();
    const receiverUrl = probe.url;
    const port = Number(new URL(receiverUrl).port);
    await probe.close();

    cli(['users', 'create', '--email', 'owner@example.test', '--password', 'correct horse battery'], env);
    const created = JSON.parse(
      cli(['keys', 'create', '--email', 'owner@example.test', '--webhook-url', receiverUrl, '--signing-secret', SECRET, '--json'], env),
    ) as { key: string };

    const first = await start(env);
    const client = new OpenAI({ apiKey: created.key, baseURL: `${first.url}/v1`, maxRetries: 0 });
    const requestIds: string[] = [];
    for (let i = 0; i < 12; i++) {
      if (i % 3 === 2) {
        const stream = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: `Say ${i}` }], stream: true });
        let id = '';
        for await (const chunk of stream) id = chunk.id;
        requestIds.push(id);
      } else {
        requestIds.push((await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: `Say ${i}` }] })).id);
      }
    }
    // Every response has completed, so every delivery is in the outbox; the receiver refused them all so far.
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));

    const receiver = await startReceiver({}, { port });
    receivers.push(receiver);
    const second = await start(env);
    const byRequest = () => new Set(receiver.received.map((r) => JSON.parse(r.raw.toString('utf8')).request_id as string));
    await receiver.waitFor(() => requestIds.every((id) => byRequest().has(id)), 60_000);

    const deliveryIds = new Set(receiver.received.map((r) => r.headers['x-svc-delivery'] as string));
    expect(deliveryIds.size).toBe(requestIds.length);
    for (const r of receiver.received) {
      expect(r.headers['x-svc-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(r.raw).digest('hex')}`);
    }
    const api = new OpenAI({ apiKey: created.key, baseURL: `${second.url}/v1`, maxRetries: 0 });
    const list = (await api.get('/webhooks/deliveries', { query: { limit: 50 } })) as { data: Array<{ request_id: string; status: string }> };
    expect(list.data.map((d) => d.request_id).sort()).toEqual([...requestIds].sort());
  });
});
