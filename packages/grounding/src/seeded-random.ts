/**
 * A small seeded generator (mulberry32) of numbers in [0, 1): the same sequence for the same seed on every run and
 * every machine, so that a calibration's draws or a probe's sample of documents can be made again.
 *
 * @example
 * const next = seededRandom(34);
 * const pick = <T>(xs: T[]) => xs[Math.floor(next() * xs.length)];
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
