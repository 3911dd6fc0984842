import { createReadStream } from 'node:fs';
import { z } from 'zod';
import {
  chooseThreshold,
  DEFAULT_GROUNDING_THRESHOLD,
  labelledScores,
  MIN_CALIBRATION_ROWS,
  ThresholdError,
  thresholdMetrics,
  unsupportedTermScore,
  type GroundingInput,
  type LabelledScore,
  type ThresholdChoice,
  type ThresholdMetrics,
} from '@svc/grounding';
import { groundingSourceMessages, lastUserText } from '../chat/prompt.js';
import { CommandError } from './command-error.js';

/** What the calibration can report to; the data goes to stdout, status to stderr. */
export interface CalibrateIO {
  stdout: (line: string) => void;
  stderr: (line: string) => void;
}

/** One labelled row of the calibration file, the format of the grounding evaluation data. */
const RowSchema = z.object({
  context: z.array(z.string(), { message: 'context must be an array of source texts' }),
  question: z.string().nullable().optional(),
  answer: z.string({ message: 'answer must be a string' }),
  hallucinated: z.boolean({ message: 'hallucinated must be true or false' }),
});
type Row = z.infer<typeof RowSchema>;

/** One JSON Lines row, or undefined for a blank line; a bad line fails with its number. */
function parseCalibrationRow(text: string, file: string, lineNumber: number): Row | undefined {
  const line = text.trim();
  if (line === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new CommandError(`${file}:${lineNumber}: not JSON (one JSON object per line: context, question, answer, hallucinated)`);
  }
  const parsed = RowSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const message = issue.path.length > 0 && !issue.message.startsWith(String(issue.path[0])) ? `${issue.path.join('.')}: ${issue.message}` : issue.message;
    throw new CommandError(`${file}:${lineNumber}: ${message}`);
  }
  return parsed.data;
}

/** The longest line read: far above any real row, far below the longest string V8 can hold (512 MB). */
const MAX_LINE_CHARS = 64 * 1024 * 1024;

/** How many rows between two progress reports. */
export const PROGRESS_ROWS = 50_000;

/** Each row's score, as `labelledScores` gives it. */
export type CalibrationScore = LabelledScore & { checked: boolean };

/**
 * Reads a JSON Lines file of labelled rows line by line and scores each as it comes, keeping only its score: a file
 * of any size (one read whole into a string fails past 512 MB) in the memory of its longest line. `onProgress` is
 * called with the rows scored so far every `progressEvery` rows, for a long file to say it is getting on. `chunks`
 * is the file's text as read (by default, a read stream of `file`).
 *
 * @example
 * const scores = await scoreCalibrationFile('labelled.jsonl', (rows) => console.error(`${rows} rows scored`));
 */
