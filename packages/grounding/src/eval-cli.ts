import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { evaluate, fit, largeInputMs, leaveOneDatasetOut, measure, parseRows, rowClaims, byDataset, type DatasetReport, type EvalRow, type SpanScores } from './evaluate.js';
import { calibrationDraws, type DatasetDraws } from './calibration-draws.js';
import { DEFAULT_MODEL, FEATURE_NAMES } from './model.js';

/** `packages/grounding/{src,dist}/eval-cli.*` → the dev files beside the repository: `../shared/eval/…`. */
export function defaultDataPaths(moduleUrl: string = import.meta.url): string[] {
  const packageDir = resolve(dirname(fileURLToPath(moduleUrl)), '..');
  const dir = resolve(packageDir, '..', '..', '..', 'shared', 'eval');
  return ['grounding-dev.jsonl', 'grounding-dev-more.jsonl'].map((f) => resolve(dir, f));
}

/** Draws of k rows per dataset and k in `--calibration`. */
const DRAWS = 200;

const USAGE = `usage: eval-cli [--data FILE[,FILE…]] [--json] [--fit] [--calibration K[,K…]]
  --data FILES      JSON Lines rows (default: ../shared/eval/grounding-dev.jsonl and grounding-dev-more.jsonl)
  --json            print the report as JSON on stdout
  --fit             also print the calibration fitted on all rows (to update DEFAULT_MODEL)
  --calibration KS  also measure thresholds picked on K labelled rows of each dataset (leave-one-dataset-out
                    model, ${DRAWS} random draws, fixed seed): balanced accuracy on the dataset's other rows`;

const f3 = (x: number) => x.toFixed(3);
const pct = (x: number) => `${Math.round(x * 100)} %`;

function main(argv: string[]): number {
  let files = defaultDataPaths();
  let json = false;
  let doFit = false;
  let lambda = 1;
  let ks: number[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--data') {
      const v = argv[++i];
      if (!v) return fail('--data needs a file');
      files = v.split(',').map((f) => resolve(process.cwd(), f));
    } else if (a === '--json') json = true;
    else if (a === '--fit') doFit = true;
    else if (a === '--lambda') lambda = Number(argv[++i]);
    else if (a === '--calibration') {
      ks = (argv[++i] ?? '').split(',').filter(Boolean).map(Number);
      if (ks.length === 0 || ks.some((k) => !Number.isInteger(k) || k < 2)) return fail('--calibration needs row counts like 20,50,100');
    }
    else if (a === '--help' || a === '-h') {
      process.stdout.write(USAGE + '\n');
      return 0;
    } else return fail(`unknown argument ${a}`);
  }
  for (const f of files) if (!existsSync(f)) return fail(`no data file at ${f} (use --data FILE)`);
  const rows: EvalRow[] = files.flatMap((f) => parseRows(readFileSync(f, 'utf8')));
  const claims = rowClaims(rows);
  const lodo = leaveOneDatasetOut(claims, lambda);
  const reports = evaluate(rows);
  const large = largeInputMs(rows);
  const fitted = doFit ? fit(claims, lambda) : undefined;
  const inFitted = fitted ? new Map([...byDataset(claims)].map(([d, l]) => [d, measure(fitted, l)])) : undefined;
  const calibration = ks.length ? calibrationDraws(claims, new Map([...lodo].map(([d, m]) => [d, m.model])), ks, { draws: DRAWS }) : undefined;
  if (json) {
    process.stdout.write(JSON.stringify({ reports, leaveOneDatasetOut: Object.fromEntries(lodo), largeInput: large, fitted, calibration }, null, 2) + '\n');
    return 0;
  }
  const lines = [
    `@svc/grounding on ${rows.length} rows (${files.map((f) => f.split('/').pop()).join(', ')}), threshold 0.5`,
    '',
    '| dataset | rows | BA | F1 | AUROC | flagged | leave-one-dataset-out BA (AUROC) | copy flagged | yeah+copy flagged | append: score rose | p50 / p99 ms |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  let lodoSum = 0;
  for (const r of reports) {
    const l = lodo.get(r.dataset)!;
    lodoSum += l.balancedAccuracy;
    lines.push(
      `| ${r.dataset} | ${r.rows} | ${f3(r.balancedAccuracy)} | ${f3(r.f1)} | ${f3(r.auroc)} | ${pct(r.flagged)} | ${f3(l.balancedAccuracy)} (${f3(l.auroc)}) | ${pct(r.probes.copyFlagged)} | ${pct(r.probes.yeahCopyFlagged)} | ${pct(r.probes.appendRose)} | ${r.latencyMs.p50.toFixed(3)} / ${r.latencyMs.p99.toFixed(3)} |`,
    );
  }
  lines.push('', `leave-one-dataset-out balanced accuracy, mean over ${reports.length} datasets: ${f3(lodoSum / reports.length)}`);
  for (const r of reports) lines.push(...beside(r, lodo.get(r.dataset)!.balancedAccuracy));
  lines.push(`100 KB of sources with a 4 KB answer: ${large.wallMs.toFixed(1)} ms wall, ${large.cpuMs.toFixed(1)} ms CPU (median of 15)`);
  if (fitted) {
    lines.push('', `fitted on all rows (lambda ${lambda}): { bias: ${fitted.bias.toFixed(4)}, weights: [${fitted.weights.map((w) => w.toFixed(4)).join(', ')}] }  (${FEATURE_NAMES.join(', ')})`);
    for (const [d, m] of inFitted!) lines.push(`  ${d}: BA ${f3(m.balancedAccuracy)}, AUROC ${f3(m.auroc)}, flagged ${pct(m.flagged)}`);
  }
  if (calibration) lines.push('', ...calibrationTable(calibration));
  void DEFAULT_MODEL;
  process.stdout.write(lines.join('\n') + '\n');
  return 0;
}

