import { describe, expect, it } from 'vitest';
import { kleur } from '../src/output.js';

kleur.enabled = false;
import { formatReceivedLine, formatSentLine } from '../src/delivery-line.js';
import { printable } from '../src/output.js';

// `width`: an 80-column terminal's line; `undefined`: the whole line (a pipe, a file, --wide).
const line = (payload: Record<string, unknown>, width: number | undefined = 80) =>
  formatReceivedLine({ time: new Date('2026-01-01T12:03:04'), body: Buffer.from(JSON.stringify(payload)), headers: {}, signature: 'unchecked', width });

describe('formatReceivedLine', () => {
  const base = { event: 'llm.request.completed', request_id: 'chatcmpl-1', status_code: 200, total_tokens: 46 };

  it('says "not checked" when the grounding check did not run, though the payload carries grounded: true by its types', () => {
    expect(line({ ...base, grounded: true, hallucination_score: 0, grounding_checked: false })).toMatch(/200 · 46 tok · not checked\n$/);
    expect(line({ ...base, grounded: true, hallucination_score: 0, grounding_checked: false }, undefined)).not.toContain('grounded');
  });

  it('says "refused" when the model refused (the payload carries refusal, its response_text "")', () => {
    const refused = { ...base, response_text: '', refusal: "I can't help with that.", grounded: true, hallucination_score: 0, grounding_checked: false };
    expect(line(refused, 120)).toMatch(/\] {2}200 · 46 tok · not checked · refused\n$/);
    // On 80 columns the token count gives way to it (as to the request id).
    expect(line(refused)).toMatch(/\] {2}200 · not checked · refused\n$/);
    expect(line({ ...refused, refusal: undefined })).not.toContain('refused');
  });

  it("prints a Responses API call's response_id on the whole line, where an app looks for the id it holds", () => {
    const whole = (payload: Record<string, unknown>) =>
      formatReceivedLine({ time: new Date('2026-01-01T12:03:04'), body: Buffer.from(JSON.stringify(payload)), headers: {}, signature: 'unchecked' });
    expect(whole({ ...base, response_id: 'resp_abc' })).toMatch(/\[chatcmpl-1\] {2}200 · .* · resp_abc\n$/);
    expect(whole(base)).not.toContain('resp_');
  });

  it('prints the verdict when the check ran, and for payloads from before grounding_checked', () => {
    expect(line({ ...base, grounded: false, hallucination_score: 0.7, grounding_checked: true })).toMatch(/ · not grounded\n$/);
    expect(line({ ...base, grounded: true, hallucination_score: 0.1 })).toMatch(/ · grounded\n$/);
  });
});

describe('request data is printed escaped, never as terminal control', () => {
  const hostile = {
    event: '\u001b[2J\u001b[H',
    request_id: '\u001b]0;pwned\u0007chatcmpl-1',
    model: 'gpt\u009b31m\u202e',
    status_code: 200,
  };

  it.each([false, true])('wide: %s', (wide) => {
    const text = formatReceivedLine({
      time: new Date('2026-01-01T12:03:04'),
      body: Buffer.from(JSON.stringify(hostile)),
      headers: { 'x-svc-delivery': 'whd_\u001b[31mred' },
      signature: 'invalid',
      width: wide ? undefined : 80,
    });
    // eslint-disable-next-line no-control-regex
    expect(text.slice(0, -1)).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
    expect(text).toContain('--> \\u001b[2J\\u001b[H');
    expect(text).toContain('[\\u001b]0;pwned');
    if (wide) expect(text).toMatch(/gpt\\u009b31m\\u202e 200 .* {2}whd_\\u001b\[31mred\n$/);
  });

  it('the event header too, and the delivery id of a forward line', () => {
    const text = formatReceivedLine({ time: new Date(), body: Buffer.from('not json'), headers: { 'x-svc-event': 'a\rb' }, signature: 'unchecked' });
    expect(text).toContain('--> a\\u000db');
    expect(formatSentLine(new Date(), 'http://localhost:3000/', { ok: true, status: 200, body: '' }, 'whd_\u001bc')).toContain('[whd_\\u001bc]');
  });
});

describe('printable', () => {
  it.each([
    ['plain text and non-ASCII letters stay', 'llm.request.completed · héllo 😀', 'llm.request.completed · héllo 😀'],
    ['C0, DEL and C1 controls', 'a\u0000\u0007\t\n\u007f\u0085\u009bz', 'a\\u0000\\u0007\\u0009\\u000a\\u007f\\u0085\\u009bz'],
    ['bidi overrides, zero-width and line separators', '\u202eabc\u200b\u2028', '\\u202eabc\\u200b\\u2028'],
    ['a lone surrogate', 'x\ud800y', 'x\\ud800y'],
    ['private use beyond the BMP, as a surrogate pair', '\u{f0000}', '\\udb80\\udc00'],
  ])('%s', (_name, input, expected) => {
    expect(printable(input)).toBe(expected);
  });

  it('keeps JSON meaning inside strings', () => {
    const json = JSON.stringify({ event: 'x\u2028y\u202e', id: 'a\u{f0000}' });
    expect(JSON.parse(printable(json))).toEqual(JSON.parse(json));
  });
});
