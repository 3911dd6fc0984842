// Rotating SVC_SECRET_KEY (a leaked key): the new key in SVC_SECRET_KEY, the old one in SVC_SECRET_KEY_PREVIOUS,
// then `svc-server secrets rotate` re-encrypts every stored signing secret with the new key, after which the old
// key can go. SQLite and Postgres.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeProgram } from '../src/admin/commands.js';
import { generateApiKey } from '../src/auth/api-keys.js';
import { loadConfig } from '../src/config.js';
import { generateSigningSecret, SecretBox } from '../src/crypto/secret-box.js';
import { createLogger } from '../src/logging/logger.js';
import { startServer } from '../src/server.js';
import { openStore } from '../src/storage/store.js';
import { createTestPostgres } from './support/databases.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

const postgres = await createTestPostgres('secret-rotation');
afterAll(async () => {
  await postgres?.drop();
});

const variants: Array<[string, () => { url: string; cleanup(): void }]> = [
  [
    'sqlite',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'svc-rotate-'));
      return { url: `sqlite:${join(dir, 'svc.db')}`, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
    },
  ],
];
if (postgres) variants.push(['postgres', () => ({ url: postgres.url, cleanup: () => {} })]);

const oldKey = randomBytes(32);
const newKey = randomBytes(32);
const CURRENT = generateSigningSecret();
const ROTATED_OUT = generateSigningSecret();

const one = (value: string | string[] | undefined): string => (Array.isArray(value) ? value.join(' ') : (value ?? ''));
const standardHeaders = (h: IncomingHttpHeaders) => ({ 'webhook-id': one(h['webhook-id']), 'webhook-timestamp': one(h['webhook-timestamp']), 'webhook-signature': one(h['webhook-signature']) });

