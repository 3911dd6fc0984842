import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_GROUNDING_THRESHOLD } from './check.js';
import { crossValidate, evaluate, fitAll, largeInputMs, parseRows, repeatedCrossValidation, type DatasetReport } from './evaluate.js';

/** `packages/grounding/{src,dist}/eval-cli.*` → the file beside the repository: `../shared/eval/…`. */
export function defaultDataPath(moduleUrl: string = import.meta.url): string {
  const packageDir = resolve(dirname(fileURLToPath(moduleUrl)), '..');
  return resolve(packageDir, '..', '..', '..', 'shared', 'eval', 'grounding-dev.jsonl');
}

const USAGE = `usage: eval-cli [--data FILE] [--json] [--fit]
  --data FILE  JSON Lines rows (default: ../shared/eval/grounding-dev.jsonl beside the repository)
  --json       print the report as JSON on stdout
  --fit        also print the model fitted on all rows (to update DEFAULT_MODEL)`;

function main(argv: string[]): number {
  let data = defaultDataPath();
  let json = false;
  let fit = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--data') {
      const v = argv[++i];
      if (!v) return fail('--data needs a file');
      data = resolve(process.cwd(), v);
    } else if (a === '--json') json = true;
    else if (a === '--fit') fit = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(USAGE + '\n');
      return 0;
    } else return fail(`unknown argument ${a}`);
  }
  if (!existsSync(data)) return fail(`no data file at ${data} (use --data FILE)`);
  const rows = parseRows(readFileSync(data, 'utf8'));
  const reports = evaluate(rows);
  const cv = crossValidate(rows);
  const repeated = repeatedCrossValidation(rows);
  const large = largeInputMs(rows);
  const report = { data, threshold: DEFAULT_GROUNDING_THRESHOLD, datasets: reports, crossValidation: cv, repeatedCrossValidation: repeated, largeInputMs: large };
  if (json) {
    process.stdout.write(JSON.stringify(fit ? { ...report, fittedModel: fitAll(rows) } : report, null, 2) + '\n');
    return 0;
  }
  const out: string[] = [`grounding eval — ${data}`, `threshold ${DEFAULT_GROUNDING_THRESHOLD}`, ''];
  for (const r of reports) out.push(...formatDataset(r, cv.perDataset[r.dataset], repeated[r.dataset]), '');
  out.push(`100 KB sources + 4 KB answer: ${large.wallMs.toFixed(2)} ms (CPU time ${large.cpuMs.toFixed(2)} ms)`);
  if (fit) out.push('', 'model fitted on all rows:', JSON.stringify(fitAll(rows)));
  process.stdout.write(out.join('\n') + '\n');
  return 0;
}

const f3 = (x: number): string => x.toFixed(3);

function formatDataset(
  r: DatasetReport,
  cv: { balancedAccuracy: number; f1: number } | undefined,
  repeated: { mean: number; min: number; max: number } | undefined,
): string[] {
  const lines = [
    `${r.dataset}  n=${r.n}`,
    `  @svc/grounding        balanced accuracy ${f3(r.balancedAccuracy)}  F1 ${f3(r.f1)}  (precision ${f3(r.precision)}, recall ${f3(r.recall)})`,
  ];
  if (cv) lines.push(`  5-fold CV (grouped)   balanced accuracy ${f3(cv.balancedAccuracy)}  F1 ${f3(cv.f1)}`);
  if (repeated) {
    lines.push(`  10 × 5-fold CV        balanced accuracy mean ${f3(repeated.mean)}  (range ${f3(repeated.min)}–${f3(repeated.max)})`);
  }
  if (r.spanF1 !== undefined) {
    lines.push(`  span char F1          ${f3(r.spanF1)}  (flag-everything baseline ${f3(r.flagAllSpanF1 ?? 0)})`);
  }
  for (const [name, b] of Object.entries(r.baselines)) {
    lines.push(`  ${name.padEnd(21)} balanced accuracy ${f3(b.balancedAccuracy)}  F1 ${f3(b.f1)}`);
  }
  lines.push(`  latency               p50 ${r.latencyMs.p50.toFixed(3)} ms  p99 ${r.latencyMs.p99.toFixed(3)} ms`);
  return lines;
}

function fail(message: string): number {
  process.stderr.write(`eval-cli: ${message}\n${USAGE}\n`);
  return 2;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
