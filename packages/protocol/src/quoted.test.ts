import { describe, expect, it } from 'vitest';
import { quoted } from './quoted.js';

describe('quoted', () => {
  it('keeps a value of up to 128 characters whole and cuts a longer one to its first 128, then …', () => {
    expect(quoted('resp_123')).toBe('resp_123');
    expect(quoted('x'.repeat(128))).toBe('x'.repeat(128));
    expect(quoted('x'.repeat(1_000_000))).toBe(`${'x'.repeat(128)}…`);
  });

  it('does not cut a character written as a surrogate pair in two: the message keeps no lone surrogate', () => {
    // 127 characters, then emoji: the 128th unit is the first half of one. Cut there, the answer's JSON carried
    // "\ud83d", which strict JSON readers (serde_json, for one) refuse as a lone surrogate.
    const cut = quoted(`${'x'.repeat(127)}${'😀'.repeat(1000)}`);
    expect(cut).toBe(`${'x'.repeat(127)}…`);
    expect(cut).not.toMatch(/[\ud800-\udfff]/);
    expect(quoted('😀'.repeat(1000))).toBe(`${'😀'.repeat(64)}…`);
  });
});
