import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';

const VERSION = 'v1';

/**
 * A sealed secret that this key cannot open: it was sealed with another key (SVC_SECRET_KEY changed, or the
 * data directory's secret.key replaced or lost), or the stored value was altered.
 */
export class SecretKeyMismatchError extends Error {
  readonly code = 'SVC_SECRET_KEY_MISMATCH';
  constructor() {
    super(
      'a stored signing secret cannot be decrypted with this secret key: it was encrypted with another one ' +
        "(SVC_SECRET_KEY changed, or the data directory's secret.key replaced). Restore the key it was encrypted " +
        'with (as SVC_SECRET_KEY, or in SVC_SECRET_KEY_PREVIOUS while rotating), or generate the signing secret again in the dashboard',
    );
    this.name = 'SecretKeyMismatchError';
  }
}

/**
 * AES-256-GCM encryption of short secrets (webhook signing secrets) at rest.
 * Stored form: `v1.<iv b64url>.<tag b64url>.<ciphertext b64url>`. `key` seals and opens; `previous` (the keys
 * it replaced, SVC_SECRET_KEY_PREVIOUS) only open, until `reseal` has moved every stored secret to `key`.
 *
 * @example
 * const box = new SecretBox(key32);
 * const stored = box.seal('whsec_…'); box.open(stored) === 'whsec_…';
 */
export class SecretBox {
  constructor(
    private readonly key: Buffer,
    private readonly previous: readonly Buffer[] = [],
  ) {
    if (key.length !== 32 || previous.some((k) => k.length !== 32)) throw new TypeError('SecretBox needs 32-byte keys');
  }

  /**
   * `sealed` under the current key: undefined when it already is (nothing to do), else sealed anew from what a
   * previous key opens. Throws SecretKeyMismatchError when no key opens it.
   */
  reseal(sealed: string): string | undefined {
    try {
      openWith(this.key, sealed);
      return undefined;
    } catch (err) {
      if (!(err instanceof SecretKeyMismatchError)) throw err;
    }
    return this.seal(this.open(sealed));
  }

  /** True when previous keys (SVC_SECRET_KEY_PREVIOUS) were given. */
  get hasPrevious(): boolean {
    return this.previous.length > 0;
  }

  /** True when only a previous key opens `sealed`: it still needs SVC_SECRET_KEY_PREVIOUS until `reseal`. */
  needsPrevious(sealed: string): boolean {
    try {
      openWith(this.key, sealed);
      return false;
    } catch (err) {
      if (!(err instanceof SecretKeyMismatchError)) throw err;
    }
    try {
      this.open(sealed);
      return true;
    } catch (err) {
      if (!(err instanceof SecretKeyMismatchError)) throw err;
      return false;
    }
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
  }

  open(sealed: string): string {
    for (const key of [this.key, ...this.previous]) {
      try {
        return openWith(key, sealed);
      } catch (err) {
        if (!(err instanceof SecretKeyMismatchError)) throw err;
      }
    }
    throw new SecretKeyMismatchError();
  }
}

function openWith(key: Buffer, sealed: string): string {
  const [version, iv, tag, data] = sealed.split('.');
  if (version !== VERSION || !iv || !tag || data === undefined) throw new Error('not a sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  try {
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
  } catch {
    // GCM's own message ("Unsupported state or unable to authenticate data") says nothing an operator can act on.
    throw new SecretKeyMismatchError();
  }
}

/**
 * A signing secret as the dashboard generates it: `whsec_` + 32 random bytes whose base64 has no `+` or `/`,
 * so it reads the same in base64 and base64url (design §5): the standardwebhooks and svix libraries decode it
 * as shown, and a double-click selects all of it. About one draw in four qualifies (254 bits of the 256 remain).
 */
export function generateSigningSecret(): string {
  for (;;) {
    const encoded = randomBytes(32).toString('base64');
    if (!/[+/]/.test(encoded)) return `whsec_${encoded}`;
  }
}

/**
 * Throws SecretKeyMismatchError when `box` does not open the newest stored signing secret: the check a start and
 * the admin commands that seal a secret make, so a changed or lost key is said at once and never seals a secret
 * beside others it cannot open.
 *
 * @example
 * await checkSecretKey(new SecretBox(key), store.keys); // throws when SVC_SECRET_KEY changed
 */
export async function checkSecretKey(box: SecretBox, keys: { newestSealedSecret(): Promise<string | undefined> }): Promise<void> {
  const sealed = await keys.newestSealedSecret();
  if (sealed !== undefined) box.open(sealed);
}

type SealedSecretRow = { signing_secret_enc: string | null; previous_signing_secret_enc: string | null };

/**
 * What an operator should do about SVC_SECRET_KEY_PREVIOUS, as one line, or undefined when it is unset: once no
 * stored secret needs it (rotation finished) it is an old key kept around for nothing, and nothing else would say
 * so. Said at start and after `secrets rotate`. Never contains a key.
 *
 * @example
 * const note = await previousKeyNote(box, store.keys); if (note) logger.info(note.message);
 */
export async function previousKeyNote(
  box: SecretBox,
  keys: { sealedSecrets(): Promise<SealedSecretRow[]> },
): Promise<{ stillNeeded: number; message: string } | undefined> {
  if (!box.hasPrevious) return undefined;
  let stillNeeded = 0;
  for (const row of await keys.sealedSecrets()) {
    for (const sealed of [row.signing_secret_enc, row.previous_signing_secret_enc]) if (sealed !== null && box.needsPrevious(sealed)) stillNeeded += 1;
  }
  const message =
    stillNeeded === 0
      ? 'SVC_SECRET_KEY_PREVIOUS is set but no stored signing secret needs it any more: remove it from every instance\'s environment and restart them'
      : `${stillNeeded} stored signing secret${stillNeeded === 1 ? ' is' : 's are'} still encrypted with a key in SVC_SECRET_KEY_PREVIOUS: ` +
        'run svc-server secrets rotate to re-encrypt them with SVC_SECRET_KEY, then remove SVC_SECRET_KEY_PREVIOUS';
  return { stillNeeded, message };
}

/**
 * The SVC_SECRET_KEY_PREVIOUS hint (see previousKeyNote): a warning once the old key is needed by nothing, since
 * an operator would otherwise keep it in the environment for good.
 */
export async function logPreviousKeyNote(box: SecretBox, keys: { sealedSecrets(): Promise<SealedSecretRow[]> }, logger: Logger): Promise<void> {
  let note: Awaited<ReturnType<typeof previousKeyNote>>;
  try {
    note = await previousKeyNote(box, keys);
  } catch (err) {
    // A hint, read from every stored secret where the start's own check reads only the newest: a stored value
    // that is no sealed secret at all must not refuse the start. Its message names no key.
    logger.warn({ err }, 'could not tell whether SVC_SECRET_KEY_PREVIOUS is still needed');
    return;
  }
  if (!note) return;
  if (note.stillNeeded === 0) logger.warn(note.message);
  else logger.info({ secrets: note.stillNeeded }, note.message);
}
