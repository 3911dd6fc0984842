import { quoted } from '@svc/protocol/quoted';
import kleur from 'kleur';

/** What a command needs to know of a stream it writes to: whether it is a terminal, and how wide (when known). */
export interface StreamInfo {
  isTTY?: boolean;
  columns?: number;
}

/**
 * Where a command writes: data on `out` (stdout), status and errors on `err` (stderr).
 * Commands take an `Io` so tests can capture output without spawning a process.
 */
export interface Io {
  out(text: string): void;
  err(text: string): void;
  /**
   * The streams behind `out` and `err`, read when a line is formatted (a terminal's width can change). Lines
   * written to a terminal are fitted to its width; without `streams`, as for a pipe or a file, lines are whole.
   */
  streams?: { out: StreamInfo; err: StreamInfo };
}

/** The width a terminal is assumed to have when it does not say. */
export const DEFAULT_TERMINAL_WIDTH = 80;

/**
 * The columns a line written to `stream` is fitted to: that terminal's `columns` (80 when it does not say), or
 * `undefined` when the stream is not a terminal (a pipe, a file): then the line is printed whole, as with
 * `--wide`, so a script reading it gets every id and detail.
 *
 * @example
 * lineWidth(processIo, 'out'); // 80 in an 80-column terminal, undefined under `| grep`
 */
export function lineWidth(io: Io, stream: 'out' | 'err'): number | undefined {
  const info = io.streams?.[stream];
  if (info?.isTTY !== true) return undefined;
  return info.columns !== undefined && info.columns > 0 ? info.columns : DEFAULT_TERMINAL_WIDTH;
}

/** Whether each stream gets colours. */
export interface StreamColors {
  out: boolean;
  err: boolean;
}

/**
 * kleur's rules, decided per stream: off with `NO_COLOR` (any value), `NODE_DISABLE_COLORS` or `TERM=dumb`; on
 * with `FORCE_COLOR` (other than `0`); otherwise on where that stream is a terminal. kleur itself looks at stdout
 * alone, which would leave `svc-cli listen --json | jq`'s stderr lines in a terminal without colours.
 *
 * @example
 * detectColors(process.env, process); // { out: false, err: true } under `| jq`
 */
export function detectColors(
  env: Record<string, string | undefined>,
  streams: { stdout: { isTTY?: boolean }; stderr: { isTTY?: boolean } },
): StreamColors {
  if (env.NODE_DISABLE_COLORS || env.NO_COLOR !== undefined || env.TERM === 'dumb') return { out: false, err: false };
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return { out: true, err: true };
  return { out: streams.stdout.isTTY === true, err: streams.stderr.isTTY === true };
}

let colors: StreamColors = detectColors(process.env, process);

/** Colours per stream (`detectColors`); `--no-color` turns them off on both. */
export function configureColors(colorFlag: boolean, detected: StreamColors = detectColors(process.env, process)): void {
  colors = colorFlag ? detected : { out: false, err: false };
  // Text is coloured when either stream takes colours; `processIo` takes them out again on the other.
  kleur.enabled = colors.out || colors.err;
}

/** Whether stdout (`out`) and stderr (`err`) get colours now. */
export function streamColors(): StreamColors {
  return colors;
}

export const processIo: Io = {
  out: (text) => void process.stdout.write(colors.out ? text : withoutColors(text)),
  err: (text) => void process.stderr.write(colors.err ? text : withoutColors(text)),
  // Node's own streams: `isTTY` and `columns` (kept current on resize) are read at each line.
  streams: { out: process.stdout, err: process.stderr },
};

export { kleur };

export const mark = {
  ok: (): string => kleur.green('✔'),
  bad: (): string => kleur.red('✘'),
};

/** `12:03:04`, local time, as Stripe's CLI prints it. */
export function clockTime(date: Date): string {
  return [date.getHours(), date.getMinutes(), date.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

// Control characters (C0, DEL, C1), invisible formatting (bidi overrides, zero-width), line and paragraph
// separators, lone surrogates and private-use characters: none prints as itself, and some drive the terminal.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}]/gu;

/**
 * `text` safe to print: every character that is not printable is shown as a `\u` escape (`\u001b`,
 * `\u202e`), so request data (an event name, a request id) cannot clear the screen, retitle the window or
 * hide text. The escapes are JSON's: inside a JSON string they mean the same characters.
 *
 * @example
 * printable('\u001b[2Jhi'); // '\\u001b[2Jhi'
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (char) => {
    let escaped = '';
    for (let i = 0; i < char.length; i++) escaped += `\\u${char.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return escaped;
  });
}

/**
 * A value from a request as a line quotes it: `printable`, then cut to its first 128 characters (then `…`), as svc's
 * own error messages quote one. A sender chooses a value's length: a megabyte request id printed whole is a megabyte
 * line (and a terminal scrolled blank).
 *
 * @example
 * shown('R'.repeat(1_000_000)); // the first 128 characters, then …
 */
export function shown(text: string): string {
  return quoted(printable(text));
}

// Matches the escape sequences kleur emits, so padding counts visible characters only.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;

/** `text` without kleur's colour escapes (request data never holds one: `printable` escapes ESC). */
export function withoutColors(text: string): string {
  return text.replace(ANSI, '');
}

/** Columns `text` takes in a terminal, colour escapes not counted. */
export function visibleLength(text: string): number {
  return withoutColors(text).length;
}

/**
 * Left-aligned columns separated by two spaces; the header row is dimmed.
 *
 * @example
 * io.out(table(['ID', 'STATUS'], [['dlv_1', 'delivered']]));
 */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(visibleLength(h), ...rows.map((row) => visibleLength(row[i] ?? ''))));
  const line = (cells: string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - visibleLength(cell))))
      .join('  ')
      .trimEnd();
  return [kleur.dim(line(header)), ...rows.map(line)].join('\n') + '\n';
}
