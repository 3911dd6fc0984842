import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { analyze } from './analyze.js';
import { defaultDataPath } from './eval-cli.js';
import { toInput, parseRows, type EvalRow } from './evaluate.js';
import { checkGrounding, SourceIndexCache } from './index.js';

// Speed-ups of the check must not change what it says. The snapshot holds, per dev-set row, a hash of
// the full results (and the analysis features, bit for bit) of the code before it was optimised: for the
// row as labelled, and for its answer checked against the next row's sources (mostly unsupported).
// Regenerate with `vitest run -u` only when a change of results is intended.

const dataPath = defaultDataPath(new URL('./eval-cli.ts', import.meta.url).href);
const haveData = existsSync(dataPath);

interface Case {
  sources: string[];
  answer: string;
  question?: string;
}

function digest(c: Case, cache?: SourceIndexCache): string {
  const result = checkGrounding(c, cache ? { sourceIndexCache: cache } : {});
  const analysis = analyze(c.sources, c.answer, c.question, cache);
  const text = JSON.stringify({ result, features: analysis?.features, contentWords: analysis?.contentWords });
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

function digests(rows: readonly EvalRow[], cache?: SourceIndexCache): string {
  return rows
    .map((r, i) => {
      const own = toInput(r);
      const other = { ...own, sources: rows[(i + 1) % rows.length]!.context };
      return `${r.id} ${digest(own, cache)} ${digest(other, cache)}`;
    })
    .join('\n');
}

if (!haveData) console.warn(`[grounding] frozen per-row results SKIPPED: no dev set at ${dataPath} (the shared eval data beside the repository)`);

describe.skipIf(!haveData)('results on the dev set', () => {
  const rows = haveData ? parseRows(readFileSync(dataPath, 'utf8')) : [];

  it('are those of the frozen reference, with and without a source index cache', async () => {
    const fresh = digests(rows);
    expect(digests(rows, new SourceIndexCache())).toBe(fresh);
    await expect(fresh + '\n').toMatchFileSnapshot('./__snapshots__/frozen-results.txt');
  });

  it('are the same from indexes merged out of cached texts (as conversations: the context, the question, the next context)', () => {
    const cache = new SourceIndexCache();
    const conversation = (r: EvalRow, i: number): Case => ({
      sources: [...r.context, r.question ?? 'What does it say?', ...rows[(i + 1) % rows.length]!.context],
      answer: r.answer,
      question: r.question ?? undefined,
    });
    expect(rows.map((r, i) => digest(conversation(r, i), cache))).toEqual(rows.map((r, i) => digest(conversation(r, i))));
  });
});
