import { describe, expect, it } from 'vitest';
import { quoted } from './quoted.js';

describe('quoted', () => {
  it('keeps a value of up to 128 characters whole and cuts a longer one to its first 128, then …', () => {
    expect(quoted('resp_123')).toBe('resp_123');
    expect(quoted('x'.repeat(128))).toBe('x'.repeat(128));
    expect(quoted('x'.repeat(1_000_000))).toBe(`${'x'.repeat(128)}…`);
  });
});
