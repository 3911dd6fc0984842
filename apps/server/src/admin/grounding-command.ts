import { Command } from 'commander';
import { MIN_CALIBRATION_ROWS } from '@svc/grounding/min-calibration-rows';
import type { CalibrateIO } from './grounding-calibrate.js';

// The calibration itself (@svc/grounding, the row schema, the tokenizer behind the prompt helpers) is loaded when
// the command runs, not by every svc-server command: the help text's MIN_CALIBRATION_ROWS comes from a module of
// that one constant.

/**
 * `svc-server grounding calibrate --data FILE.jsonl [--json]`: the threshold for the operator's own traffic.
 *
 * @example
 * program.addCommand(makeGroundingCommand(io));
 */
export function makeGroundingCommand(io: CalibrateIO): Command {
  const grounding = new Command('grounding').description('the grounding check (svc.grounded)');
  grounding
    .command('calibrate')
    .description(
      `pick SVC_GROUNDING_THRESHOLD from labelled answers of your own traffic: JSON Lines, one {"context": [source texts], "question": text or null, "answer": text, "hallucinated": true/false} per line, at least ${MIN_CALIBRATION_ROWS} rows of both labels`,
    )
    .requiredOption('--data <file>', 'labelled rows (JSON Lines)')
    .option('--json', 'print the result as JSON')
    .action(async (opts: { data: string; json?: boolean }) => (await import('./grounding-calibrate.js')).calibrateCommand(io, opts));
  return grounding;
}
