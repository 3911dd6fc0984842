const PREFIX = 'sha256=';
const HEADER_LENGTH = PREFIX.length + 64;

/**
 * The 32-byte digest in an `X-Svc-Signature` header, or why there is none. Strict: exactly `sha256=`
 * and 64 lower-case hex characters, nothing around them, one value only.
 */
export function parseSignatureHeader(header: unknown): Uint8Array | 'missing_signature' | 'malformed_signature' {
  if (header === undefined || header === null || header === '') return 'missing_signature';
  if (typeof header !== 'string' || header.length !== HEADER_LENGTH || !header.startsWith(PREFIX)) {
    return 'malformed_signature';
  }
  const digest = new Uint8Array(32);
  for (let i = 0; i < 32; i++) {
    const hi = nibble(header.charCodeAt(PREFIX.length + 2 * i));
    const lo = nibble(header.charCodeAt(PREFIX.length + 2 * i + 1));
    if (hi < 0 || lo < 0) return 'malformed_signature';
    digest[i] = (hi << 4) | lo;
  }
  return digest;
}

/** Value of a lower-case hex digit, -1 for anything else (upper case included: svc never sends it). */
function nibble(code: number): number {
  if (code >= 48 && code <= 57) return code - 48; // 0-9
  if (code >= 97 && code <= 102) return code - 87; // a-f
  return -1;
}

/** `sha256=<lower-case hex>` for a digest. */
export function formatSignatureHeader(digest: Uint8Array): string {
  let hex = PREFIX;
  for (const byte of digest) hex += HEX[byte];
  return hex;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
