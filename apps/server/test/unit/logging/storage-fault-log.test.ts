import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FAULT_SUMMARY_MS, RECOVERY_PROBE_MS, StorageFaultLog } from '../../../src/logging/storage-fault-log.js';

const FULL = { code: 'SQLITE_FULL', message: 'database or disk is full' };
const LOCKED = { code: '55P03', message: 'canceling statement due to lock timeout' };
const REQUEST = 'database unavailable: request answered 503';
const CLAIM = 'webhook worker could not claim deliveries; retrying';

describe('StorageFaultLog (database outage lines)', () => {
  let emitted: Array<{ level: string; fields: Record<string, unknown>; msg: string }>;
  let faults: StorageFaultLog;
  beforeEach(() => {
    vi.useFakeTimers();
    emitted = [];
    faults = new StorageFaultLog((level, fields, msg) => emitted.push({ level, fields, msg }));
  });
  afterEach(() => {
    faults.close();
    vi.useRealTimers();
  });

  it('logs the first line of each fault and place, counts the rest, summarises every minute, and says when the database is back', async () => {
    let down = true;
    faults.watch(async () => (down ? 'a write failed' : null));
    const written = [
      faults.admit({ err: FULL }, REQUEST),
      faults.admit({ err: FULL }, REQUEST),
      faults.admit({ err: FULL }, CLAIM),
      faults.admit({ err: FULL }, CLAIM),
      // Another fault in the same outage is not hidden behind the first.
      faults.admit({ err: LOCKED }, REQUEST),
      faults.admit({ msg: 'unrelated' }, 'webhook delivered'),
      faults.admit({ err: new Error('a bug') }, 'unhandled error'),
    ];
    expect(written).toEqual([true, false, true, false, true, true, true]);
    for (let i = 0; i < 100; i++) faults.admit({ err: FULL }, REQUEST);

    await vi.advanceTimersByTimeAsync(FAULT_SUMMARY_MS);
    const summary = emitted.find((e) => e.msg.startsWith('database still unavailable'))!;
    expect(summary.level).toBe('warn');
    expect(summary.fields.left_out).toEqual({ [REQUEST]: 101, [CLAIM]: 1 });
    expect(summary.fields.faults).toEqual([expect.stringMatching(/^SQLITE_FULL: /), expect.stringMatching(/^Postgres 55P03: /)]);

    // Nothing new left out: no summary.
    await vi.advanceTimersByTimeAsync(FAULT_SUMMARY_MS);
    expect(emitted.filter((e) => e.msg.startsWith('database still unavailable'))).toHaveLength(1);

    down = false;
    await vi.advanceTimersByTimeAsync(RECOVERY_PROBE_MS);
    const back = emitted.find((e) => e.msg === 'database available again')!;
    expect(back.fields).toMatchObject({ down_s: 125, kinds: ['SQLITE_FULL', 'Postgres 55P03'], lines: { [REQUEST]: 103, [CLAIM]: 2 } });
    // A new outage is logged afresh.
    expect(faults.admit({ err: FULL }, REQUEST)).toBe(true);
  });

  it('without a probe, an outage ends after a minute without a fault', async () => {
    expect(faults.admit({ fault: 'SQLITE_FULL: the disk is full' }, REQUEST)).toBe(true);
    expect(faults.admit({ fault: 'SQLITE_FULL: the disk is full' }, REQUEST)).toBe(false);
    await vi.advanceTimersByTimeAsync(FAULT_SUMMARY_MS);
    expect(emitted.map((e) => e.msg)).toEqual(['database available again']);
    expect(emitted[0]!.fields.lines).toEqual({ [REQUEST]: 2 });
    expect(faults.admit({ fault: 'SQLITE_FULL: the disk is full' }, REQUEST)).toBe(true);
  });
});
