import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { startServer } from '../src/server.js';
import { createLogger } from '../src/logging/logger.js';
import { SecretBox } from '../src/crypto/secret-box.js';
import { EMBEDDED_KEY_FILE, resolveSecretKey } from '../src/crypto/embedded-key.js';
import { generateApiKey } from '../src/auth/api-keys.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { makeProgram } from '../src/admin/commands.js';
import { openStore } from '../src/storage/store.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const silent = () => createLogger('silent');

function configFor(dataDir: string, env: Record<string, string> = {}) {
  return loadConfig({ SVC_HOST: '127.0.0.1', SVC_PORT: '0', SVC_DATABASE_URL: `sqlite:${join(dataDir, 'svc.db')}`, ...env });
}

/** A data directory whose database holds a key with a signing secret sealed under the directory's secret.key. */
async function dataDirWithSigningSecret(webhookUrl: string | null = null): Promise<{ dataDir: string; token: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-secret-key-'));
  dirs.push(dataDir);
  const running = await startServer(configFor(dataDir), { logger: silent() });
  try {
    const box = new SecretBox(resolveSecretKey(undefined, dataDir));
    const user = await running.store.users.create({ email: 'a@example.test', passwordHash: 'scrypt$x', now: Date.now() });
    const generated = generateApiKey();
    await running.store.keys.create({
      userId: user.id,
      name: 'signed',
      prefix: generated.prefix,
      keyHash: generated.hash,
      now: Date.now(),
      webhookUrl,
      signingSecretEnc: box.seal('whsec_test-secret-0123456789'),
      signingSecretLast4: '6789',
    });
    return { dataDir, token: generated.token };
  } finally {
    await running.close();
  }
}

