import { describe, expect, it } from 'vitest';
import { formatClock, formatDuration, formatTime, showControls } from './format.js';

describe('formatTime', () => {
  it('labels the time zone', () => {
    const text = formatTime('2026-11-25T01:10:18.000Z');
    // "Nov 25, 2026, 1:10:18 AM UTC" (or the viewer's zone: GMT+1, CET, PST…)
    expect(text).toMatch(/\d{1,2}:\d{2}:\d{2}.*\b(UTC|GMT[+-]?\d*(:\d\d)?|[A-Z]{2,5})$/);
  });

  it('shows a dash for no time', () => {
    expect(formatTime(null)).toBe('—');
  });

  it('shows text that is no time as it is, instead of throwing', () => {
    expect(formatTime('yesterday')).toBe('yesterday');
  });
});

describe('formatDuration', () => {
  it.each([
    [86_400, '1 day'],
    [172_800, '2 days'],
    [3600, '1 hour'],
    [90 * 60, '90 minutes'],
    [1, '1 second'],
    [61, '61 seconds'],
    [0, '0 seconds'],
  ])('%i s is "%s"', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });
});

describe('formatClock', () => {
  // Local noon and the next day's 09:30 in the zone the test runs in.
  const noon = new Date(2026, 10, 30, 12, 0);
  const laterToday = new Date(2026, 10, 30, 20, 5).toISOString();
  const tomorrow = new Date(2026, 11, 1, 9, 30).toISOString();

  it('is the time alone today', () => {
    expect(formatClock(laterToday, noon.getTime())).toMatch(/^\d\d:05\s?(AM|PM)?\s\S+$/);
  });

  it('carries the date on another day, so that a retry tomorrow morning does not read as past', () => {
    const text = formatClock(tomorrow, noon.getTime());
    expect(text).toContain('1');
    expect(text).toMatch(/Dec/);
    expect(text).toMatch(/09:30/);
  });
});

describe('showControls', () => {
  it('shows control characters as their symbols, keeps line breaks and tabs, and says when bytes were not UTF-8', () => {
    expect(showControls('\u001b[31mred\u0007\u007f')).toEqual({ text: '␛[31mred␇␡', binary: false });
    expect(showControls('a\n\tb\r\n')).toEqual({ text: 'a\n\tb\r\n', binary: false });
    expect(showControls('\ufffd\u0001PNG')).toEqual({ text: '\ufffd␁PNG', binary: true });
  });
});
