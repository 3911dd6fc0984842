import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { AllowPrivate } from '../config.js';
import { ApiError, quoted } from '../http/errors.js';
import { ipv6Groups } from '../ip-address.js';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

export type { AllowPrivate };

/**
 * What SVC_WEBHOOK_ALLOW_PRIVATE would have to be for an address in `range` to be reached, said so that a
 * dashboard user who is not the operator knows whom to ask.
 */
function settingNote(range: string, allow: AllowPrivate): string {
  const setting = `SVC_WEBHOOK_ALLOW_PRIVATE is ${String(allow)} on this server`;
  if (range === 'loopback' && allow === false) return `${setting}; its operator can set loopback or true to allow it`;
  return `${setting}; only true, set by its operator, would allow it`;
}

/** A range's name with its article, as a sentence reads it: "an unspecified", "an IETF …", "a unique local", "a loopback". */
function withArticle(range: string): string {
  return `${/^(?!uni)[aeiou]/i.test(range) ? 'an' : 'a'} ${range}`;
}

/** A webhook attempt refused by the SSRF guard; its message is what the attempt log shows. */
export class WebhookAddressRefusedError extends Error {
  readonly code = 'SVC_WEBHOOK_ADDRESS_REFUSED';
  constructor(
    readonly host: string,
    readonly address: string,
    readonly range: string,
    allow: AllowPrivate = false,
  ) {
    const note = settingNote(range, allow);
    super(
      host === address
        ? `refused to connect to ${address}: ${range} address (${note})`
        : `refused to connect to ${host}: it resolves to ${address}, ${withArticle(range)} address (${note})`,
    );
    this.name = 'WebhookAddressRefusedError';
  }
}

/** A webhook attempt refused because of its URL itself (unparsable, not http(s), carrying credentials). */
export class WebhookUrlRefusedError extends Error {
  readonly code = 'SVC_WEBHOOK_URL_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'WebhookUrlRefusedError';
  }
}

type Range = [prefix: bigint, bits: number, name: string];

