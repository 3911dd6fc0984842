import { describe, expect, it } from 'vitest';
import { createGapTracker, type GapStore, type SequenceState } from './gap-tracker.js';

/** Tracks `sequences` of one stream in order and returns each report's `missing`. */
async function missingAfterEach(sequences: number[], start?: number): Promise<number[][]> {
  const gaps = createGapTracker({ start });
  const out: number[][] = [];
  for (const n of sequences) out.push((await gaps.track('user-1', n)).missing);
  return out;
}

describe('createGapTracker', () => {
  it.each<[string, number[], number | undefined, number[][]]>([
    ['in order from 1', [1, 2, 3], 1, [[], [], []]],
    ['one dropped', [1, 2, 4, 5], 1, [[], [], [3], [3]]],
    ['the dropped one arrives late and fills its hole', [1, 3, 4, 2], 1, [[], [2], [2], []]],
    ['several holes, filled out of order', [1, 5, 3, 2, 4], 1, [[], [2, 3, 4], [2, 4], [4], []]],
    ['the first ones missing, with start 1', [3, 4], 1, [[1, 2], [1, 2]]],
    ['started mid-stream: nothing before the first number is missing', [41, 42, 44], undefined, [[], [], [43]]],
    ['with start 10: numbers before it are ignored', [5, 10, 12], 10, [[], [], [11]]],
  ])('%s', async (_name, sequences, start, expected) => {
    expect(await missingAfterEach(sequences, start)).toEqual(expected);
  });

  it('reports what each delivery skipped, late arrivals, and duplicates (retries, redeliveries) without changing anything', async () => {
    const gaps = createGapTracker({ start: 1 });
    expect(await gaps.track('k', 1)).toEqual({ missing: [], skipped: [], late: false, duplicate: false });
    expect(await gaps.track('k', 4)).toEqual({ missing: [2, 3], skipped: [2, 3], late: false, duplicate: false });
    expect(await gaps.track('k', 4)).toEqual({ missing: [2, 3], skipped: [], late: false, duplicate: true });
    expect(await gaps.track('k', 1)).toEqual({ missing: [2, 3], skipped: [], late: false, duplicate: true });
    expect(await gaps.track('k', 3)).toEqual({ missing: [2], skipped: [], late: true, duplicate: false });
    expect(await gaps.track('k', 3)).toEqual({ missing: [2], skipped: [], late: false, duplicate: true });
  });

  it('keeps streams apart', async () => {
    const gaps = createGapTracker();
    await gaps.track('a', 1);
    await gaps.track('b', 7);
    expect((await gaps.track('a', 3)).missing).toEqual([2]);
    expect((await gaps.track('b', 8)).missing).toEqual([]);
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
    expect(reports.map((r) => r.missing)).toEqual([[1, 2, 3, 4], [2, 3, 4], [2, 4], [4]]);
    expect(saved.get('k')).toEqual({ highest: 5, missing: [4] });
    // A second tracker on the same store continues where the first stopped (a restarted receiver).
    expect(await createGapTracker({ store }).track('k', 6)).toEqual({ missing: [4], skipped: [], late: false, duplicate: false });
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
    expect(await gaps.track('k', 1)).toEqual({ missing: [], skipped: [], late: false, duplicate: false });
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
    // @ts-expect-error the sequence is a number
    expect(() => gaps.track('k', '1')).toThrow(TypeError);
  });
});
