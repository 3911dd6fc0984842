// `long` time carries the time zone ("1:10:18 AM UTC"): a time without it is ambiguous to a team across zones.
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'long' });
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const numbers = new Intl.NumberFormat();

/** A time with its date and zone; text that is no time (a hand-edited URL's `since=yesterday`) as it is, not a RangeError that takes the page down. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const time = new Date(iso);
  return Number.isNaN(time.getTime()) ? iso : dateTime.format(time);
}

// Hours and minutes with the zone ("12:05 UTC"), for times close to now such as a next attempt; with the date
// ("Dec 1, 09:30 UTC") when that is not today here: retries are up to 10 h apart, so "next 09:30" read at 20:00
// would otherwise look past.
const clockTime = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
const dayClockTime = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });

export function formatClock(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const time = new Date(iso);
  return time.toDateString() === new Date(now).toDateString() ? clockTime.format(time) : dayClockTime.format(time);
}

/** "3 days", "5 hours": how long something has lasted so far, rounded down to whole days or hours. */
export function formatElapsed(ms: number): string {
  const hours = Math.floor(ms / 3_600_000);
  if (hours >= 48) return `${Math.floor(hours / 24)} days`;
  if (hours >= 24) return '1 day';
  return hours === 1 ? '1 hour' : `${hours} hours`;
}

export function formatDate(iso: string | null | undefined): string {
  return iso ? dateOnly.format(new Date(iso)) : '—';
}

export function formatNumber(n: number): string {
  return numbers.format(n);
}

/** "3 minutes ago" style, for recent times; falls back to the date. */
export function formatRelative(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return 'Never';
  const seconds = Math.round((now - new Date(iso).getTime()) / 1000);
  if (seconds < 45) return 'Just now';
  if (seconds < 90 * 60) return `${Math.max(1, Math.round(seconds / 60))} min ago`;
  if (seconds < 36 * 3600) return `${Math.round(seconds / 3600)} h ago`;
  return formatDate(iso);
}

/** A whole number of seconds in the largest unit that divides it: "24 hours", "90 minutes", "1 day". */
export function formatDuration(seconds: number): string {
  const units: Array<[string, number]> = [['day', 86_400], ['hour', 3600], ['minute', 60], ['second', 1]];
  const [unit, size] = units.find(([, s]) => seconds >= s && seconds % s === 0) ?? ['second', 1];
  const n = seconds / size;
  return `${numbers.format(n)} ${unit}${n === 1 ? '' : 's'}`;
}

const pad = (n: number) => String(n).padStart(2, '0');

/**
 * An ISO time as a `datetime-local` input shows it: in this browser's time zone, to the minute ('' for none).
 *
 * @example
 * toLocalInput('2026-11-30T08:05:00Z'); // '2026-11-30T09:05' in Europe/Berlin
 */
export function toLocalInput(iso: string | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A `datetime-local` input's value (this browser's time zone) as an ISO 8601 UTC time; undefined when unreadable. */
export function fromLocalInput(value: string): string | undefined {
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** This browser's time zone, as the times on the page are shown in it ("Europe/Berlin", "UTC"). */
export function timeZoneName(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
}

/**
 * A receiver's answer as text that shows what it holds: control characters (an escape sequence's ESC, a BEL…),
 * which a page draws as nothing, become their visible symbols (␛, ␇); line breaks and tabs stay. `binary`: part of
 * it was not UTF-8 text (the server keeps such bytes as �), so it is likely binary.
 *
 * @example
 * showControls('\u001b[31mred'); // { text: '␛[31mred', binary: false }
 */
export function showControls(body: string): { text: string; binary: boolean } {
  // eslint-disable-next-line no-control-regex
  const text = body.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, (c) => String.fromCharCode(c === '\u007f' ? 0x2421 : 0x2400 + c.charCodeAt(0)));
  return { text, binary: body.includes('\ufffd') };
}
