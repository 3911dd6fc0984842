import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

// OWASP's Password Storage Cheat Sheet: scrypt at N=2^17, r=8, p=1 at least, or an equal-cost row of its table;
// N=2^15, r=8, p=3 is one, needing 32 MiB per hash instead of 128 (two sign-ins are checked at once).
const N = 32768;
const R = 8;
const P = 3;
const KEY_LEN = 32;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, KEY_LEN, { N: n, r, p, maxmem: 64 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** `scrypt$N$r$p$salt$hash` (base64url parts). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, N, R, P);
  return ['scrypt', N, R, P, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'), Number(n), Number(r), Number(p));
  // Constant time: the comparison must not reveal how many leading bytes matched.
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/**
 * Whether a stored hash was made with weaker parameters than new hashes get: a sign-in that verified it
 * stores a new hash, so accounts made before the parameters were raised move up as their users sign in.
 *
 * @example
 * if (ok && needsRehash(user.password_hash)) await users.replacePasswordHash(user.id, user.password_hash, await hashPassword(password));
 */
export function needsRehash(stored: string): boolean {
  const [scheme, n, r, p] = stored.split('$');
  return scheme !== 'scrypt' || Number(n) < N || Number(r) < R || Number(p) < P;
}