describe.each(variants)('rotating SVC_SECRET_KEY on %s', (_name, open) => {
  let db: { url: string; cleanup(): void };
  let receiver: Receiver;
  let token: string;
  let keyId: string;

  const env = (secretKey: Buffer, previous?: Buffer[]) => ({
    SVC_HOST: '127.0.0.1',
    SVC_PORT: '0',
    SVC_DATABASE_URL: db.url,
    SVC_SECRET_KEY: secretKey.toString('base64'),
    ...(previous ? { SVC_SECRET_KEY_PREVIOUS: previous.map((k) => k.toString('base64')).join(',') } : {}),
  });

  /** What the command printed on stdout; its stderr lines go to `said`. */
  async function admin(args: string[], vars: Record<string, string>, said: string[] = []): Promise<string[]> {
    const out: string[] = [];
    const io = { env: vars, stdout: (l: string) => out.push(l), stderr: (l: string) => said.push(l), stopSignal: () => new Promise<string>(() => {}), readStdin: async () => '' };
    await makeProgram(io).exitOverride().parseAsync(['node', 'svc-server', ...args]);
    return out;
  }

  /** The log lines of a server started and stopped with `vars`. */
  async function startLog(vars: Record<string, string>): Promise<string> {
    const lines: string[] = [];
    const running = await startServer(loadConfig(vars), { logger: createLogger('info', { write: (line: string) => lines.push(line) } as unknown as NodeJS.WritableStream) });
    await running.close();
    return lines.join('');
  }

  /** A test send through a server started with `vars`: the delivery as received, verified with both secrets. */
  async function testSend(vars: Record<string, string>): Promise<void> {
    const running = await startServer(loadConfig(vars), { logger: createLogger('silent') });
    try {
      const res = await fetch(`${running.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      expect(await res.json()).toMatchObject({ success: true });
      const sent = receiver.received.at(-1)!;
      expect(new StandardWebhook(CURRENT).verify(sent.raw.toString('utf8'), standardHeaders(sent.headers))).toBeDefined();
      // The rotated-out secret still signs beside it: it was re-encrypted too.
      expect(new StandardWebhook(ROTATED_OUT).verify(sent.raw.toString('utf8'), standardHeaders(sent.headers))).toBeDefined();
    } finally {
      await running.close();
    }
  }

  beforeEach(async () => {
    db = open();
    receiver = await startReceiver();
    const store = await openStore(db.url);
    try {
      await store.handle.db.deleteFrom('api_keys').execute();
      const box = new SecretBox(oldKey);
      const user = await store.users.create({ email: `${randomBytes(4).toString('hex')}@example.test`, passwordHash: 'scrypt$x', now: Date.now() });
      const generated = generateApiKey();
      const key = await store.keys.create({
        userId: user.id,
        name: 'signed',
        prefix: generated.prefix,
        keyHash: generated.hash,
        now: Date.now(),
        webhookUrl: receiver.url,
        signingSecretEnc: box.seal(CURRENT),
        signingSecretLast4: CURRENT.slice(-4),
      });
      await store.keys.update(key.id, { previous_signing_secret_enc: box.seal(ROTATED_OUT), previous_signing_secret_last4: ROTATED_OUT.slice(-4), previous_signing_secret_expires_at: Date.now() + 3_600_000 }, Date.now());
      token = generated.token;
      keyId = key.id;
    } finally {
      await store.close();
    }
  });

  afterEach(async () => {
    await receiver.close();
    db.cleanup();
  });

  it('starts and signs with the old key as SVC_SECRET_KEY_PREVIOUS; `secrets rotate` moves every secret to the new key, once', async () => {
    // The new key alone cannot read what the old one sealed: refused at start, as before.
    await expect(startServer(loadConfig(env(newKey)), { logger: createLogger('silent') })).rejects.toMatchObject({ code: 'SVC_SECRET_KEY_MISMATCH' });
    // New key plus the old one: starts, and deliveries are signed with the stored secrets.
    await testSend(env(newKey, [oldKey]));

    expect(await admin(['secrets', 'rotate', '--json'], env(newKey, [oldKey]))).toEqual([JSON.stringify({ resealed: 2, current: 0, unreadable: [] })]);
    // Idempotent: nothing left to re-encrypt.
    expect(await admin(['secrets', 'rotate', '--json'], env(newKey, [oldKey]))).toEqual([JSON.stringify({ resealed: 0, current: 2, unreadable: [] })]);

    // The old key can go now: the new one alone starts and signs with the same secrets.
    await testSend(env(newKey));
    // And the old key alone no longer reads them (the leaked key is useless against the database).
    await expect(startServer(loadConfig(env(oldKey)), { logger: createLogger('silent') })).rejects.toMatchObject({ code: 'SVC_SECRET_KEY_MISMATCH' });
  });

  it('says at start and after `secrets rotate` whether SVC_SECRET_KEY_PREVIOUS is still needed, and how to be done with it', async () => {
    const withOld = env(newKey, [oldKey]);
    const during = await startLog(withOld);
    expect(during).toContain('2 stored signing secrets are still encrypted with a key in SVC_SECRET_KEY_PREVIOUS: run svc-server secrets rotate');

    const said: string[] = [];
    await admin(['secrets', 'rotate', '--json'], withOld, said);
    expect(said).toEqual([expect.stringMatching(/^SVC_SECRET_KEY_PREVIOUS is set but no stored signing secret needs it .*: remove it/)]);

    const after = await startLog(withOld);
    expect(after).toMatch(/"level":40,.*SVC_SECRET_KEY_PREVIOUS is set but no stored signing secret needs it/);
    expect(after).not.toContain('still encrypted');
    // Never the keys themselves.
    for (const log of [during, after, ...said]) for (const key of [oldKey, newKey]) expect(log).not.toContain(key.toString('base64'));
    // Without SVC_SECRET_KEY_PREVIOUS there is nothing to say.
    expect(await startLog(env(newKey))).not.toContain('SVC_SECRET_KEY_PREVIOUS');
  });

  it('starts with SVC_SECRET_KEY_PREVIOUS set when a rotated-out stored secret is no sealed value at all: the hint gives up, not the start', async () => {
    const store = await openStore(db.url);
    try {
      // The start's own key check reads the newest key's current secret only; the hint reads every one.
      await store.keys.update(keyId, { previous_signing_secret_enc: 'not a sealed secret' }, Date.now());
    } finally {
      await store.close();
    }
    const log = await startLog(env(oldKey, [newKey]));
    expect(log).toContain('could not tell whether SVC_SECRET_KEY_PREVIOUS is still needed');
  });

  it('a secret no given key opens is named, the others are re-encrypted', async () => {
    const store = await openStore(db.url);
    try {
      await store.keys.update(keyId, { previous_signing_secret_enc: new SecretBox(randomBytes(32)).seal(ROTATED_OUT) }, Date.now());
    } finally {
      await store.close();
    }
    await expect(admin(['secrets', 'rotate'], env(newKey, [oldKey]))).rejects.toThrow(new RegExp(`1 signing secret opens with neither SVC_SECRET_KEY nor SVC_SECRET_KEY_PREVIOUS \\(keys ${keyId}\\)`));
    expect(await admin(['secrets', 'rotate', '--json'], env(newKey, [oldKey])).catch(() => 'failed')).toBe('failed');
    const check = await openStore(db.url);
    try {
      const row = await check.keys.byId(keyId);
      expect(new SecretBox(newKey).open(row!.signing_secret_enc!)).toBe(CURRENT);
    } finally {
      await check.close();
    }
  });

  it('--json names a key whose current and rotated-out secrets no key opens once', async () => {
    const store = await openStore(db.url);
    try {
      const lost = new SecretBox(randomBytes(32));
      await store.keys.update(keyId, { signing_secret_enc: lost.seal(CURRENT), previous_signing_secret_enc: lost.seal(ROTATED_OUT) }, Date.now());
    } finally {
      await store.close();
    }
    const out: string[] = [];
    const io = { env: env(newKey, [oldKey]), stdout: (l: string) => out.push(l), stderr: () => {}, stopSignal: () => new Promise<string>(() => {}), readStdin: async () => '' };
    await expect(makeProgram(io).exitOverride().parseAsync(['node', 'svc-server', 'secrets', 'rotate', '--json'])).rejects.toThrow(/2 signing secrets open with neither/);
    expect(out).toEqual([JSON.stringify({ resealed: 0, current: 0, unreadable: [keyId] })]);
  });

  it('a secret set while the rotation runs (another instance, the dashboard) is newer and is kept', async () => {
    const store = await openStore(db.url);
    try {
      const read = (await store.keys.byId(keyId))!.signing_secret_enc!;
      const setMeanwhile = new SecretBox(newKey).seal(generateSigningSecret());
      await store.keys.update(keyId, { signing_secret_enc: setMeanwhile }, Date.now());
      // The rotation's write of what it read is refused: the row no longer holds that value.
      expect(await store.keys.resealSecret(keyId, 'signing_secret_enc', read, new SecretBox(newKey, [oldKey]).reseal(read)!)).toBe(false);
      expect((await store.keys.byId(keyId))!.signing_secret_enc).toBe(setMeanwhile);
    } finally {
      await store.close();
    }
    expect(await admin(['secrets', 'rotate', '--json'], env(newKey, [oldKey]))).toEqual([JSON.stringify({ resealed: 1, current: 1, unreadable: [] })]);
  });

  it('SVC_SECRET_KEY_PREVIOUS must hold 32-byte keys', () => {
    expect(() => loadConfig({ ...env(newKey), SVC_SECRET_KEY_PREVIOUS: 'c2hvcnQ=' })).toThrow(/SVC_SECRET_KEY_PREVIOUS: must be one or more 32-byte base64 keys/);
  });
});

describe('svc-server secrets rotate on an embedded database without SVC_SECRET_KEY', () => {
  it('names the data directory\'s secret.key as the key it used, not the unset SVC_SECRET_KEY', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-rotate-embedded-'));
    try {
      const said: string[] = [];
      const io = { env: { SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}` }, stdout: () => {}, stderr: (l: string) => said.push(l), stopSignal: () => new Promise<string>(() => {}), readStdin: async () => '' };
      await makeProgram(io).exitOverride().parseAsync(['node', 'svc-server', 'secrets', 'rotate']);
      expect(said[0]).toBe("re-encrypted 0 signing secrets with the data directory's secret.key (SVC_SECRET_KEY is unset); 0 already were");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