describe('the key that encrypts signing secrets', () => {
  it('a replaced secret.key stops the start with what to do, instead of every signed delivery failing', async () => {
    const { dataDir } = await dataDirWithSigningSecret();
    writeFileSync(join(dataDir, EMBEDDED_KEY_FILE), `${randomBytes(32).toString('base64')}\n`);
    await expect(startServer(configFor(dataDir), { logger: silent() })).rejects.toThrow(
      /stored signing secret cannot be decrypted with this secret key.*SVC_SECRET_KEY changed.*Restore the key/,
    );
  });

  it('an SVC_SECRET_KEY other than the one the secrets were sealed with is refused at start too', async () => {
    const { dataDir } = await dataDirWithSigningSecret();
    const env = { SVC_SECRET_KEY: randomBytes(32).toString('base64') };
    await expect(startServer(configFor(dataDir, env), { logger: silent() })).rejects.toMatchObject({ code: 'SVC_SECRET_KEY_MISMATCH' });
    // The right key, given explicitly, starts.
    const right = resolveSecretKey(undefined, dataDir).toString('base64');
    const running = await startServer(configFor(dataDir, { SVC_SECRET_KEY: right }), { logger: silent() });
    await running.close();
  });

  describe('a secret sealed under another key after the start (another instance with a different SVC_SECRET_KEY)', () => {
    let receiver: Receiver | undefined;
    afterEach(async () => {
      await receiver?.close();
      receiver = undefined;
    });

    it('is never sent unsigned, and the test send says which key to restore', async () => {
      receiver = await startReceiver();
      const dataDir = mkdtempSync(join(tmpdir(), 'svc-secret-key-'));
      dirs.push(dataDir);
      const running = await startServer(configFor(dataDir), { logger: silent() });
      try {
        const user = await running.store.users.create({ email: 'b@example.test', passwordHash: 'scrypt$x', now: Date.now() });
        const generated = generateApiKey();
        await running.store.keys.create({
          userId: user.id,
          name: 'signed elsewhere',
          prefix: generated.prefix,
          keyHash: generated.hash,
          now: Date.now(),
          webhookUrl: receiver.url,
          signingSecretEnc: new SecretBox(randomBytes(32)).seal('whsec_sealed-elsewhere-0123'),
          signingSecretLast4: '0123',
        });
        const res = await fetch(`${running.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${generated.token}` } });
        const body = (await res.json()) as { success: boolean; error: string };
        expect(body.success).toBe(false);
        expect(body.error).toMatch(/cannot be decrypted with this secret key.*Restore the key/);
        expect(body.error).not.toMatch(/Unsupported state/);
        expect(receiver.received).toHaveLength(0);
      } finally {
        await running.close();
      }
    });
  });

  describe('svc-server keys create / keys update --signing-secret', () => {
    /** Runs an admin command in this process against dataDir's database; resolves with what it printed. */
    async function admin(dataDir: string, args: string[], env: Record<string, string> = {}) {
      const out: string[] = [];
      const io = {
        env: { SVC_DATABASE_URL: `sqlite:${join(dataDir, 'svc.db')}`, ...env },
        stdout: (line: string) => out.push(line),
        stderr: (line: string) => out.push(line),
        stopSignal: () => new Promise<string>(() => {}),
        readStdin: async () => '',
      };
      await makeProgram(io).exitOverride().parseAsync(['node', 'svc-server', ...args]);
      return out;
    }

    async function storedSecrets(dataDir: string) {
      const store = await openStore(`sqlite:${join(dataDir, 'svc.db')}`);
      try {
        return await store.handle.db.selectFrom('api_keys').select(['id', 'signing_secret_enc']).orderBy('id').execute();
      } finally {
        await store.close();
      }
    }

    async function startError(dataDir: string, env: Record<string, string> = {}): Promise<Error> {
      return startServer(configFor(dataDir, env), { logger: silent() }).then(
        () => expect.unreachable('the start should be refused'),
        (err: Error) => err,
      );
    }

    it('a replaced secret.key is refused with the start\'s message, and nothing is stored', async () => {
      const { dataDir, token } = await dataDirWithSigningSecret();
      writeFileSync(join(dataDir, EMBEDDED_KEY_FILE), `${randomBytes(32).toString('base64')}\n`);
      const before = await storedSecrets(dataDir);
      const refusal = (await startError(dataDir)).message;

      const create = admin(dataDir, ['keys', 'create', '--email', 'a@example.test', '--signing-secret', 'whsec_new-secret-0123']);
      await expect(create).rejects.toMatchObject({ code: 'SVC_SECRET_KEY_MISMATCH', message: refusal });
      const update = admin(dataDir, ['keys', 'update', token, '--signing-secret', 'whsec_new-secret-0123']);
      await expect(update).rejects.toMatchObject({ code: 'SVC_SECRET_KEY_MISMATCH', message: refusal });
      expect(await storedSecrets(dataDir)).toEqual(before);
      // Without a secret to seal the commands still work.
      await admin(dataDir, ['keys', 'create', '--email', 'a@example.test']);
      expect(await storedSecrets(dataDir)).toHaveLength(before.length + 1);
    });

    it('an SVC_SECRET_KEY other than the stored secrets\' is refused; the right one seals', async () => {
      const { dataDir, token } = await dataDirWithSigningSecret();
      const before = await storedSecrets(dataDir);
      const wrong = { SVC_SECRET_KEY: randomBytes(32).toString('base64') };
      const refusal = (await startError(dataDir, wrong)).message;
      const create = admin(dataDir, ['keys', 'create', '--email', 'a@example.test', '--signing-secret', 'whsec_new-secret-0123'], wrong);
      await expect(create).rejects.toMatchObject({ code: 'SVC_SECRET_KEY_MISMATCH', message: refusal });
      const update = admin(dataDir, ['keys', 'update', token, '--signing-secret', 'whsec_new-secret-0123'], wrong);
      await expect(update).rejects.toMatchObject({ code: 'SVC_SECRET_KEY_MISMATCH', message: refusal });
      expect(await storedSecrets(dataDir)).toEqual(before);

      const right = { SVC_SECRET_KEY: resolveSecretKey(undefined, dataDir).toString('base64') };
      await admin(dataDir, ['keys', 'update', token, '--signing-secret', 'whsec_new-secret-0123'], right);
      const box = new SecretBox(resolveSecretKey(undefined, dataDir));
      const after = await storedSecrets(dataDir);
      const sealed = after.filter((row) => row.signing_secret_enc !== null);
      expect(sealed).toHaveLength(1);
      expect(box.open(sealed[0]!.signing_secret_enc!)).toBe('whsec_new-secret-0123');
    });
  });
});