const V4_RANGES: Array<[string, number, string]> = [
  ['0.0.0.0', 8, '"this network" (0.0.0.0/8)'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignment'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, '6to4 relay'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['255.255.255.255', 32, 'broadcast'],
  ['240.0.0.0', 4, 'reserved'],
];

const V6_RANGES: Array<[string, number, string]> = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['100::', 64, 'discard-only'],
  ['2001:db8::', 32, 'documentation'],
  ['fc00::', 7, 'unique local'],
  ['fe80::', 10, 'link-local'],
  // Teredo tunnels to an address it embeds (obfuscated); no receiver needs one, so none is reached.
  ['2001::', 32, 'Teredo'],
  // Local-use NAT64 (RFC 8215): translated to whatever IPv4 the local translator chooses.
  ['64:ff9b:1::', 48, 'local-use NAT64'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
];

function v4ToBigInt(address: string): bigint {
  return address.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

/** Any textual IPv6 (including an embedded dotted IPv4 tail) as its 128-bit value. */
function v6ToBigInt(address: string): bigint {
  return ipv6Groups(address).reduce((acc, group) => (acc << 16n) | BigInt(group), 0n);
}

const v4Ranges: Range[] = V4_RANGES.map(([a, bits, name]) => [v4ToBigInt(a), bits, name]);
const v6Ranges: Range[] = V6_RANGES.map(([a, bits, name]) => [v6ToBigInt(a), bits, name]);

function match(value: bigint, width: number, ranges: Range[]): string | undefined {
  for (const [prefix, bits, name] of ranges) {
    const shift = BigInt(width - bits);
    if (value >> shift === prefix >> shift) return name;
  }
  return undefined;
}

/**
 * The name of the non-public range an IP address falls in (loopback, private, link-local, CGNAT, multicast,
 * ULA, Teredo, …), or undefined for a public address. IPv6 forms that embed an IPv4 address (IPv4-mapped
 * `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`,
 * 6to4 `2002::/16`) are judged by that IPv4 address.
 *
 * @example
 * blockedRange('169.254.169.254') // 'link-local'
 * blockedRange('::ffff:7f00:1')   // 'loopback'
 */
export function blockedRange(address: string): string | undefined {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return match(v4ToBigInt(address), 32, v4Ranges);
  if (family !== 6) return 'unparseable';
  const value = v6ToBigInt(address);
  const direct = match(value, 128, v6Ranges);
  if (direct) return direct;
  const high96 = value >> 32n;
  const embedsV4 = high96 === 0xffffn || high96 === 0xffff0000n || high96 === 0n || high96 === 0x64ff9b0000000000000000n;
  if (embedsV4) return embedded(value & 0xffffffffn, high96 === 0xffffn);
  // 6to4 (2002::/16) carries an IPv4 address in bits 16..48.
  if (value >> 112n === 0x2002n) return embedded((value >> 80n) & 0xffffffffn, false);
  return undefined;
}

/**
 * The range of an IPv4 address carried in an IPv6 one. Only the IPv4-mapped form (`::ffff:a.b.c.d`) is the
 * local IPv4 stack itself: a loopback address in a translated, compatible, NAT64 or 6to4 form goes through
 * a translator or relay, never to this host's loopback, so it gets its own name (refused under `loopback`).
 */
function embedded(v4: bigint, mapped: boolean): string | undefined {
  const range = match(v4, 32, v4Ranges);
  return range === 'loopback' && !mapped ? 'loopback via IPv6 translation' : range;
}

/**
 * Whether SVC_WEBHOOK_ALLOW_PRIVATE lets a webhook reach `address`.
 *
 * @example
 * isAllowedAddress('127.0.0.1', 'loopback')       // true
 * isAllowedAddress('169.254.169.254', 'loopback') // false
 */
export function isAllowedAddress(address: string, allow: AllowPrivate): boolean {
  if (allow === true) return true;
  const range = blockedRange(address);
  return range === undefined || (allow === 'loopback' && range === 'loopback');
}

/** The host of a parsed URL as an IP literal (brackets removed), or undefined for a name. */
function literalAddress(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return isIP(host) ? host : undefined;
}

/** Throws WebhookAddressRefusedError when `address` may not be contacted under `allow`. */
export function assertAllowedAddress(host: string, address: string, allow: AllowPrivate): void {
  if (isAllowedAddress(address, allow)) return;
  throw new WebhookAddressRefusedError(host, address, blockedRange(address) ?? 'non-public', allow);
}

/**
 * Checks a webhook URL when it is set: http(s), no credentials, at most 2048 characters and not an IP literal
 * that `allowPrivate` keeps out (names are resolved and checked on every attempt).
 * Returns the WHATWG-normalised URL (so `http://2130706433/` is seen as `http://127.0.0.1/`).
 *
 * @example
 * key.webhook_url = await validateWebhookUrl(input, { allowPrivate: config.webhooks.allowPrivate });
 */
export async function validateWebhookUrl(url: string, options: { allowPrivate: AllowPrivate }): Promise<string> {
  const invalid = (message: string) => new ApiError('invalid_value', message, { param: 'webhook_url' });
  if (typeof url !== 'string' || url.length === 0) throw invalid('The webhook URL must be a non-empty string.');
  if (url.length > MAX_WEBHOOK_URL_LENGTH) {
    throw invalid(`The webhook URL is ${url.length} characters long; the maximum is ${MAX_WEBHOOK_URL_LENGTH}.`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Quoted from its start: up to 2048 characters of what may not be a URL at all come back in a single line.
    throw invalid(`'${quoted(url)}' is not a valid URL.`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    // Quoted too: any run of letters, digits, `+`, `-` and `.` before a colon parses as a scheme (up to 2,047 of them).
    throw invalid(`The webhook URL must use http or https, not ${quoted(parsed.protocol.replace(/:$/, ''))}.`);
  }
  if (parsed.username || parsed.password) throw invalid('The webhook URL must not contain credentials.');
  if (parsed.href.length > MAX_WEBHOOK_URL_LENGTH) {
    throw invalid(`The webhook URL is longer than ${MAX_WEBHOOK_URL_LENGTH} characters once normalised.`);
  }
  const literal = literalAddress(parsed);
  if (literal && !isAllowedAddress(literal, options.allowPrivate)) {
    const range = blockedRange(literal) ?? 'non-public';
    throw invalid(
      `The webhook URL points at ${literal}, ${withArticle(range)} address; webhooks must reach a public address (${settingNote(range, options.allowPrivate)}).`,
    );
  }
  return parsed.href;
}

/**
 * Parses and checks the URL of one attempt before connecting: scheme and credentials again, and an IP-literal
 * host against the blocked ranges. Hostnames are checked by `guardedLookup` as the socket connects.
 */
export function parseAttemptUrl(href: string, allowPrivate: AllowPrivate): URL {
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    throw new WebhookUrlRefusedError('Invalid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new WebhookUrlRefusedError(`unsupported URL scheme ${url.protocol}`);
  if (url.username || url.password) throw new WebhookUrlRefusedError('URL carries credentials');
  const literal = literalAddress(url);
  if (literal) assertAllowedAddress(literal, literal, allowPrivate);
  return url;
}

/**
 * A `lookup` for sockets: resolves like `dns.lookup`, then refuses the connection when any resolved address
 * is one `allow` keeps out. The socket connects to exactly the addresses vetted here, so a second DNS answer
 * (DNS rebinding) cannot slip in between the check and the connect.
 *
 * @example
 * new Agent({ connect: { lookup: guardedLookup('loopback') } });
 */
export const guardedLookup = (allow: AllowPrivate): LookupFunction => (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '', 0);
    const list = addresses as LookupAddress[];
    for (const { address } of list) {
      if (isAllowedAddress(address, allow)) continue;
      const refused = new WebhookAddressRefusedError(hostname, address, blockedRange(address) ?? 'non-public', allow);
      return callback(refused as NodeJS.ErrnoException, '', 0);
    }
    if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
    const first = list[0];
    if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
    callback(null, first.address, first.family);
  });
};
