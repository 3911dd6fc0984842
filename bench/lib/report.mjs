// Machine facts, the targets of issue 10, and the text table.
import os from 'node:os';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { round } from './procs.mjs';

export function machineInfo(repo) {
  const git = (...args) => {
    try {
      return execFileSync('git', args, { cwd: repo, encoding: 'utf8' }).trim();
    } catch {
      return null;
    }
  };
  return {
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memoryGb: round(os.totalmem() / 2 ** 30, 1),
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    date: new Date().toISOString(),
    gitCommit: git('rev-parse', '--short', 'HEAD'),
    gitDirtyServer: git('status', '--porcelain', '--', 'apps/server', 'packages') ? true : false,
  };
}

/** Aggregate CPU jiffies from /proc/stat (null where unavailable): `steal` is time the hypervisor gave to other guests. */
export function cpuJiffies() {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return { total: fields.reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 };
  } catch {
    return null;
  }
}

/** Steal between two `cpuJiffies()` readings, in % of all CPU time (a noisy host shows several %). */
export function stealPct(a, b) {
  if (!a || !b || b.total <= a.total) return null;
  return round((100 * (b.steal - a.steal)) / (b.total - a.total), 1);
}

const fmt = (v, digits = 2) => (v === null || v === undefined ? '—' : typeof v === 'number' ? v.toFixed(digits) : String(v));

/** A plain text table (also valid Markdown). */
export function table(headers, rows) {
  const cells = rows.map((r) => r.map((c) => (typeof c === 'string' ? c : fmt(c))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length)));
  const line = (r) => `| ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  return [line(headers), `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...cells.map(line)].join('\n');
}

export { fmt };