export async function scoreCalibrationFile(
  file: string,
  onProgress?: (rows: number) => void,
  progressEvery = PROGRESS_ROWS,
  chunks: AsyncIterable<string> = createReadStream(file, { encoding: 'utf8' }) as AsyncIterable<string>,
): Promise<CalibrationScore[]> {
  const scores: CalibrationScore[] = [];
  let lineNumber = 0;
  const take = (line: string) => {
    lineNumber++;
    const row = parseCalibrationRow(line, file, lineNumber);
    if (row === undefined) return;
    scores.push(...labelledScores([{ ...serverInput(row), hallucinated: row.hallucinated }]));
    if (scores.length % progressEvery === 0) onProgress?.(scores.length);
  };
  // The unfinished line's pieces, joined once at its end: each chunk is split once, however many a line spans.
  let pieces: string[] = [];
  let restLength = 0;
  try {
    for await (const chunk of chunks) {
      const lines = chunk.split('\n');
      const last = lines.pop()!;
      if (lines.length > 0) {
        take(pieces.join('') + lines[0]!);
        for (let i = 1; i < lines.length; i++) take(lines[i]!);
        pieces = [];
        restLength = 0;
      }
      pieces.push(last);
      restLength += last.length;
      if (restLength > MAX_LINE_CHARS) throw new CommandError(`${file}:${lineNumber + 1}: a line longer than ${MAX_LINE_CHARS / 1024 / 1024} MB (one JSON object per line)`);
    }
  } catch (err) {
    if (err instanceof CommandError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new CommandError(`cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? (err as Error).message)}`);
  }
  take(pieces.join(''));
  return scores;
}

/**
 * The input the server's check gets for a conversation whose system messages are the row's context and whose
 * last user message is its question (the question is a source there too, as every user message is).
 */
function serverInput(row: Row): GroundingInput {
  const messages = [...row.context.map((content) => ({ role: 'system', content })), ...(row.question ? [{ role: 'user', content: row.question }] : [])];
  return { sources: groundingSourceMessages(messages).texts, answer: row.answer, question: lastUserText(messages) };
}

export interface CalibrationReport {
  rows: number;
  /** Rows the check does not score (no source text, or no letters or digits in the answer): left out. */
  unchecked: number;
  /** Rows used labelled hallucinated. */
  hallucinated: number;
  best: ThresholdChoice;
  atDefault: ThresholdMetrics;
}

/**
 * Picks the threshold that maximises balanced accuracy on the scored rows (`chooseThreshold` of `@svc/grounding`),
 * leaving out those the check does not score.
 *
 * @example
 * const report = calibrate(await scoreCalibrationFile('labelled.jsonl'));
 * `SVC_GROUNDING_THRESHOLD=${report.best.threshold}`;
 */
export function calibrate(scored: readonly CalibrationScore[]): CalibrationReport {
  const used = scored.filter((s) => s.checked);
  let best: ThresholdChoice;
  try {
    best = chooseThreshold(used);
  } catch (err) {
    if (err instanceof ThresholdError && used.length < scored.length) err.message += ` (${scored.length - used.length} more left out: no source text or no answer text to check)`;
    throw err;
  }
  return {
    rows: scored.length,
    unchecked: scored.length - used.length,
    hallucinated: used.filter((s) => s.hallucinated).length,
    best,
    atDefault: thresholdMetrics(used, DEFAULT_GROUNDING_THRESHOLD),
  };
}

const f3 = (x: number) => x.toFixed(3);
const pct = (x: number) => `${Math.round(x * 100)} %`;

/**
 * `svc-server grounding calibrate --data FILE.jsonl [--json]`: the threshold for the operator's own traffic.
 *
 * @example
 * await calibrateCommand(io, { data: 'labelled.jsonl' });
 */
export async function calibrateCommand(io: CalibrateIO, opts: { data: string; json?: boolean }): Promise<void> {
  // On stderr (with --json too: stdout is the result alone), for a file that takes minutes.
  const scores = await scoreCalibrationFile(opts.data, (rows) => io.stderr(`${rows} rows scored…`));
  let report: CalibrationReport;
  try {
    report = calibrate(scores);
  } catch (err) {
    if (err instanceof ThresholdError) throw new CommandError(`${opts.data}: ${err.message}`);
    throw err;
  }
  const { best, atDefault } = report;
  const setting = `SVC_GROUNDING_THRESHOLD=${best.threshold}`;
  if (opts.json) {
    const view = (m: ThresholdMetrics) => ({ threshold: m.threshold, balanced_accuracy: m.balancedAccuracy, f1: m.f1, flagged: m.flagged });
    io.stdout(
      JSON.stringify({
        ...view(best),
        same_rows_flagged_from: best.low,
        same_rows_flagged_to: best.high,
        rows: best.n,
        unchecked_rows: report.unchecked,
        default: view(atDefault),
        setting,
      }),
    );
  } else {
    const skipped = report.unchecked ? `; ${report.unchecked} left out: no source text or no answer text to check` : '';
    io.stdout(`${best.n} labelled rows (${report.hallucinated} hallucinated, ${best.n - report.hallucinated} grounded)${skipped}`);
    io.stdout('');
    io.stdout('            threshold  balanced accuracy  F1     flagged');
    io.stdout(`best        ${best.threshold.toString().padEnd(9)}  ${f3(best.balancedAccuracy).padEnd(17)}  ${f3(best.f1)}  ${pct(best.flagged)}`);
    io.stdout(`default     ${atDefault.threshold.toString().padEnd(9)}  ${f3(atDefault.balancedAccuracy).padEnd(17)}  ${f3(atDefault.f1)}  ${pct(atDefault.flagged)}`);
    io.stdout('');
    io.stdout(`Every threshold above ${best.low} and up to ${best.high} flags the same rows. Set it with:`);
    io.stdout(setting);
  }
  if (best.balancedAccuracy <= 0.5) io.stderr('warning: no threshold separates these labels better than chance; keep the default or label more rows');
  else if (best.n < 50) io.stderr(`note: ${best.n} rows pick a threshold roughly; more rows pick it better (docs/grounding.md: Calibrating for your traffic)`);
  if (best.threshold <= unsupportedTermScore()) {
    io.stderr(`note: at ${best.threshold} a claim whose one fault is a number or a name that no source has can pass (at the default it never does: such claims score at most ${unsupportedTermScore()})`);
  }
}
