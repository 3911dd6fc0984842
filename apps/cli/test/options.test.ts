import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parseTimeAgo } from '../src/options.js';

const NOW = Date.parse('2026-11-25T12:00:00.000Z');
const now = () => NOW;

describe('parseTimeAgo (--since, --until)', () => {
  it.each([
    ['90s', '2026-11-25T11:58:30.000Z'],
    ['30m', '2026-11-25T11:30:00.000Z'],
    ['2h', '2026-11-25T10:00:00.000Z'],
    ['7d', '2026-11-18T12:00:00.000Z'],
    ['1w', '2026-11-18T12:00:00.000Z'],
    ['2026-11-24T09:30:00Z', '2026-11-24T09:30:00.000Z'],
    ['2026-11-24T09:30:00+01:00', '2026-11-24T08:30:00.000Z'],
    ['2026-11-24', '2026-11-24T00:00:00.000Z'],
  ])('%s → %s', (given, expected) => {
    expect(parseTimeAgo(given, now)).toBe(expected);
  });

  it.each(['', '2 hours', 'yesterday', '-2h', '2y', '1764000000000', '2026-13-45'])('refuses %j with a one-line hint', (given) => {
    expect(() => parseTimeAgo(given, now)).toThrow(InvalidArgumentError);
    expect(() => parseTimeAgo(given, now)).toThrow(/duration back from now \(30m, 2h, 7d\) or an ISO 8601 time/);
  });
});
