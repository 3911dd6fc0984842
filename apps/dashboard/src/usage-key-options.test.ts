import { describe, expect, it } from 'vitest';
import type { UsagePoint, UsageReport } from '@svc/protocol';
import { usageKeyOptions } from './usage-key-options.js';

type UsageKey = UsageReport['keys'][number];

function key(id: string, revoked: boolean, requests: number): UsageKey {
  const point: UsagePoint = {
    day: '2026-11-01..2026-11-30',
    requests,
    input_tokens: 0,
    output_tokens: 0,
    total_tokens: 0,
    errors_4xx: 0,
    errors_5xx: 0,
    latency_p50_ms: null,
    latency_p95_ms: null,
    grounding_checked: 0,
    ungrounded: 0,
    ungrounded_share: null,
  };
  return { key_id: id, name: id, prefix: `sk-${id}`, revoked, series: [], summary: point };
}

describe('usageKeyOptions', () => {
  it('lists active keys first, revoked keys with requests apart, and counts the unused revoked ones it leaves out', () => {
    const keys = [key('r1', true, 0), key('a1', false, 0), key('r2', true, 3), key('a2', false, 9), ...Array.from({ length: 300 }, (_, i) => key(`old${i}`, true, 0))];
    const options = usageKeyOptions(keys, '');
    expect(options.active.map((k) => k.key_id)).toEqual(['a1', 'a2']);
    expect(options.revoked.map((k) => k.key_id)).toEqual(['r2']);
    expect(options.hiddenRevoked).toBe(301);
  });

  it('keeps the chosen key listed even when revoked and unused (a bookmarked ?key=)', () => {
    const options = usageKeyOptions([key('a1', false, 0), key('r1', true, 0)], 'r1');
    expect(options.revoked.map((k) => k.key_id)).toEqual(['r1']);
    expect(options.hiddenRevoked).toBe(0);
  });
});
