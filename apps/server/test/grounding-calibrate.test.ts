import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { chooseThreshold, labelledScores, thresholdMetrics } from '@svc/grounding';
import { SERVER_BIN, serverEnv, startServerProcess } from './support/processes.js';
import { scoreCalibrationFile } from '../src/admin/grounding-calibrate.js';

// Labelled answers of one kind of traffic, written for this test: each fact of a museum's page copied (grounded),
// paraphrased (grounded, but in other words, so it scores low) and changed (hallucinated). On such traffic the
// default threshold flags most paraphrases; the calibrated one does not.
const FACTS: [fact: string, paraphrase: string, changed: string][] = [
  ['The museum opens at 10 am and closes at 6 pm.', 'Doors open in the morning at ten and shut at six in the evening.', 'The museum opens at 9 am and closes at 5 pm.'],
  ['Entry costs 15 euros for adults and is free for children.', 'Grown-ups are charged fifteen euros, kids get in without paying.', 'Entry costs 25 euros for adults and 5 euros for children.'],
  ['The collection holds 4,000 paintings from the Dutch Golden Age.', 'Some four thousand Dutch Golden Age pictures make up the collection.', 'The collection holds 9,000 paintings from the Italian Renaissance.'],
  ['The building was designed by Pierre Cuypers and opened in 1885.', 'Pierre Cuypers drew up the plans; it first welcomed visitors in 1885.', 'The building was designed by Hendrik Berlage and opened in 1905.'],
  ['Guided tours in English start every hour from the main hall.', 'Each hour an English-language tour leaves from the central hall.', 'Guided tours in German start every morning from the garden.'],
  ['The café on the ground floor serves lunch until 3 pm.', 'Lunch is available at the downstairs café till three in the afternoon.', 'The restaurant on the top floor serves dinner until 11 pm.'],
  ['Photography without flash is allowed in most galleries.', 'Visitors may take pictures in most rooms as long as they do not use a flash.', 'Photography is forbidden in every gallery, even without flash.'],
  ['The garden is closed from November to March.', 'Between November and March nobody can visit the garden.', 'The garden is closed from June to August for concerts.'],
];
const PAGE = `You answer questions about the museum.\n${FACTS.map(([fact]) => fact).join(' ')}`;
const QUESTION = 'Tell me about the museum.';

interface Row {
  context: string[];
  question: string | null;
  answer: string;
  hallucinated: boolean;
}

const ROWS: Row[] = FACTS.flatMap(([fact, paraphrase, changed]) => [
  { context: [PAGE], question: QUESTION, answer: fact, hallucinated: false },
  { context: [PAGE], question: QUESTION, answer: paraphrase, hallucinated: false },
  { context: [PAGE], question: QUESTION, answer: changed, hallucinated: true },
]);

/** What the library picks for these rows, checked as the server checks them (the question is a source too). */
function expected(rows: readonly Row[]) {
  const scored = labelledScores(rows.map((r) => ({ sources: [...r.context, ...(r.question ? [r.question] : [])], question: r.question ?? undefined, answer: r.answer, hallucinated: r.hallucinated })));
  return { best: chooseThreshold(scored), atDefault: thresholdMetrics(scored, 0.5) };
}

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-calibrate-'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, lines: readonly (Row | string)[]): string {
  const path = join(dir, name);
  writeFileSync(path, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  return path;
}

