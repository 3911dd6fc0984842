import { describe, expect, it } from 'vitest';
import { createGapTracker, type GapStore, type SequenceRange, type SequenceState } from './gap-tracker.js';

/** `'2-4, 7'` as ranges: keeps the tables short. */
function r(text: string): SequenceRange[] {
  if (text === '') return [];
  return text.split(', ').map((part) => {
    const [from, to = from] = part.split('-').map(Number);
    return { from: from!, to: to! };
  });
}

/** Tracks `sequences` of one stream in order and returns each report's `missing`. */
async function missingAfterEach(sequences: number[], start?: number): Promise<SequenceRange[][]> {
  const gaps = createGapTracker({ start });
  const out: SequenceRange[][] = [];
  for (const n of sequences) out.push((await gaps.track('user-1', n)).missing);
  return out;
}

const MAX = Number.MAX_SAFE_INTEGER;

describe('createGapTracker', () => {
  it.each<[string, number[], number | undefined, string[]]>([
    ['in order from 1', [1, 2, 3], 1, ['', '', '']],
    ['one dropped', [1, 2, 4, 5], 1, ['', '', '3', '3']],
    ['the dropped one arrives late and fills its hole', [1, 3, 4, 2], 1, ['', '2', '2', '']],
    ['several holes, filled out of order', [1, 5, 3, 2, 4], 1, ['', '2-4', '2, 4', '4', '']],
    ['a late one in the middle of a hole splits it', [1, 9, 5, 2, 8], 1, ['', '2-8', '2-4, 6-8', '3-4, 6-8', '3-4, 6-7']],
    ['two jumps make two holes', [1, 3, 6], 1, ['', '2', '2, 4-5']],
    ['the first ones missing, with start 1', [3, 4], 1, ['1-2', '1-2']],
    ['started mid-stream: nothing before the first number is missing', [41, 42, 44], undefined, ['', '', '43']],
    ['with start 10: numbers before it are ignored', [5, 10, 12], 10, ['', '', '11']],
  ])('%s', async (_name, sequences, start, expected) => {
    expect(await missingAfterEach(sequences, start)).toEqual(expected.map(r));
  });

  it('reports what each delivery skipped, late arrivals, and duplicates (retries, redeliveries) without changing anything', async () => {
    const gaps = createGapTracker({ start: 1 });
    const none = { missing: [], missingCount: 0, skipped: [], skippedCount: 0 };
    expect(await gaps.track('k', 1)).toEqual({ ...none, late: false, duplicate: false });
    const two = { missing: r('2-3'), missingCount: 2 };
    expect(await gaps.track('k', 4)).toEqual({ ...two, skipped: r('2-3'), skippedCount: 2, late: false, duplicate: false });
    expect(await gaps.track('k', 4)).toEqual({ ...two, skipped: [], skippedCount: 0, late: false, duplicate: true });
    expect(await gaps.track('k', 1)).toEqual({ ...two, skipped: [], skippedCount: 0, late: false, duplicate: true });
    const one = { missing: r('2'), missingCount: 1, skipped: [], skippedCount: 0 };
    expect(await gaps.track('k', 3)).toEqual({ ...one, late: true, duplicate: false });
    expect(await gaps.track('k', 3)).toEqual({ ...one, late: false, duplicate: true });
  });

  it('keeps streams apart', async () => {
    const gaps = createGapTracker();
    await gaps.track('a', 1);
    await gaps.track('b', 7);
    expect((await gaps.track('a', 3)).missing).toEqual(r('2'));
    expect((await gaps.track('b', 8)).missing).toEqual([]);
  });

  it.each<[string, number]>([
    ['30 million', 30_000_000],
    ['2^53 - 1 (the largest safe integer)', MAX],
  ])('a gap of %s is one range: reported at once, in constant memory, and late arrivals inside it split it', async (_name, last) => {
    const saved = new Map<string, SequenceState>();
    const gaps = createGapTracker({ store: { get: (s) => saved.get(s), set: (s, state) => void saved.set(s, state) } });
    const heapBefore = process.memoryUsage().heapUsed;
    const began = performance.now();
    await gaps.track('k', 1);
    expect(await gaps.track('k', last)).toMatchObject({ missing: r(`2-${last - 1}`), missingCount: last - 2, skipped: r(`2-${last - 1}`), skippedCount: last - 2 });
    expect(await gaps.track('k', 5)).toMatchObject({ missing: r(`2-4, 6-${last - 1}`), missingCount: last - 3, late: true });
    expect(await gaps.track('k', last - 1)).toMatchObject({ missing: r(`2-4, 6-${last - 2}`), missingCount: last - 4, late: true });
    expect(await gaps.track('k', 2)).toMatchObject({ missing: r(`3-4, 6-${last - 2}`), late: true });
    expect(await gaps.track('k', 5)).toMatchObject({ duplicate: true, missingCount: last - 5 });
    expect(saved.get('k')).toEqual({ highest: last, missing: r(`3-4, 6-${last - 2}`) });
    expect(performance.now() - began).toBeLessThan(100);
    // A list of every number would take hundreds of megabytes (or fail: `Invalid array length`).
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(5 * 1024 * 1024);
  });

  it('uses an asynchronous store, one track of a stream at a time', async () => {
    const saved = new Map<string, SequenceState>();
    const store: GapStore = {
      get: async (stream) => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        return saved.get(stream);
      },
      set: async (stream, state) => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        saved.set(stream, structuredClone(state));
      },
    };
    const gaps = createGapTracker({ store, start: 1 });
    const reports = await Promise.all([5, 1, 3, 2].map((n) => gaps.track('k', n)));
    expect(reports.map((report) => report.missing)).toEqual(['1-4', '2-4', '2, 4', '4'].map(r));
    expect(saved.get('k')).toEqual({ highest: 5, missing: r('4') });
    // A second tracker on the same store continues where the first stopped (a restarted receiver).
    expect(await createGapTracker({ store }).track('k', 6)).toEqual({
      missing: r('4'),
      missingCount: 1,
      skipped: [],
      skippedCount: 0,
      late: false,
      duplicate: false,
    });
  });

  it('reads a state stored by an earlier version (missing as a list of numbers) as ranges', async () => {
    const saved = new Map<string, unknown>([['k', { highest: 9, missing: [2, 3, 4, 7] }]]);
    const gaps = createGapTracker({ store: { get: (s) => saved.get(s) as SequenceState, set: (s, state) => void saved.set(s, state) } });
    expect(await gaps.track('k', 3)).toMatchObject({ missing: r('2, 4, 7'), missingCount: 3, late: true });
    expect(saved.get('k')).toEqual({ highest: 9, missing: r('2, 4, 7') });
  });

  it('reads a state half converted (numbers beside ranges, as two versions writing one store may leave) as ranges', async () => {
    const saved = new Map<string, unknown>([['k', { highest: 20, missing: [2, { from: 3, to: 5 }, 9, { from: 12, to: 14 }] }]]);
    const gaps = createGapTracker({ store: { get: (s) => saved.get(s) as SequenceState, set: (s, state) => void saved.set(s, state) } });
    expect(await gaps.track('k', 13)).toMatchObject({ missingCount: 7, late: true });
    expect(saved.get('k')).toEqual({ highest: 20, missing: [{ from: 2, to: 5 }, { from: 9, to: 9 }, { from: 12, to: 12 }, { from: 14, to: 14 }] });
  });

  it('a failing store fails that track only; the stream keeps working', async () => {
    let fail = true;
    const gaps = createGapTracker({
      store: {
        get: () => {
          if (fail) throw new Error('store down');
          return undefined;
        },
        set: () => undefined,
      },
    });
    await expect(gaps.track('k', 1)).rejects.toThrow('store down');
    fail = false;
    expect(await gaps.track('k', 1)).toEqual({ missing: [], missingCount: 0, skipped: [], skippedCount: 0, late: false, duplicate: false });
  });

  it('throws TypeError for misuse', () => {
    // @ts-expect-error start must be a number
    expect(() => createGapTracker({ start: '1' })).toThrow(TypeError);
    expect(() => createGapTracker({ start: 0 })).toThrow('[@svc/verify] start must be a positive integer.');
    const gaps = createGapTracker();
    expect(() => gaps.track('', 1)).toThrow('[@svc/verify] stream must be a non-empty string.');
    // @ts-expect-error the stream is a string
    expect(() => gaps.track(7, 1)).toThrow(TypeError);
    expect(() => gaps.track('k', 0)).toThrow('[@svc/verify] sequence must be a positive integer.');
    expect(() => gaps.track('k', 1.5)).toThrow(TypeError);
    expect(() => gaps.track('k', MAX + 1)).toThrow(TypeError);
    // @ts-expect-error the sequence is a number
    expect(() => gaps.track('k', '1')).toThrow(TypeError);
  });
});
