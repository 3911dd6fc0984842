import { afterEach, describe, expect, it } from 'vitest';
import { groundingReport } from '../src/grounding-report.js';
import { configureColors, kleur, streamColors } from '../src/output.js';

const answer = 'Paris is in France. It was built in 1925.';
const base = { dehallucinate_requested: true, checked: true, grounded: true, score: 0.93, flagged_spans: [] };
const enabled = kleur.enabled;
const colors = streamColors();

afterEach(() => {
  configureColors(true, colors);
  kleur.enabled = enabled;
});

describe('groundingReport', () => {
  it('reports not requested, not checked and grounded results in one line', () => {
    kleur.enabled = false;
    expect(groundingReport({ ...base, dehallucinate_requested: false, checked: false, score: 1 }, answer)).toBe('Grounding: not requested (--no-dehallucinate)\n');
    expect(groundingReport({ ...base, checked: false, score: 1 }, answer)).toMatch(/^Grounding: not checked/);
    expect(groundingReport(base, answer)).toBe('Grounding: ✔ grounded, score 0.93\n');
  });

  it('marks flagged spans in the answer (» « without colours) and lists them', () => {
    kleur.enabled = false;
    const report = groundingReport(
      { ...base, grounded: false, score: 0.41, flagged_spans: [{ start: 20, end: 41, text: 'It was built in 1925.', reason: 'unsupported number', score: 0.2 }] },
      answer,
    );
    expect(report).toBe(
      'Grounding: ✘ not grounded, score 0.41, 1 flagged span\n\nParis is in France. »It was built in 1925.«\n\n  1. "It was built in 1925." — unsupported number (score 0.20)\n',
    );
  });

  it('lists every claim with the passage that supports it', () => {
    kleur.enabled = false;
    const report = groundingReport(
      {
        ...base,
        grounded: false,
        score: 0.2,
        flagged_spans: [{ start: 36, end: 40, text: '1925', reason: 'number 1925 is not in the sources', score: 0 }],
        claims: [
          { start: 0, end: 19, text: 'Paris is in France.', score: 0.84, grounded: true, evidence: { message_index: 0, start: 4, end: 27, text: 'Paris is a city in France.', score: 1 } },
          { start: 20, end: 41, text: 'It was built in 1925.', score: 0.2, grounded: false, evidence: null },
        ],
      },
      answer,
    );
    expect(report.split('\n').slice(-6)).toEqual([
      'Claims (2), each with the passage that best supports it:',
      '  ✔ Paris is in France. (score 0.84)',
      '      evidence: message 0 [4-27] "Paris is a city in France." (1.00 of it found)',
      '  ✘ It was built in 1925. (score 0.20)',
      '      evidence: none (no source sentence shares a word with it)',
      '',
    ]);
  });

  it('highlights with colour when stderr, where the report goes, takes colours; marks without when only stdout does', () => {
    const flagged = { ...base, grounded: false, score: 0.41, flagged_spans: [{ start: 0, end: 5, text: 'Paris', reason: 'r', score: 0.1 }] };
    configureColors(true, { out: true, err: false });
    expect(groundingReport(flagged, answer)).toContain('»Paris« is in France.');
    configureColors(true, { out: false, err: true });
    const report = groundingReport({ ...base, grounded: false, score: 0.41, flagged_spans: [{ start: 0, end: 5, text: 'Paris', reason: 'r', score: 0.1 }] }, answer);
    expect(report).toMatch(/\u001b\[31m\u001b\[4mParis(\u001b\[\d+m)+ is in France\./);
  });
});
