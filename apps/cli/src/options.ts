import { InvalidArgumentError } from 'commander';
import { CliError } from './errors.js';

/** `--port`: 0 (any free port) to 65535. */
export function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isInteger(port) || port > 65_535) {
    throw new InvalidArgumentError('Must be an integer from 0 to 65535 (0 picks a free port).');
  }
  return port;
}

/** A positive integer option (`--last`, `--limit`). */
export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError('Must be a positive integer.');
  }
  return n;
}

/** An absolute http(s) URL (`--base-url`, `--forward-to`, `--to`). */
export function parseHttpUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('Must be an absolute http:// or https:// URL.');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError('Must be an absolute http:// or https:// URL.');
  }
  return url.href;
}

/** `--forward-to localhost:3000/webhooks` is accepted as Stripe's CLI accepts it: http:// is assumed. */
export function parseForwardUrl(value: string): string {
  return parseHttpUrl(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`);
}

/** `--path`: starts with `/`. */
export function parsePath(value: string): string {
  if (!value.startsWith('/') || /[\s?#]/.test(value)) {
    throw new InvalidArgumentError('Must start with "/" and contain no spaces, "?" or "#".');
  }
  return value;
}

/**
 * A `--secret` that cannot be right. Not commander's InvalidArgumentError: commander's message repeats the value
 * ("argument 'whsec_…' is invalid"), and a secret does not belong on a terminal or in a CI log. A usage error, exit 2.
 */
function secretError(problem: string): CliError {
  return new CliError(`option '--secret' is invalid (its value is not shown). ${problem}`, { exitCode: 2 });
}

/**
 * `--secret` (or SVC_WEBHOOK_SECRET): the signing secret as svc shows it. Empty is an unset variable in
 * `--secret "$VAR"`, and whitespace around it a pasted line break: both would fail every signature, so say so now.
 */
export function parseSecret(value: string): string {
  if (value.trim() === '') throw secretError('Must be the signing secret (whsec_…), not empty: is the variable it comes from set?');
  if (value.trim() !== value) throw secretError('Must be the signing secret without whitespace at its start or end (a pasted line break?).');
  return value;
}

/**
 * `listen --secret`, given once or more: every secret is tried (a rotation: the new one and the one it replaces,
 * as `@svc/verify` takes a list). Each is checked as `parseSecret` checks it.
 *
 * @example
 * // svc-cli listen --secret "$NEW" --secret "$OLD"
 * parseSecrets('whsec_old…', ['whsec_new…']); // ['whsec_new…', 'whsec_old…']
 */
export function parseSecrets(value: string, previous: readonly string[] | undefined): string[] {
  return [...(previous ?? []), parseSecret(value)];
}

/**
 * `replay --secret` and `check-receiver --secret`, which sign with one secret: given twice, commander would keep the
 * last and drop the first without a word (`--secret "$NEW" --secret "$OLD"`, as for listen, signed with the old one).
 */
export function parseOneSecret(value: string, previous: string | undefined): string {
  if (previous !== undefined) throw secretError('Given more than once: this command signs with one secret (listen takes several).');
  return parseSecret(value);
}

/** `--timeout 5s`, `500ms`, `2` (seconds): milliseconds, or undefined when unusable. */
export function parseTimeout(value: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(value.trim());
  if (!match) return undefined;
  const ms = match[2] === 'ms' ? Number(match[1]) : Number(match[1]) * 1000;
  return ms >= 1 && ms <= 600_000 ? Math.round(ms) : undefined;
}

/** `listen --forward-timeout`: a duration as `parseTimeout` reads it, in milliseconds. */
export function parseForwardTimeout(value: string): number {
  const ms = parseTimeout(value);
  if (ms === undefined) throw new InvalidArgumentError('Must be a duration such as 10s or 500ms (at most 600s).');
  return ms;
}

/** `--tolerance`: whole seconds, 0 or more. */
export function parseTolerance(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('Must be a whole number of seconds (0 or more).');
  return n;
}

const DURATION = /^(\d+)(s|m|h|d|w)$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/**
 * `--since` / `--until`: a duration back from now (`90s`, `30m`, `2h`, `7d`, `1w`) or an ISO 8601 time
 * (`2026-11-25T09:00:00Z`, `2026-11-25`), as the ISO 8601 UTC time the API takes.
 *
 * @example
 * parseTimeAgo('2h', () => Date.parse('2026-11-25T12:00:00Z')); // '2026-11-25T10:00:00.000Z'
 */
export function parseTimeAgo(value: string, now: () => number = Date.now): string {
  const trimmed = value.trim();
  const duration = DURATION.exec(trimmed);
  if (duration) return new Date(now() - Number(duration[1]) * UNIT_MS[duration[2] as keyof typeof UNIT_MS]).toISOString();
  const time = /^\d{4}-\d{2}-\d{2}/.test(trimmed) ? Date.parse(trimmed) : Number.NaN;
  if (Number.isNaN(time)) throw new InvalidArgumentError('Must be a duration back from now (30m, 2h, 7d) or an ISO 8601 time (2026-11-25T09:00:00Z).');
  return new Date(time).toISOString();
}

/**
 * `--last-status-code`: an HTTP status (503) or a class of them (5xx), as the deliveries list takes it.
 *
 * @example
 * parseStatusCodeFilter('5XX'); // '5xx'
 */
export function parseStatusCodeFilter(value: string): string {
  const trimmed = value.trim().toLowerCase();
  if (!/^[1-5](\d\d|xx)$/.test(trimmed)) throw new InvalidArgumentError('Must be an HTTP status (503) or a class of them (5xx).');
  return trimmed;
}
