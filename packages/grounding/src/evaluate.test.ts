import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { defaultDataPath } from './eval-cli.js';
import { crossValidate, evaluate, largeInputMs, parseRows } from './evaluate.js';
import { binaryMetrics, charCounts, f1FromCounts } from './metrics.js';

// What the dev set measured when this was written (README.md), minus a margin for small changes.
const MARGIN = 0.02;
const REACHED = {
  'halueval-qa': { balancedAccuracy: 0.952, f1: 0.95, cv: 0.948 },
  faithbench: { balancedAccuracy: 0.69, f1: 0.738, cv: 0.668, spanF1: 0.246 },
};

const dataPath = defaultDataPath(new URL('./eval-cli.ts', import.meta.url).href);
const haveData = existsSync(dataPath);
if (!haveData) console.warn(`[@svc/grounding] skipping the dev-set evaluation: ${dataPath} is absent`);

describe('metrics', () => {
  it('computes balanced accuracy and F1 with hallucinated as positive', () => {
    const m = binaryMetrics([true, true, false, false], [true, false, false, false]);
    expect(m.balancedAccuracy).toBeCloseTo((1 + 2 / 3) / 2);
    expect(m.f1).toBeCloseTo(2 / 3);
  });

  it('counts characters of overlapping ranges once', () => {
    const c = charCounts([{ start: 0, end: 4 }], [{ start: 2, end: 6 }, { start: 3, end: 5 }], 10);
    expect(c).toEqual({ tp: 2, fp: 2, fn: 2 });
    expect(f1FromCounts(c)).toBeCloseTo(0.5);
  });
});

if (!haveData) console.warn(`[grounding] dev-set evaluation SKIPPED: no dev set at ${dataPath} (the shared eval data beside the repository)`);

describe.skipIf(!haveData)('dev-set evaluation', () => {
  const rows = haveData ? parseRows(readFileSync(dataPath, 'utf8')) : [];

  it('reaches the measured figures on every dataset', () => {
    const reports = new Map(evaluate(rows).map((r) => [r.dataset, r]));
    const halu = reports.get('halueval-qa')!;
    expect(halu.balancedAccuracy).toBeGreaterThanOrEqual(REACHED['halueval-qa'].balancedAccuracy - MARGIN);
    expect(halu.f1).toBeGreaterThanOrEqual(REACHED['halueval-qa'].f1 - MARGIN);
    const fb = reports.get('faithbench')!;
    expect(fb.balancedAccuracy).toBeGreaterThanOrEqual(REACHED.faithbench.balancedAccuracy - MARGIN);
    expect(fb.f1).toBeGreaterThanOrEqual(REACHED.faithbench.f1 - MARGIN);
    expect(fb.spanF1!).toBeGreaterThanOrEqual(REACHED.faithbench.spanF1 - MARGIN);
    expect(fb.spanF1!).toBeGreaterThan(fb.flagAllSpanF1!);
    expect(fb.balancedAccuracy).toBeGreaterThan(fb.baselines['gpt_4o']!.balancedAccuracy);
  });

  it('holds up under grouped cross-validation', () => {
    const cv = crossValidate(rows);
    expect(cv.perDataset['halueval-qa']!.balancedAccuracy).toBeGreaterThanOrEqual(REACHED['halueval-qa'].cv - MARGIN);
    expect(cv.perDataset['faithbench']!.balancedAccuracy).toBeGreaterThanOrEqual(REACHED.faithbench.cv - MARGIN);
  });

  it('checks 100 KB of sources and a 4 KB answer (timing is reported by eval:grounding, not asserted)', () => {
    const { wallMs, cpuMs } = largeInputMs(rows);
    expect(Number.isFinite(wallMs) && Number.isFinite(cpuMs)).toBe(true);
    console.info(`[grounding] 100 KB sources + 4 KB answer: median ${cpuMs.toFixed(1)} ms CPU, ${wallMs.toFixed(1)} ms wall`);
  });
});