/** Where a dataset's rows carry them: other detectors' balanced accuracy on the same rows, and span-level figures. */
function beside(r: DatasetReport, lodoBalancedAccuracy: number): string[] {
  const lines: string[] = [];
  if (r.detectors) {
    const others = Object.entries(r.detectors).sort((a, b) => b[1] - a[1]);
    lines.push('', `${r.dataset}, balanced accuracy on the same ${r.rows} rows: @svc/grounding ${f3(lodoBalancedAccuracy)} left out, ${f3(r.balancedAccuracy)} in-sample; ${others.map(([name, ba]) => `${name} ${f3(ba)}`).join(', ')}`);
  }
  if (r.spans) {
    const cell = (s: SpanScores) => `P ${f3(s.precision)} / R ${f3(s.recall)} / F1 ${f3(s.f1)}`;
    lines.push(
      '',
      `${r.dataset}, character-level against the annotators' spans (all rows): flagged spans ${cell(r.spans.flaggedSpans)}; claims not grounded ${cell(r.spans.ungroundedClaims)}; every character flagged ${cell(r.spans.everything)}`,
    );
  }
  return lines;
}

/** Thresholds picked on k rows of a dataset, beside the default threshold and the dataset's own best one. */
function calibrationTable(results: readonly DatasetDraws[]): string[] {
  const ks = results[0]?.byK.map((b) => b.k) ?? [];
  const mean = (f: (r: DatasetDraws) => number) => results.reduce((a, r) => a + f(r), 0) / results.length;
  const lines = [
    `threshold picked on k labelled rows of the dataset (leave-one-dataset-out model; ${DRAWS} draws of k rows at random, not stratified, seed 1), balanced accuracy on its other rows: mean (10th percentile) [median threshold]`,
    '',
    `| dataset | rows | default 0.5 | ${ks.map((k) => `k = ${k}`).join(' | ')} | own best threshold (all rows) |`,
    `|---|---:|---:|${ks.map(() => '---:|').join('')}---:|`,
  ];
  for (const r of results) {
    const cells = r.byK.map((b) => `${f3(b.mean)} (${f3(b.p10)}) [${b.medianThreshold.toFixed(2)}]`);
    lines.push(`| ${r.dataset} | ${r.rows} | ${f3(r.atDefault)} | ${cells.join(' | ')} | ${f3(r.oracle.balancedAccuracy)} at ${r.oracle.threshold.toFixed(2)} |`);
  }
  const meanCells = ks.map((_, i) => `**${f3(mean((r) => r.byK[i]!.mean))}** (${f3(mean((r) => r.byK[i]!.p10))})`);
  lines.push(`| **mean** | | **${f3(mean((r) => r.atDefault))}** | ${meanCells.join(' | ')} | **${f3(mean((r) => r.oracle.balancedAccuracy))}** |`);
  const redrawn = results.flatMap((r) => r.byK.map((b) => b.redrawn)).reduce((a, x) => a + x, 0);
  if (redrawn > 0) lines.push('', `${redrawn} draws of one class only were drawn again`);
  return lines;
}

function fail(message: string): number {
  process.stderr.write(`eval-cli: ${message}\n${USAGE}\n`);
  return 2;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
