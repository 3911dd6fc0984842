import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_THRESHOLD_BYTES, DEFAULT_TRIM_BYTES, limitMallocRetention, mallocTuning } from '../index.js';

const APPLIED = { applied: true, bytes: DEFAULT_THRESHOLD_BYTES, trimBytes: DEFAULT_TRIM_BYTES };

const glibc = process.platform === 'linux' && process.report.getReport().header.glibcVersionRuntime !== undefined;
const CHILD = fileURLToPath(new URL('./retain-child.js', import.meta.url));

/** What the child reports: RSS held by 25 MB of blocks, and kept after they were freed. */
function retained(mode) {
  return JSON.parse(execFileSync(process.execPath, ['--expose-gc', CHILD, mode], { encoding: 'utf8', timeout: 30_000 }));
}

if (!glibc) console.warn('malloc-tune: not Linux with glibc; the mallopt tests are skipped (there is nothing to set)');

describe.skipIf(!glibc)('limitMallocRetention on glibc', () => {
  it('applies, and freed memory goes back to the system where glibc by default keeps it', () => {
    const untouched = retained('default');
    const tuned = retained('tuned');
    expect(tuned.tuning).toEqual(APPLIED);
    // Both processes really held the blocks…
    expect(untouched.heldMb).toBeGreaterThan(20);
    expect(tuned.heldMb).toBeGreaterThan(20);
    // …glibc's dynamic thresholds kept them after they were freed; fixed thresholds gave them back.
    expect(untouched.retainedMb).toBeGreaterThan(20);
    expect(tuned.retainedMb).toBeLessThan(3);
  });

  it('leaves thresholds set in the environment alone', () => {
    expect(limitMallocRetention({ env: { MALLOC_MMAP_THRESHOLD_: '65536' } })).toEqual({ applied: false, reason: 'set by the environment' });
    expect(limitMallocRetention({ env: { GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=0' } })).toEqual({ applied: false, reason: 'set by the environment' });
    expect(mallocTuning()).toEqual({ applied: false, reason: 'set by the environment' });
    expect(limitMallocRetention({ env: {} })).toEqual(APPLIED);
    expect(mallocTuning()).toEqual(APPLIED);
  });

  it('refuses a threshold that is not a byte count', () => {
    expect(() => limitMallocRetention({ bytes: 0, env: {} })).toThrow(RangeError);
    expect(() => limitMallocRetention({ bytes: 2 ** 31, env: {} })).toThrow(RangeError);
    expect(() => limitMallocRetention({ trimBytes: -1, env: {} })).toThrow(RangeError);
  });
});