function calibrate(...args: string[]) {
  const r = spawnSync(process.execPath, [SERVER_BIN, 'grounding', 'calibrate', ...args], { env: serverEnv({}), encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('svc-server grounding calibrate', () => {
  it('prints the threshold the library picks, beside the default, and the line to set', () => {
    const { best, atDefault } = expected(ROWS);
    expect(best.threshold).toBeLessThan(0.5);
    expect(best.balancedAccuracy).toBeGreaterThan(atDefault.balancedAccuracy);

    const r = calibrate('--data', file('museum.jsonl', ROWS));
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe('24 labelled rows (8 hallucinated, 16 grounded)');
    const row = (name: string) => lines.find((l) => l.startsWith(name))!.trim().split(/\s{2,}/);
    expect(row('best')).toEqual(['best', String(best.threshold), best.balancedAccuracy.toFixed(3), best.f1.toFixed(3), `${Math.round(best.flagged * 100)} %`]);
    expect(row('default')).toEqual(['default', '0.5', atDefault.balancedAccuracy.toFixed(3), atDefault.f1.toFixed(3), `${Math.round(atDefault.flagged * 100)} %`]);
    expect(lines).toContain(`SVC_GROUNDING_THRESHOLD=${best.threshold}`);
    // Status on stderr: few rows, and a threshold low enough to let a wrong number or name through.
    expect(r.stderr).toContain('note: 24 rows pick a threshold roughly');
    expect(r.stderr).toContain(`note: at ${best.threshold} a claim whose one fault is a number or a name that no source has can pass`);
  });

  it('--json carries the same figures', () => {
    const { best, atDefault } = expected(ROWS);
    const r = calibrate('--data', file('museum.jsonl', ROWS), '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      threshold: best.threshold,
      balanced_accuracy: best.balancedAccuracy,
      f1: best.f1,
      flagged: best.flagged,
      same_rows_flagged_from: best.low,
      same_rows_flagged_to: best.high,
      rows: 24,
      unchecked_rows: 0,
      default: { threshold: 0.5, balanced_accuracy: atDefault.balancedAccuracy, f1: atDefault.f1, flagged: atDefault.flagged },
      setting: `SVC_GROUNDING_THRESHOLD=${best.threshold}`,
    });
  });

  // Five server starts: on a loaded host (CI runs the server's and the CLI's tests side by side) past 30 s.
  it('svc-server start takes the threshold it prints, and stops with one clear line on one out of range', { timeout: 120_000 }, async () => {
    const setting = JSON.parse(calibrate('--data', file('museum.jsonl', ROWS), '--json').stdout).setting as string;
    const [name, value] = setting.split('=') as [string, string];
    const started = await startServerProcess(serverEnv({ SVC_DATABASE_URL: `sqlite:${join(dir, 'data', 'svc.db')}`, [name]: value }));
    expect(await started.stop()).toBe(0);
    for (const bad of ['0', '1.5', 'high']) {
      const r = spawnSync(process.execPath, [SERVER_BIN, 'start'], { env: serverEnv({ SVC_DATABASE_URL: `sqlite:${join(dir, 'data', 'svc.db')}`, [name]: bad }), encoding: 'utf8', timeout: 30_000 });
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/SVC_GROUNDING_THRESHOLD: must be (greater than 0 and less than 1|a number between 0 and 1)/);
      expect(r.stderr).not.toMatch(/at .*\.js:\d+/);
    }
  });

  it('leaves out rows the check cannot score, and says so', () => {
    const noSource = { context: [], question: QUESTION, answer: 'The museum is free.', hallucinated: true };
    const r = calibrate('--data', file('with-empty.jsonl', [...ROWS, { ...noSource, question: null }]), '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ rows: 24, unchecked_rows: 1, threshold: expected(ROWS).best.threshold });
  });

  it.each([
    { name: 'a line that is not JSON', lines: [...ROWS.slice(0, 5), '{"context": ["x"], "answer": "y",', ...ROWS.slice(5)], error: /:6: not JSON/ },
    { name: 'a row without its label', lines: [...ROWS.slice(0, 2), { context: [PAGE], question: null, answer: 'x' } as unknown as Row, ...ROWS.slice(2)], error: /:3: hallucinated must be true or false/ },
    { name: 'a label that is a string', lines: [...ROWS, { ...ROWS[0]!, hallucinated: 'yes' } as unknown as Row], error: /:25: hallucinated must be true or false/ },
    { name: 'context that is one string', lines: [{ ...ROWS[0]!, context: PAGE } as unknown as Row, ...ROWS], error: /:1: context must be an array of source texts/ },
    { name: 'fewer than 20 rows', lines: ROWS.slice(0, 19), error: /19 labelled rows: at least 20 are needed/ },
    { name: 'grounded rows only, enough of them', lines: [...ROWS, ...ROWS].filter((r) => !r.hallucinated), error: /all 32 rows are grounded \(hallucinated: false\): a threshold needs labelled examples of both/ },
  ])('refuses $name with one clear line and exit 1', ({ name, lines, error }) => {
    const path = file(`${name.replace(/\W+/g, '-')}.jsonl`, lines);
    const r = calibrate('--data', path);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(path);
    expect(r.stderr).toMatch(error);
  });

  it('reads the file line by line, scoring each row as it comes, and reports progress every so many rows', async () => {
    // Three reads' worth of rows (a read stream's chunk is 64 KiB), so rows are cut across chunks too.
    const rows = Array.from({ length: 3 * Math.ceil((64 * 1024) / JSON.stringify(ROWS[0]).length / ROWS.length) }, () => ROWS).flat();
    const progress: number[] = [];
    const scores = await scoreCalibrationFile(file('streamed.jsonl', rows), (n) => progress.push(n), 100);
    expect(scores).toEqual(labelledScores(rows.map((r) => ({ sources: [...r.context, r.question!], question: r.question!, answer: r.answer, hallucinated: r.hallucinated }))));
    expect(progress).toEqual(Array.from({ length: Math.floor(rows.length / 100) }, (_, i) => (i + 1) * 100));
  });

  it('reads a long line arriving in many chunks once, not once per chunk', async () => {
    // A row padded to 400 KB (the padding is trimmed away), between two short rows, read 1 KB at a time.
    const text = [JSON.stringify(ROWS[0]), JSON.stringify(ROWS[1]) + ' '.repeat(400 * 1024), JSON.stringify(ROWS[2])].join('\n') + '\n';
    async function* chunks() {
      for (let i = 0; i < text.length; i += 1024) yield text.slice(i, i + 1024);
    }
    // Lines are found by splitting on line ends: the characters split that way are the work of finding them.
    const split = vi.spyOn(String.prototype, 'split');
    let scores, charsSplit;
    try {
      scores = await scoreCalibrationFile('long.jsonl', undefined, undefined, chunks());
      charsSplit = split.mock.calls.reduce((sum, args, i) => ((args[0] as unknown) === '\n' ? sum + String(split.mock.contexts[i]).length : sum), 0);
    } finally {
      split.mockRestore();
    }
    expect(scores).toEqual(labelledScores(ROWS.slice(0, 3).map((r) => ({ sources: [...r.context, r.question!], question: r.question!, answer: r.answer, hallucinated: r.hallucinated }))));
    expect(charsSplit).toBeGreaterThanOrEqual(text.length);
    expect(charsSplit).toBeLessThan(2 * text.length);
  });

  it('refuses a file that is not there', () => {
    const r = calibrate('--data', join(dir, 'missing.jsonl'));
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(`cannot read ${join(dir, 'missing.jsonl')}: no such file`);
  });

  it('needs --data', () => {
    const r = calibrate();
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("required option '--data <file>'");
  });
});
