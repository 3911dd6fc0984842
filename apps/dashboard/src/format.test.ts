import { describe, expect, it } from 'vitest';
import { formatTime } from './format.js';

describe('formatTime', () => {
  it('labels the time zone', () => {
    const text = formatTime('2026-11-25T01:10:18.000Z');
    // "Nov 25, 2026, 1:10:18 AM UTC" (or the viewer's zone: GMT+1, CET, PST…)
    expect(text).toMatch(/\d{1,2}:\d{2}:\d{2}.*\b(UTC|GMT[+-]?\d*(:\d\d)?|[A-Z]{2,5})$/);
  });

  it('shows a dash for no time', () => {
    expect(formatTime(null)).toBe('—');
  });
});
