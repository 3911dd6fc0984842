import { describe, expect, it } from 'vitest';
import { kleur } from '../src/output.js';

kleur.enabled = false;
import { formatReceivedLine } from '../src/delivery-line.js';

const line = (payload: Record<string, unknown>, wide = false) =>
  formatReceivedLine({ time: new Date('2026-01-01T12:03:04'), body: Buffer.from(JSON.stringify(payload)), headers: {}, signature: 'unchecked', wide });

describe('formatReceivedLine', () => {
  const base = { event: 'llm.request.completed', request_id: 'chatcmpl-1', status_code: 200, total_tokens: 46 };

  it('says "not checked" when the grounding check did not run, though the payload carries grounded: true by its types', () => {
    expect(line({ ...base, grounded: true, hallucination_score: 0, grounding_checked: false })).toMatch(/200 · 46 tok · not checked\n$/);
    expect(line({ ...base, grounded: true, hallucination_score: 0, grounding_checked: false }, true)).not.toContain('grounded');
  });

  it('prints the verdict when the check ran, and for payloads from before grounding_checked', () => {
    expect(line({ ...base, grounded: false, hallucination_score: 0.7, grounding_checked: true })).toMatch(/ · not grounded\n$/);
    expect(line({ ...base, grounded: true, hallucination_score: 0.1 })).toMatch(/ · grounded\n$/);
  });
});
