import type { SecretBox } from '../crypto/secret-box.js';

/** Distinct sealed secrets kept decrypted; past that the memo starts over. */
const MAX_SECRETS = 10_000;

/**
 * The plaintext of the sealed signing secrets that deliveries carry (`ClaimedDelivery.signing_secret_enc`),
 * each decrypted once. Keyed by the sealed value itself, so a changed secret is a new entry: nothing here
 * can go stale.
 *
 * @example
 * const secret = secrets.open(row.signing_secret_enc); // 'whsec_…' or null (unsigned)
 */
export class SigningSecrets {
  private readonly opened = new Map<string, string>();

  constructor(private readonly box: SecretBox) {}

  open(sealed: string | null): string | null {
    if (sealed === null) return null;
    let secret = this.opened.get(sealed);
    if (secret === undefined) {
      secret = this.box.open(sealed);
      if (this.opened.size >= MAX_SECRETS) this.opened.clear();
      this.opened.set(sealed, secret);
    }
    return secret;
  }
}
