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
});
